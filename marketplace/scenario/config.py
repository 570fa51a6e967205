"""The scenario: one frozen, validated description of a run (what to run, on which data, how)."""

from __future__ import annotations

from dataclasses import Field, dataclass, field, make_dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from marketplace import plugins
from marketplace.data.config import DataConfig
from marketplace.privacy.lifetime.terms import SaleTerms
from marketplace.schema import Length, Range

Seconds = Annotated[
    float,
    Range(
        min=0.0,
        max=1e6,
        min_open=True,
        reason="ZeroMQ takes its timeouts as C ints of milliseconds (at most 2^31 - 1 ms, about 24 days)",
    ),
]


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
    heartbeat_interval_s: Seconds = 0.5
    """How often ZeroMQ's I/O thread pings each connection (ZMTP heartbeats), and how often the
    curator sends an application ``heartbeat`` to a party it sent nothing else to. With more than
    ``heartbeat_interval_s / 0.0005`` parties (1,000 with the default) it and the timeout are
    stretched by the same factor, to 0.5 ms per party, so that heartbeats stay a small share of the
    work (5 s and 100 s at 10,000 owners)."""
    heartbeat_timeout_s: Seconds = 10.0
    """A connection whose peer answers no ZMTP heartbeat for this long is closed, and the peer is
    lost. The peer's I/O thread answers, not its role: a party busy computing is never lost for
    it; a stopped, dead or unreachable one is (a party whose process exits is seen at once)."""
    start_timeout_s: Seconds = 60.0
    """A party that has not connected is lost once this long has passed with no party arriving (its
    first accepted frame): while others keep arriving the wait goes on, so thousands of owners whose
    CURVE handshakes queue up are not dropped for being slow; one that never comes is lost this long
    after the last arrival (``run_timeout_s`` bounds it all)."""
    run_timeout_s: Seconds = 1800.0
    progress_timeout_s: Seconds = 30.0
    """A connected party the curator is waiting for (a hello, a bid, a point, a release, a bye)
    that does not deliver within this many seconds is dropped, with the reason in the report. It
    bounds each step a party computes before it answers (an endless computation cannot be told
    from a long one); heavy local work runs after the party's ``bye``, where nobody waits. A step
    the protocol declares larger than the reference gets this times its scale, at most
    ``run_timeout_s`` (pfds: round 2 and the closing get this times sharers / 10 with more than ten sharers)."""
    max_message_bytes: Annotated[int, Range(min=1024)] = 64 * 1024 * 1024
    high_water_mark: Annotated[int, Range(min=1)] = 10_000
    send_timeout_s: Seconds = 10.0
    """A peer that does not read what is sent to it for this long is dropped (sends never block)."""
    max_queued_frames: Annotated[int, Range(min=1)] = 10_000
    """Frames that may wait for one peer that is not reading; more, and the peer is dropped."""
    refusal_budget: Annotated[int, Range(min=1)] = 50
    """Refused frames one connection may send in a second; past that its frames are dropped unread
    for ``quarantine_s`` (a flood of junk then costs a read, not a decode)."""
    quarantine_s: Seconds = 5.0
    finish_timeout_s: Seconds = 600.0
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
    run``, ``keys`` for a party started on its own (``marketplace owner|owners|curator|consumer``) and
    whenever ``keys`` names a folder."""
    keys: str | None = None
    """Folder of noise key files (``<party>.noise_key``, or ``<party>/<party>.noise_key`` as in a
    folder of kits); relative to the scenario file. Setting it uses those keys (``source: auto``
    then means ``keys``); with ``source: seed`` it is refused, as a contradiction. ``marketplace run``
    with ``source: keys`` and no folder makes fresh keys in its output folder's ``keys/``."""

    def __post_init__(self) -> None:
        if self.source == "seed" and self.keys is not None:
            raise ValueError(
                f"noise.keys names a folder of noise keys ({self.keys}) but noise.source is 'seed', which "
                "uses no key: set noise.source to 'keys' (or 'auto') to use the keys, or leave noise.keys "
                "unset for seed-derived noise"
            )


LIFETIME_EPSILON = Range(
    min=1e-6,
    max=1e6,
    reason="the zcdp filter's rho = (sqrt(eps + L) - sqrt(L))^2, L = ln(1/delta), keeps its digits and the "
    "ledger's sums stay finite",
)
"""The eps of a lifetime budget (a scenario's ``lifetime`` budgets, a market's ``budget``)."""


@dataclass(frozen=True)
class BudgetConfig:
    """A lifetime budget: (epsilon, delta) under the section's neighbouring relation."""

    epsilon: Annotated[float, LIFETIME_EPSILON] = 1.0
    delta: Annotated[float, Range(min=0.0, max=1.0, max_open=True)] = 0.0


@dataclass(frozen=True)
class SaleTermsConfig:
    """An owner's sale terms (docs/privacy.md, "Sale terms"): what a protocol that sells data points
    (summarize) may buy of its data, and what every release pays for the privacy it costs the owner,
    recorded on its lifetime ledger beside the privacy charges."""

    price: Annotated[float, Range(min=0.0, max=1e12)] = 0.0
    """The price of one data point sold."""
    points: Annotated[int, Range(min=0, max=1e12)] | None = None
    """The points the owner sells over its whole life, to every consumer together. None: no limit."""
    points_per_consumer: Annotated[int, Range(min=0, max=1e12)] | None = None
    """The points it sells to any one consumer (by the consumer's name). None: no limit."""
    price_per_eps: Annotated[float, Range(min=0.0, max=1e12)] = 0.0
    """The price of one unit of eps of privacy loss, under the ledger's neighbouring relation
    (``lifetime.relation``): every release (sketch, stc, pfds, summarize) pays it times the eps its
    ledger charged (docs/privacy.md, "Privacy prices")."""

    def sale_terms(self) -> SaleTerms:
        """These terms, as the lifetime ledger takes them."""
        return SaleTerms(
            price=self.price,
            points=self.points,
            points_per_consumer=self.points_per_consumer,
            price_per_eps=self.price_per_eps,
        )


@dataclass(frozen=True)
class LifetimeConfig:
    """Lifetime privacy ledgers (docs/privacy.md, "Lifetime budgets"): when ``ledgers`` names a
    folder, every owner charges this run's declared cost to its own durable ledger there
    (``<owner>.ledger.sqlite``) before it releases anything, and declines the run when the cost does
    not fit what is left; the run goes on without it. Off by default (a one-off simulation)."""

    ledgers: str | None = None
    """Folder of the parties' lifetime ledgers; relative to the scenario file. A party started from
    its kit keeps its ledger in its kit folder whatever this says."""
    budget: BudgetConfig = field(default_factory=BudgetConfig)
    """The lifetime budget of an owner whose ledger is created by this run (an existing ledger keeps
    the budget it was created with)."""
    owner_budgets: dict[str, BudgetConfig] = field(default_factory=dict)
    """Owner id -> its own lifetime budget, instead of ``budget``, when its ledger is created."""
    relation: Literal["add/remove-one", "replace-one", "replace-one-distinct"] = "add/remove-one"
    """The neighbouring relation the budgets are stated under (a record of the owner's data):
    ``replace-one-distinct`` is a replacement of one point by a point that duplicates none of the owner's
    other points, the relation the ``summarize`` auction holds under (docs/privacy.md, "Sale terms")."""
    filter: Literal["basic", "zcdp"] = "basic"
    """The privacy filter of a ledger created by this run: ``basic`` composition of (eps, delta), or
    ``zcdp`` (needs delta > 0)."""
    request_id: Annotated[str, Length(min=1, max=128)] | None = None
    """This request's id, under which every owner charges it: a retried request with the same id is
    never charged twice (and never released twice). None: ``marketplace run`` draws a fresh one."""
    consumer: Annotated[str, Length(min=1, max=64)] = "consumer"
    """Who is asking: the name every charge is recorded under."""
    consumer_quota: BudgetConfig | None = None
    """An owner's cap on what one consumer's requests may be charged together (on top of the owner's
    global budget, which bounds every consumer together). None: no per-consumer cap."""
    consumer_budget: BudgetConfig | None = None
    """The consumer's own lifetime budget for what the run releases about its target data (D_v),
    charged to ``<consumer>.ledger.sqlite`` in ``ledgers``. None: the consumer keeps no ledger."""
    terms: SaleTermsConfig | None = None
    """The sale terms of every owner whose own ``owner_terms`` are not given: the price of a data point,
    and how many points it sells in its lifetime and to any one consumer. None: no terms (a protocol that
    sells points records no sale)."""
    owner_terms: dict[str, SaleTermsConfig] = field(default_factory=dict)
    """Owner id -> its own sale terms, instead of ``terms``."""
    spending_budget: Annotated[float, Range(min=0.0, max=1e12)] | None = None
    """The consumer's money for this request's privacy prices (every owner's ``price_per_eps`` times the
    eps its ledger would charge): a request priced above it is refused before any owner reserves
    anything. None: no limit. (``summarize.spending_budget`` bounds what the auction pays for points.)"""

    def __post_init__(self) -> None:
        if self.filter == "zcdp":
            budgets = {
                "budget": self.budget,
                **{f"owner_budgets.{k}": v for k, v in self.owner_budgets.items()},
                **({"consumer_budget": self.consumer_budget} if self.consumer_budget is not None else {}),
                **({"consumer_quota": self.consumer_quota} if self.consumer_quota is not None else {}),
            }
            for key, value in budgets.items():
                if value.delta <= 0:
                    raise ValueError(
                        f"lifetime.{key}.delta must be > 0 under the zcdp filter (its budget is stated as "
                        f"(eps, delta) and converted to a rho), got {value.delta}"
                    )

    def budget_of(self, party: str) -> BudgetConfig:
        """The lifetime budget a new ledger of ``party`` is created with."""
        return self.owner_budgets.get(party, self.budget)

    def terms_of(self, party: str) -> SaleTerms | None:
        """The sale terms of ``party``: its own, else ``terms``; None when neither is set."""
        terms = self.owner_terms.get(party, self.terms)
        return None if terms is None else terms.sale_terms()


@dataclass(frozen=True)
class SweepConfig:
    """Run the scenario over a grid: every combination of the ``vary`` values, ``repeats`` times each
    (seeds seed, seed + 1, ...). ``marketplace run`` sweeps when this has keys (or with --sweep)."""

    vary: dict[str, Annotated[tuple[bool | int | float | str, ...], Length(min=1)]] = field(default_factory=dict)
    """Dotted scenario key -> the values it takes, e.g. {summarize.rounds: [50, 100, 150]}."""
    repeats: Annotated[int, Range(min=1, max=10_000)] = 1


def _scenario_fields() -> list[tuple[str, Any, Any]]:
    """The scenario's keys: the generic ones, then one section per registered protocol
    (:mod:`marketplace.plugins`), each defaulted."""
    specs = plugins.protocols()
    head: list[tuple[str, Any, Any]] = [
        ("name", Annotated[str, Length(min=1, max=200)], field()),
        ("protocol", Literal[tuple(specs)], field()),
        ("seed", Annotated[int, Range(min=0, max=2**63 - 1)], field(default=0)),
        ("description", str, field(default="")),
        ("parties", PartiesConfig, field(default_factory=PartiesConfig)),
        ("data", DataConfig, field(default_factory=DataConfig)),
    ]
    sections = [(name, spec.config, field(default_factory=spec.config)) for name, spec in specs.items()]
    tail = [
        ("transport", TransportConfig, field(default_factory=TransportConfig)),
        ("noise", NoiseConfig, field(default_factory=NoiseConfig)),
        ("lifetime", LifetimeConfig, field(default_factory=LifetimeConfig)),
        ("sweep", SweepConfig, field(default_factory=SweepConfig)),
    ]
    return head + sections + tail


if TYPE_CHECKING:

    class ScenarioConfig:
        """What a type checker knows of the scenario built below: its generic keys, and any protocol's section
        by name (the registered protocols are known only when the program runs)."""

        __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # a dataclass: dataclasses.replace takes it
        name: str
        protocol: str
        seed: int
        description: str
        parties: PartiesConfig
        data: DataConfig
        transport: TransportConfig
        noise: NoiseConfig
        lifetime: LifetimeConfig
        sweep: SweepConfig

        def __init__(self, **sections: Any) -> None: ...

        def __getattr__(self, section: str) -> Any: ...

else:
    ScenarioConfig = make_dataclass(
        "ScenarioConfig", _scenario_fields(), frozen=True, namespace={"__module__": __name__}
    )
ScenarioConfig.__doc__ = """A whole scenario: what to run (``protocol`` and its section, named after
it), on which data, with how many parties, over which transport. The protocol sections are those of
the registered protocols (:mod:`marketplace.plugins`); every section is present, at its defaults
when the scenario does not give it, and only the chosen protocol's is used."""
