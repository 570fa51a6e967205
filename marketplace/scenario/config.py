"""The scenario: one frozen, validated description of a run (what to run, on which data, how)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from marketplace.data.config import DataConfig
from marketplace.scenario.stc import StcConfig
from marketplace.scenario.sketch import SketchConfig
from marketplace.scenario.pfds import PfdsConfig
from marketplace.schema import Length, Range

PositiveFloat = Annotated[float, Range(min=0.0, min_open=True)]


@dataclass(frozen=True)
class PartiesConfig:
    owners: Annotated[int, Range(min=1, max=100_000)] = 4
    """K, the number of data owners (party ids owner-1 ... owner-K)."""
    owners_per_process: Annotated[int, Range(min=1)] | Literal["auto"] = "auto"
    """How many owners one OS process serves under the processes driver (an *owner host*). Each
    hosted owner stays a party of its own: its own id, socket, CURVE key, data share and counters;
    what hosted owners share is the process (so they are not isolated from each other's memory, and
    a fault of the process is a fault of all of them). ``1``: one process per owner. ``auto``: one
    host per core (at most K), owners split evenly. The selection, metrics and message counts do
    not depend on it."""


@dataclass(frozen=True)
class TransportConfig:
    """ZeroMQ settings; the in-process driver ignores all but ``max_message_bytes``."""

    endpoint: str = "tcp://127.0.0.1:0"
    """Where the curator binds and the others connect; port 0 lets the runner pick a free port."""
    heartbeat_interval_s: PositiveFloat = 0.5
    """How often ZeroMQ's I/O thread pings each connection (ZMTP heartbeats), and how often the
    curator sends an application ``heartbeat`` to a party it sent nothing else to."""
    heartbeat_timeout_s: PositiveFloat = 10.0
    """A connection whose peer answers no ZMTP heartbeat for this long is closed, and the peer is
    lost. The peer's I/O thread answers, not its role: a party busy computing is never lost for
    it; a stopped, dead or unreachable one is."""
    start_timeout_s: PositiveFloat = 60.0
    run_timeout_s: PositiveFloat = 1800.0
    progress_timeout_s: PositiveFloat = 30.0
    """A connected party the curator is waiting for (a hello, a bid, a point, a release, a bye)
    that does not deliver within this many seconds is dropped, with the reason in the report. It
    bounds each step a party computes before it answers (an endless computation cannot be told
    from a long one); heavy local work runs after the party's ``bye``, where nobody waits. A step
    the protocol declares larger than the reference gets this times its scale, at most
    ``run_timeout_s`` (pfds: round 2 and the closing get this times sharers / 10 with more than ten sharers)."""
    max_message_bytes: Annotated[int, Range(min=1024)] = 64 * 1024 * 1024
    high_water_mark: Annotated[int, Range(min=1)] = 10_000
    send_timeout_s: PositiveFloat = 10.0
    """A peer that does not read what is sent to it for this long is dropped (sends never block)."""
    max_queued_frames: Annotated[int, Range(min=1)] = 10_000
    """Frames that may wait for one peer that is not reading; more, and the peer is dropped."""
    refusal_budget: Annotated[int, Range(min=1)] = 50
    """Refused frames one connection may send in a second; past that its frames are dropped unread
    for ``quarantine_s`` (a flood of junk then costs a read, not a decode)."""
    quarantine_s: PositiveFloat = 5.0
    finish_timeout_s: PositiveFloat = 600.0
    """After the curator exits, a party still running gets ``heartbeat_timeout_s + 5`` s to follow;
    one that is still computing then (an owner fitting its model after its ``bye``) gets up to this
    long. A party that uses no CPU, or one the curator dropped, is killed at the first limit."""
    security: Literal["curve", "none"] = "curve"
    """``curve``: every link authenticated and encrypted with CURVE, each party bound to its key;
    ``none`` (or ``--insecure``): plaintext, for development only."""
    curve_keys: str | None = None
    """Folder of the run's certificates (``marketplace keys generate``); relative to the scenario
    file. ``marketplace run`` makes fresh ones in its output folder when this is not set."""

    def __post_init__(self) -> None:
        if self.heartbeat_timeout_s <= 2 * self.heartbeat_interval_s:
            raise ValueError("heartbeat_timeout_s must exceed twice heartbeat_interval_s")
        if not self.endpoint.startswith(("tcp://", "ipc://")):
            raise ValueError(f"endpoint must start with tcp:// or ipc://, got {self.endpoint!r}")


@dataclass(frozen=True)
class NoiseConfig:
    """Where each party's privacy noise comes from, and so who else could recompute (and strip) it
    (docs/privacy.md, "Who can strip the noise"; :mod:`marketplace.privacy.noise`)."""

    source: Literal["auto", "seed", "keys"] = "auto"
    """``seed``: from the run seed alone, so every party of the run could strip every other party's
    noise (a simulation's choice, and the report says so). ``keys``: from the run seed and the party's
    own noise key (``<party>.noise_key``: in ``keys``, in the party's key folder or kit; a party with
    no key file draws a fresh key that nobody else ever holds). ``auto``: ``seed`` under ``marketplace
    run``, ``keys`` for a party started on its own (``marketplace owner|owners|curator|consumer``)."""
    keys: str | None = None
    """Folder of noise key files (``<party>.noise_key``, or ``<party>/<party>.noise_key`` as in a
    folder of kits); relative to the scenario file. ``marketplace run`` with ``source: keys`` and no
    folder makes fresh keys in its output folder's ``keys/``."""


@dataclass(frozen=True)
class SummarizePrivacy:
    """The private form of `summarize` (docs/design.md §3): h2 releases and PRIVAUCTION.

    Defaults are the paper's settings. Every eps here is *per MWEM iteration* as the project's h2
    implements it (an iteration costs exactly eps: eps/2 selection, eps/2 measurement, sensitivity
    2), or per auction round for ``eps_auction``.
    """

    enabled: bool = False
    eps_validation: PositiveFloat = 0.01
    """eps_v: per iteration of the one-off release of g~ = h2(h1(D_v)), T_init iterations."""
    eps_first_round: PositiveFloat = 0.05
    """eps_{l=1}: per iteration of round 1's release of g_1 (T_init iterations on D_init)."""
    eps_later_rounds: PositiveFloat | None = None
    """eps_{l>1} per iteration (T_sub per round); default 0.01 / sqrt(p * T_sub)."""
    t_init: Annotated[int, Range(min=1)] | None = None
    """Iterations of the first release of each embedding; default floor(d^1.5) (1656 for d = 140)."""
    t_sub: Annotated[int, Range(min=1)] = 5
    """Iterations per later round (warm start from the previous state)."""
    eps_auction: Annotated[float, Range(min=0.0)] = 0.1
    """eps_auc: per round. Under ``composed``, the round's whole selection of owners to ask changes by
    at most e^eps_auc when one owner's points change, given the earlier rounds' selections (rounds
    compose); under the older rules, one owner's request bit given the curator's state."""
    auction: Literal["composed", "two_sided", "paper"] = "composed"
    """``composed``: a set of ``requests_per_round`` owners with probability proportional to
    e^{eps_auc x (how many of them are among the best ranks)}; every round's whole selection is
    eps_auc-DP given the earlier ones, so R rounds are R eps_auc-DP for everything an owner sees
    of the auction. ``two_sided``: the request schedule that bounds both "asked" and "not asked"
    by e^eps_auc *given the curator's state*; the rounds do not compose (the state depends on
    other owners' data), so R eps_auc does not bound an owner's view (the run warns). ``paper``:
    the paper's coins, rank r asked with probability exp(-eps_auc (r - 1)), rank 1 always; only
    (eps_auc, 1 - e^-eps_auc)-DP per round given the state (opt-in, the run warns)."""
    requests_per_round: Annotated[int, Range(min=1)] | Literal["auto"] = 1
    """``composed`` and ``two_sided``: how many owners are asked each round besides those due under
    tau (the most parsimonious, 1, is the default). ``auto``: as many as the paper's coins ask on
    average."""
    tau: Annotated[int, Range(min=1)] = 5
    """An owner is asked at its tau-th bid since it was last asked."""
    release: Literal["gaussian", "mwem_last", "mwem_call_average", "mwem_paper"] = "gaussian"
    """How g~ and g_l are released (all at the same (eps, delta) per protected dataset):
    ``mwem_paper`` averages every MWEM iterate since the start (the paper's h2); ``mwem_call_average``
    averages each call's iterates; ``mwem_last`` takes the last iterate; ``gaussian`` adds Gaussian
    noise to the mean embedding (zCDP), calibrated to the total the MWEM schedule spends. See docs/experiments.md for how they compare."""
    theorem: Literal["basic", "advanced", "optimal", "zcdp"] = "advanced"
    """How the MWEM releases' steps compose."""
    gaussian_accountant: Literal["exact", "zcdp"] = "exact"
    """``gaussian`` release: how its noise is calibrated and its ledgers state (eps, delta).
    ``exact``: the Gaussian mechanism's own privacy-loss distribution (the tightest valid figure);
    ``zcdp``: as rho-zCDP converted by Canonne–Kamath–Steinke (looser: more noise for the same
    budget). ``secure`` mode always uses ``zcdp`` (OpenDP certifies its discrete Gaussian in zCDP)."""
    delta_validation: Annotated[float, Range(min=0.0, max=1.0, min_open=True, max_open=True)] = 0.01
    delta_summary: Annotated[float, Range(min=0.0, max=1.0, min_open=True, max_open=True)] = 1e-4
    budget_validation: PositiveFloat | None = None
    """Refuse to start if D_v's planned total eps (by ``theorem``) exceeds this."""
    budget_summary: PositiveFloat | None = None
    """Refuse to start if the owners' points in D_s would get a planned total eps above this."""
    secure: bool = False
    """Draw noise from OS entropy with OpenDP's exact samplers (not reproducible from the seed)."""


@dataclass(frozen=True)
class SummarizeConfig:
    """The summarization protocol (docs/design.md §3), non-private form."""

    rounds: Annotated[int, Range(min=1)] = 50
    """p: points added to the summary, one per round."""
    gamma: PositiveFloat = 0.1
    """RBF kernel exp(-gamma ||x - y||^2)."""
    features: Annotated[int, Range(min=2)] = 140
    """d: random Fourier features in h1."""
    verify_tolerance: Annotated[float, Range(min=0.0)] = 1e-9
    """Relative tolerance when the curator recomputes a received point's bid."""
    svm_c: PositiveFloat = 1.0
    """C of the linear SVM trained on each summary to measure downstream accuracy."""
    baselines: tuple[Literal["uniform", "exact_greedy"], ...] = ("uniform", "exact_greedy")
    owner_features: Literal["float64", "float32"] = "float64"
    """How owners store h1 of their rows: float32 halves memory and bid time on large owners; the
    bid sent is still recomputed in float64 from the chosen row, so the curator's check is exact."""
    curator: Literal["trusted", "less_trusted"] = "trusted"
    """``less_trusted``: the curator sees h1 embeddings only; points reach the consumer sealed."""
    privacy: SummarizePrivacy = field(default_factory=SummarizePrivacy)


@dataclass(frozen=True)
class SweepConfig:
    """Run the scenario over a grid: every combination of the ``vary`` values, ``repeats`` times each
    (seeds seed, seed + 1, ...). ``marketplace run`` sweeps when this has keys (or with --sweep)."""

    vary: dict[str, Annotated[tuple[bool | int | float | str, ...], Length(min=1)]] = field(default_factory=dict)
    """Dotted scenario key -> the values it takes, e.g. {summarize.rounds: [50, 100, 150]}."""
    repeats: Annotated[int, Range(min=1, max=10_000)] = 1


@dataclass(frozen=True)
class ScenarioConfig:
    name: Annotated[str, Length(min=1, max=200)]
    protocol: Literal["summarize", "stc", "sketch", "pfds"]
    seed: Annotated[int, Range(min=0, max=2**63 - 1)] = 0
    description: str = ""
    parties: PartiesConfig = field(default_factory=PartiesConfig)
    data: DataConfig = field(default_factory=DataConfig)
    summarize: SummarizeConfig = field(default_factory=SummarizeConfig)
    stc: StcConfig = field(default_factory=StcConfig)
    sketch: SketchConfig = field(default_factory=SketchConfig)
    pfds: PfdsConfig = field(default_factory=PfdsConfig)
    transport: TransportConfig = field(default_factory=TransportConfig)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
