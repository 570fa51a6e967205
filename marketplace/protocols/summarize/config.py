"""The `summarize:` section of a scenario: the summarization protocol's settings, non-private and
private (PRIVAUCTION and the h2 releases)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from marketplace.schema import Range, SchemaError

PositiveFloat = Annotated[float, Range(min=0.0, min_open=True)]

# The ranges where the protocol's arithmetic holds (refused at validation, not met as an overflow mid-run).
Epsilon = Annotated[
    float,
    Range(
        min=1e-6,
        max=1e6,
        reason="noise scales 1/eps and their squares stay finite; MWEM's weights exp(eps u) are taken "
        "relative to their largest",
    ),
]
AuctionEpsilon = Annotated[
    float, Range(min=0.0, max=100.0, reason="e^eps_auc is formed as an exact integer; exp() overflows past 709")
]
Delta = Annotated[
    float,
    Range(min=1e-12, max=0.5, reason="the Gaussian accountants resolve delta in float64 within it"),
]
Scale = Annotated[float, Range(min=1e-6, max=1e6, reason="the kernel's frequencies sqrt(2 gamma) stay finite")]
Count = Annotated[int, Range(min=1, max=1_000_000, reason="a count of steps or rounds one run can carry out")]


@dataclass(frozen=True)
class SummarizePrivacy:
    """The private form of `summarize` (docs/design.md §3): h2 releases and PRIVAUCTION.

    Defaults are the paper's settings. Every eps here is *per MWEM iteration* as the project's h2
    implements it (an iteration costs exactly eps: eps/2 selection, eps/2 measurement, sensitivity
    2), or per auction round for ``eps_auction``.
    """

    enabled: bool = False
    eps_validation: Epsilon = 0.01
    """eps_v: per iteration of the one-off release of g~ = h2(h1(D_v)), T_init iterations."""
    eps_first_round: Epsilon = 0.05
    """eps_{l=1}: per iteration of round 1's release of g_1 (T_init iterations on D_init)."""
    eps_later_rounds: Epsilon | None = None
    """eps_{l>1} per iteration (T_sub per round); default 0.01 / sqrt(p * T_sub)."""
    total_epsilon: Epsilon | None = None
    """The eps that the owners' points in D_s get over the whole run, as the ``D_s`` ledger states
    it (by ``theorem``, or by ``gaussian_accountant`` for the ``gaussian`` release, at
    ``delta_summary``); the per-iteration values are derived from it. ``gaussian``: the rounds'
    releases are calibrated so that all p - 1 of them compose to exactly this. MWEM releases:
    ``eps_first_round`` and ``eps_later_rounds`` (at its default) are scaled by one common factor,
    keeping their ratio, so that the whole planned schedule composes to exactly this. Default
    (null): the per-iteration values as given. Covers neither ``consumer:D_v`` nor the ``auction``
    ledger (``eps_auction`` per round); cannot be set together with ``eps_later_rounds``."""
    t_init: Count | None = None
    """Iterations of the first release of each embedding; default floor(d^1.5) (1656 for d = 140)."""
    t_sub: Count = 5
    """Iterations per later round (warm start from the previous state)."""
    eps_auction: AuctionEpsilon = 0.1
    """eps_auc: per round. Under ``composed``, the round's whole selection of owners to ask changes by
    at most e^eps_auc when one owner's points change, given the earlier rounds' selections (rounds
    compose); under ``two_sided`` and ``paper``, one owner's request bit given the curator's state."""
    auction: Literal["composed", "two_sided", "paper"] = "composed"
    """``composed``: a set of ``requests_per_round`` owners with probability proportional to
    e^{eps_auc x (how many of them are among the best ranks)}; every round's whole selection is
    eps_auc-DP given the earlier ones, so R rounds are R eps_auc-DP for everything an owner sees
    of the auction. ``two_sided``: the request schedule that bounds both "asked" and "not asked"
    by e^eps_auc *given the curator's state*; the rounds do not compose (the state depends on
    other owners' data), so R eps_auc does not bound an owner's view (the run warns). ``paper``:
    the paper's coins, rank r asked with probability exp(-eps_auc (r - 1)), rank 1 always; only
    (eps_auc, 1 - e^-eps_auc)-DP per round given the state (opt-in, the run warns)."""
    requests_per_round: Count | Literal["auto"] = 1
    """``composed`` and ``two_sided``: how many owners are asked each round besides those due under
    tau (the most parsimonious, 1, is the default). ``auto``: as many as the paper's coins ask on
    average."""
    tau: Count = 5
    """An owner is asked at its tau-th bid since it was last asked."""
    release: Literal["gaussian", "mwem_last", "mwem_call_average", "mwem_paper"] = "gaussian"
    """How g~ and g_l are released (all at the same (eps, delta) per protected dataset):
    ``mwem_paper`` averages every MWEM iterate since the start (the paper's h2); ``mwem_call_average``
    averages each call's iterates; ``mwem_last`` takes the last iterate; ``gaussian`` adds Gaussian
    noise to the mean embedding (zCDP), calibrated to the total the MWEM schedule spends. See docs/experiments.md for
    how they compare."""
    theorem: Literal["basic", "advanced", "optimal", "zcdp"] = "advanced"
    """How the MWEM releases' steps compose."""
    gaussian_accountant: Literal["exact", "zcdp"] = "exact"
    """``gaussian`` release: how its noise is calibrated and its ledgers state (eps, delta).
    ``exact``: the Gaussian mechanism's own privacy-loss distribution (the tightest valid figure);
    ``zcdp``: as rho-zCDP converted by Canonne–Kamath–Steinke (looser: more noise for the same
    budget). ``secure`` mode always uses ``zcdp`` (OpenDP certifies its discrete Gaussian in zCDP)."""
    delta_validation: Delta = 0.01
    delta_summary: Delta = 1e-4
    budget_validation: PositiveFloat | None = None
    """Refuse to start if D_v's planned total eps (by ``theorem``) exceeds this."""
    budget_summary: PositiveFloat | None = None
    """Refuse to start if the owners' points in D_s would get a planned total eps above this."""
    secure: bool = False
    """Draw noise from OS entropy with OpenDP's exact samplers (not reproducible from the seed)."""

    def __post_init__(self) -> None:
        if self.total_epsilon is not None and self.eps_later_rounds is not None:
            raise SchemaError(
                "summarize.privacy.total_epsilon",
                "either total_epsilon or eps_later_rounds (the total "
                "budget derives the per-iteration eps; drop the other, e.g. with --set "
                "summarize.privacy.eps_later_rounds=null)",
                f"both: total_epsilon = {self.total_epsilon}, eps_later_rounds = {self.eps_later_rounds}",
            )


@dataclass(frozen=True)
class SummarizeConfig:
    """The summarization protocol (docs/design.md §3), non-private form."""

    rounds: Count = 50
    """p: points added to the summary, one per round."""
    gamma: Scale = 0.1
    """RBF kernel exp(-gamma ||x - y||^2)."""
    features: Annotated[int, Range(min=2, max=100_000, reason="d floats per row and d^1.5 MWEM iterations")] = 140
    """d: random Fourier features in h1."""
    verify_tolerance: Annotated[float, Range(min=0.0, max=1.0)] = 1e-9
    """Relative tolerance when the curator recomputes a received point's bid."""
    svm_c: Annotated[float, Range(min=1e-6, max=1e6, reason="the SVM's solver converges within it")] = 1.0
    """C of the linear SVM trained on each summary to measure downstream accuracy."""
    baselines: tuple[Literal["uniform", "exact_greedy"], ...] = ("uniform", "exact_greedy")
    owner_features: Literal["float64", "float32"] = "float64"
    """How owners store h1 of their rows: float32 halves memory and bid time on large owners; the
    bid sent is still recomputed in float64 from the chosen row, so the curator's check is exact."""
    curator: Literal["trusted", "less_trusted"] = "trusted"
    """``less_trusted``: the curator sees h1 embeddings only; points reach the consumer sealed."""
    privacy: SummarizePrivacy = field(default_factory=SummarizePrivacy)
    spending_budget: Annotated[float, Range(min=0.0, max=1e12)] | None = None
    """The most the consumer pays for points, at the owners' posted prices (their sale terms): the
    curator never asks for a point it cannot pay for, and the run ends when nothing affordable is
    left. None: no limit."""

    def __post_init__(self) -> None:
        total = self.privacy.total_epsilon
        if total is not None and not self.privacy.enabled:
            raise SchemaError(
                "summarize.privacy.total_epsilon",
                "a private run (summarize.privacy.enabled: true)",
                f"total_epsilon = {total} with the non-private protocol, which would ignore it",
            )
        if total is not None and self.rounds < 2:
            raise SchemaError(
                "summarize.privacy.total_epsilon",
                "summarize.rounds >= 2 (round 1's release holds no "
                "owner's point, so a one-round run spends nothing on D_s)",
                f"rounds = {self.rounds}",
            )
