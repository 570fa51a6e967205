"""What a `pfds` run releases about each party's data, declared once: the sharers' release plans.

A sharer releases two things of its rows, each through the curator to every other agent (the
consumer and every other owner, sharers and receivers alike):

* its **tree** (Algorithm 3), one release per level: the split selections of a level (exponential
  mechanism on the Max operator, ``pfds.tree.split.level{i}``) or, on the level where the tree
  stops, the leaves' noisy class counts (Laplace, ``pfds.tree.leaves.level{i}``). A level's nodes
  hold disjoint rows, so each level is one release; a level is a split level or the leaf level, never
  both, and the tree stops at level h_max at the latest (earlier when no attribute fits), so at most
  h_max of these run;
* the **node counts** of optPrivateGen (Algorithm 5): one Laplace release per counted level 1..p-1
  (``pfds.synth.counts.level{i}``); none under ``pfds.consistency: false`` (PFDS^-), whose records come
  from the tree's leaf counts alone. The synthetic records and their labels are post-processing.

Each level costs what :func:`~marketplace.protocols.pfds.budget.split_budget` gives it (eps/(2 h_max)
a tree level, eps/(2(p-1)) a counted level): this plan reads it there, and everything else reads it
here (the budget check, the lifetime charge, the sharer's ledger and the noise each level draws).
A count's L1 sensitivity is 1 when a row is added or removed and 2 when one is replaced; the Max
operator's is 1, times the same factor (:mod:`marketplace.protocols.pfds.grow`).

The tree's level either splits or holds the leaves: :class:`PfdsReleasePlan` declares both releases of
a level as ``one_of``, charged once (at the costlier of the two, the same eps), where the
:class:`~marketplace.privacy.plan.ReleasePlan` it extends would charge every declared release.

Receivers (owners beyond ``pfds.sharers``) and the consumer release nothing of their rows: their plans
declare no release (:func:`nothing_plan`). The exchange's ``release_plan`` picks each party's plan.

:func:`declared_view` says what the curator, the consumer and the other owners receive of a sharer's
rows: its tree (the split levels' thresholds and the leaves' counts are releases; the shape, drawn by
coins that read no row, and the costs from this plan are public) and its labelled synthetic records
(post-processing of its releases), and the consumer, besides, the run report. Each level's output
leaves the sharer through :meth:`~marketplace.privacy.plan.ReleasePlan.released` as it is drawn
(:func:`~marketplace.protocols.pfds.grow.grow_tree`, :func:`~marketplace.protocols.pfds.synth.noisy_node_counts`),
where the coupled differential test holds the protocol to this view.
This module is a pure core: it reads a scenario's settings and imports no role, wire or runner.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from marketplace.privacy.ledger import PrivacyLedger
from marketplace.privacy.lifetime.declared import Declared
from marketplace.privacy.neighbouring import Neighbouring, add_remove_one, replace_one
from marketplace.privacy.plan import Account, PlanExceeded, Release, ReleasePlan
from marketplace.privacy.steps import Step
from marketplace.privacy.view import REPORT, RUNTIME, Seen

from ._checks import count_sensitivity
from .budget import LevelEpsilon, release_name, split_budget

__all__ = [
    "OTHER_OWNERS",
    "RECIPIENTS",
    "SHARER",
    "PfdsReleasePlan",
    "declared_view",
    "level_epsilon",
    "nothing_plan",
    "pfds_relation",
    "relation_words",
    "sharer_plan",
]

SHARER = "sharer"
"""The account of a sharer's rows (its ledger is named after the sharer)."""
OTHER_OWNERS = "other owners"
"""Every owner but the sharer, sharers and receivers alike: the curator forwards each release to them."""
RECIPIENTS = ("curator", "consumer", OTHER_OWNERS)
"""Who receives each of a sharer's releases: the curator (the party ids of :mod:`marketplace.roles`,
which this pure core does not import), and through it the consumer and every other owner."""


def pfds_relation(neighbours: str, record: str) -> Neighbouring:
    """The ledger's relation for ``pfds.neighbours``: add_remove (the paper's) or replace."""
    return add_remove_one(record) if neighbours == "add_remove" else replace_one(record)


def relation_words(neighbours: str) -> str:
    """The lifetime ledgers' words for ``pfds.neighbours``."""
    return "replace-one" if neighbours == "replace" else "add/remove-one"


@dataclass(frozen=True, kw_only=True)
class PfdsReleasePlan(ReleasePlan):
    """A :class:`~marketplace.privacy.plan.ReleasePlan` in which some releases exclude one another:
    of each group in ``one_of`` a run makes one at most (a tree level splits or holds the leaves).
    Each group is charged once, at its costliest member (:meth:`charged`); :meth:`spend` refuses a
    second member of a group."""

    one_of: tuple[tuple[str, ...], ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        seen: set[str] = set()
        for group in self.one_of:
            members = [self.release(name) for name in group]  # PlanExceeded for an undeclared name
            if len(group) < 2 or seen & set(group) or len({r.account for r in members}) != 1:
                raise ValueError(
                    f"ReleasePlan of {self.party}: one_of group {group} must name two or more declared "
                    "releases of one account, each in one group only"
                )
            if any(r.eps is None for r in members):
                raise ValueError(f"ReleasePlan of {self.party}: one_of group {group} must hold eps-DP releases")
            seen |= set(group)

    def charged(self) -> ReleasePlan:
        """The plan as a run is charged it: every release but the cheaper members of each ``one_of``
        group (the first costliest member stays)."""
        dropped: set[str] = set()
        for group in self.one_of:
            members = [self.release(name) for name in group]
            kept = max(members, key=lambda r: (r.eps or 0.0) * r.count)
            dropped |= {r.name for r in members if r is not kept}
        base = {f.name: getattr(self, f.name) for f in fields(ReleasePlan)}
        return ReleasePlan(**base | {"releases": tuple(r for r in self.releases if r.name not in dropped)})

    def steps(self, account: str) -> list[Step]:
        return self.charged().steps(account)

    def declared(self) -> Declared | None:
        return self.charged().declared()

    def spend(self, ledger: PrivacyLedger, name: str, count: int | None = None) -> Step:
        for group in self.one_of:
            if name in group:
                made = [s.mechanism for s in ledger.steps if s.mechanism in group and s.mechanism != name]
                if made:
                    raise PlanExceeded(
                        f"{self.party}: release {name!r} excludes {made[0]!r}, already made (a run makes one "
                        f"of {list(group)} at most)"
                    )
        return super().spend(ledger, name, count)


def nothing_plan(config: Any, party: str) -> ReleasePlan:
    """The plan of a party that releases nothing of its rows: a receiver, or the consumer."""
    return ReleasePlan(
        party=party,
        what=f"pfds: nothing derived from {party}'s rows ({config.name})",
        relation=relation_words(config.pfds.neighbours),
    )


def sharer_plan(config: Any, party: str) -> PfdsReleasePlan:
    """Every release of sharer ``party``'s rows in a run of ``config`` (see the module docstring): its
    tree's levels and its counted levels, each at the eps :func:`split_budget` gives it."""
    from .grow import MAX_OPERATOR_SENSITIVITY

    c = config.pfds
    budget = split_budget(c.epsilon, h_max=c.h_max, p=c.p)
    sensitivity = count_sensitivity(c.neighbours, "pfds.neighbours")
    to = RECIPIENTS
    account = Account(
        name=SHARER,
        dataset=party,
        neighbouring=pfds_relation(c.neighbours, f"a row of {party}'s data"),
        theorem="basic",
        budget=None if c.budget is None else (c.budget, 0.0),
        budget_keys=("pfds.budget",),
    )

    def release(purpose: str, level: int, mechanism: str, sensitivity: float, norm: str) -> Release:
        return Release(
            name=release_name(purpose, level),
            account=SHARER,
            to=to,
            mechanism=mechanism,
            sensitivity=sensitivity,
            norm=norm,
            eps=budget.level(purpose, level),
        )

    releases: list[Release] = []
    one_of: list[tuple[str, ...]] = []
    for level in range(1, c.h_max + 1):
        leaves = release("tree.leaves", level, "laplace", sensitivity, "L1")
        if level < c.h_max:
            split = release("tree.split", level, "exponential", MAX_OPERATOR_SENSITIVITY * sensitivity, "utility")
            releases.append(split)
            one_of.append((split.name, leaves.name))
        releases.append(leaves)
    if c.consistency:
        releases += [release("synth.counts", level, "laplace", sensitivity, "L1") for level in range(1, c.p)]
    return PfdsReleasePlan(
        party=party,
        what=f"pfds: {party}'s tree and synthetic records ({config.name})",
        relation=relation_words(c.neighbours),
        accounts=(account,),
        releases=tuple(releases),
        one_of=tuple(one_of),
    )


def level_epsilon(plan: ReleasePlan) -> LevelEpsilon:
    """``(purpose, level) -> eps`` of the plan's release of that level, for the tree and the counts to
    calibrate their noise with (:class:`~marketplace.privacy.plan.PlanExceeded` for a level the plan
    does not declare)."""

    def eps(purpose: str, level: int) -> float:
        value = plan.release(release_name(purpose, level)).eps
        if value is None:
            raise PlanExceeded(f"{plan.party}: release {release_name(purpose, level)!r} is not an eps-DP release")
        return value

    return eps


# --- what each other party receives of a sharer's rows --------------------------------------------

Kind = Literal["public", "release", "disclosure"]
Observer = Literal["curator", "consumer", "owners"]

_TREE: tuple[tuple[str, Kind, str], ...] = (
    (
        "attribute",
        "public",
        "the attribute each node of the sharer's tree splits on (-1 at a leaf): drawn by a fair coin of the "
        "sharer's that reads no row, among the attributes the public max_leaves cap allows",
    ),
    (
        "threshold",
        "release",
        "each numeric split's threshold: the exponential mechanism's choice among candidates drawn from the "
        "node's public interval (releases pfds.tree.split.level{i}); NaN at the other nodes",
    ),
    (
        "n_children",
        "public",
        "each node's number of children: the branching of the attribute it splits on, from the public schema",
    ),
    ("counts", "release", "the leaves' noisy class counts (release pfds.tree.leaves.level{i})"),
    ("h_max", "public", "pfds.h_max, from the settings"),
    ("t", "public", "pfds.t, from the settings"),
    ("neighbours", "public", "pfds.neighbours, from the settings"),
    (
        "spends",
        "public",
        "what each level of the tree cost: the plan's eps, for the levels the tree's public shape says ran",
    ),
)


def _records(consistency: bool) -> tuple[tuple[str, Kind, str], ...]:
    source = (
        "its tree and its noisy node counts (releases pfds.synth.counts.level{i})"
        if consistency
        else "its tree's noisy leaf counts alone (pfds.consistency is false: PFDS^-)"
    )
    return (
        (
            "X",
            "release",
            f"the sharer's synthetic records: post-processing of {source}, drawn uniformly in the leaves' public "
            "regions by coins that read no row",
        ),
        ("y", "release", "the records' labels: the majority vote of every sharer's tree (releases)"),
        ("epsilon", "public", "what the sharer's releases cost in all, from the plan"),
    )


_REPORT: tuple[tuple[str, str], ...] = (
    (
        "metrics",
        "each agent's test error: the consumer's model, fitted on its own rows and the synthetic records; the "
        "owners' models stay with them (null). The baselines (pfds.baselines) are references of a simulation, "
        "computed by whoever assembles the report from the world the scenario builds (the table cut by the "
        "seed, which anyone with the scenario rebuilds), not from anything a party sent",
    ),
    (
        "fidelity",
        "the synthetic records' sizes (from the releases) against each sharer's row count in the world the "
        "scenario builds (a simulation's reference, rebuilt from the scenario by whoever assembles the report)",
    ),
    ("task", "classification or regression, from pfds.model"),
    ("error_measure", "how the errors are measured, from pfds.model"),
    (
        "agents",
        "how many sharers and receivers, the agents evaluated, and each agent's row count in the world the "
        "scenario builds (a simulation's figure: the table cut by the seed, which anyone with the scenario "
        "rebuilds), never read from a party",
    ),
    (
        "trees",
        "the trees' leaves (read from the trees), the sharers whose trees voted and whose records were forwarded",
    ),
    ("flagged", "the sharers the curator excluded, and why (from their releases)"),
    (
        "data.owners",
        "each owner's row and label counts in the world the scenario builds (a simulation's summary of the table "
        "cut by the seed, which anyone with the scenario rebuilds), never read from a party",
    ),
    ("checks", "whether the consumer's own error agrees with the report's (from its model)"),
)


def declared_view(config: Any) -> tuple[Seen, ...]:
    """What the curator, the consumer and the other owners receive of a sharer's rows in a run of
    ``config`` (:mod:`marketplace.privacy.view`): the curator its tree (``pfds_tree``) and its labelled
    synthetic records (``pfds_data``); every other agent, the other owners and the consumer, the same,
    forwarded (``pfds_shared_tree``, ``pfds_shared_data``), and the phases (``pfds_phase``); the consumer
    the run report besides. Nothing is a disclosure: a sharer's rows leave it only through its releases,
    and a receiver sends nothing derived from its rows."""
    records = _records(config.pfds.consistency)
    sharer = "which sharer's release the curator forwards"
    seen: list[Seen] = [*RUNTIME, *REPORT]
    seen += [Seen("curator", f"pfds_tree.{field}", kind, note) for field, kind, note in _TREE]
    seen += [Seen("curator", f"pfds_data.{field}", kind, note) for field, kind, note in records]
    observers: tuple[Observer, ...] = ("owners", "consumer")
    for observer in observers:
        seen += [
            Seen(observer, "pfds_shared_tree.sharer", "public", sharer),
            *(Seen(observer, f"pfds_shared_tree.{f}", k, note) for f, k, note in _TREE),
            Seen(observer, "pfds_shared_data.sharer", "public", sharer),
            *(Seen(observer, f"pfds_shared_data.{f}", k, note) for f, k, note in records),
            Seen(observer, "pfds_phase.phase", "public", "what comes next: labelling or training"),
            Seen(
                observer,
                "pfds_phase.sharers",
                "public",
                "the sharers whose trees vote (label) or whose records were forwarded (train): those whose "
                "release reached the curator in time and fit the public schema",
            ),
        ]
    seen += [Seen("consumer", f"report.{key}", "public", note) for key, note in _REPORT]
    return tuple(seen)
