"""How a pfds sharer splits its budget eps, and the record of what each release spent.

The paper (Theorem 3.3) gives half of eps to the tree and half to the node counts of optPrivateGen:

* **tree** (Algorithm 3, called with eps/(2 h_max)): every level of the tree costs eps/(2 h_max).
  A level's nodes hold disjoint rows, so all its split selections together cost that much once
  (parallel composition), and the h_max levels add up (sequential composition): h_max - 1 split
  levels and one level of noisy leaf counts, eps/2 in all.
* **node counts** (Algorithm 5, called with eps/2): the counts of the nodes on levels 1..p-1 get
  Laplace noise with eps/(2 (p - 1)) per level, eps/2 in all. The leaves' counts are the tree's.

A level whose nodes all branch on a categorical attribute reads no row (the branches are the public
domain), so it spends nothing; the records below say what was *spent*, which is never more than
what was allocated. Each :class:`Spend` is one level of one stage, already composed in parallel over
that level's nodes; spends add up sequentially (:func:`total_epsilon`).

:func:`split_budget` is the one place the split is computed: a run's sharer reads each level's eps
from its release plan (:mod:`marketplace.protocols.pfds.plan`), which reads it here
(:meth:`PfdsBudget.level`), and its ledger records each level under :func:`release_name`.

>>> budget = split_budget(1.0, h_max=8, p=4)
>>> budget.tree_level, budget.counts_level
(0.0625, 0.16666666666666666)
>>> round(budget.tree_level * 8 + budget.counts_level * 3, 12)
1.0
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from marketplace.privacy.accountant import Step

from ._checks import MalformedPlain, int_at_least, positive_real

__all__ = [
    "PURPOSES",
    "LevelEpsilon",
    "Released",
    "Spend",
    "PfdsBudget",
    "ledger_steps",
    "per_level_epsilon",
    "release_name",
    "split_budget",
    "total_epsilon",
    "unchanged",
]

PURPOSES = ("tree.split", "tree.leaves", "synth.counts")
"""What a spend paid for: split selections on one level, the leaves' class counts, node counts of one level."""


def release_name(purpose: str, level: int) -> str:
    """The name a sharer's ledger records one level of ``purpose`` under (``pfds.tree.split.level3``):
    the name of that release in the sharer's release plan (:mod:`marketplace.protocols.pfds.plan`)."""
    return f"pfds.{purpose}.level{level}"


@dataclass(frozen=True)
class Spend:
    """One level of one stage: ``epsilon``-DP by ``mechanism`` (parallel over that level's nodes)."""

    purpose: str
    level: int
    epsilon: float
    mechanism: str

    def __post_init__(self) -> None:
        if self.purpose not in PURPOSES:
            raise ValueError(
                f"The 'purpose' parameter of Spend must be one of {', '.join(PURPOSES)}. Got {self.purpose!r} instead."
            )
        object.__setattr__(self, "level", int_at_least(self.level, 1, "level", "Spend"))
        object.__setattr__(self, "epsilon", positive_real(self.epsilon, "epsilon", "Spend"))
        if self.mechanism not in ("exponential", "laplace"):
            raise ValueError(
                f"The 'mechanism' parameter of Spend must be 'exponential' or 'laplace'. "
                f"Got {self.mechanism!r} instead."
            )

    def to_plain(self) -> dict[str, Any]:
        return {"purpose": self.purpose, "level": self.level, "epsilon": self.epsilon, "mechanism": self.mechanism}

    @classmethod
    def from_plain(cls, plain: Any, path: str = "$") -> Spend:
        if not isinstance(plain, dict) or set(plain) != {"purpose", "level", "epsilon", "mechanism"}:
            raise MalformedPlain(path, "a map with keys purpose, level, epsilon, mechanism", plain)
        try:
            return cls(**plain)
        except (TypeError, ValueError) as exc:
            raise MalformedPlain(path, f"a valid spend ({exc})", plain) from None

    def to_step(self) -> Step:
        """The accountant's view of this spend (one pure-DP step)."""
        return Step(mechanism=release_name(self.purpose, self.level), eps=self.epsilon)


@dataclass(frozen=True)
class PfdsBudget:
    """The paper's split of one sharer's eps (Theorem 3.3)."""

    epsilon: float
    h_max: int
    p: int

    @property
    def tree(self) -> float:
        """What the tree may spend: eps/2."""
        return self.epsilon / 2

    @property
    def tree_level(self) -> float:
        """Per tree level: eps / (2 h_max)."""
        return self.epsilon / (2 * self.h_max)

    @property
    def counts(self) -> float:
        """What optPrivateGen's node counts may spend: eps/2."""
        return self.epsilon / 2

    @property
    def counts_level(self) -> float:
        """Per counted level 1..p-1: eps / (2 (p - 1))."""
        return self.epsilon / (2 * (self.p - 1))

    def level(self, purpose: str, level: int) -> float:
        """What level ``level`` of ``purpose`` costs: a tree level (``tree.split`` or ``tree.leaves``,
        1..h_max) :attr:`tree_level`, a counted level (``synth.counts``, 1..p-1) :attr:`counts_level`."""
        if purpose not in PURPOSES:
            raise ValueError(
                f"The 'purpose' parameter of PfdsBudget.level must be one of {', '.join(PURPOSES)}. "
                f"Got {purpose!r} instead."
            )
        levels = self.p - 1 if purpose == "synth.counts" else self.h_max
        if not 1 <= int_at_least(level, 1, "level", "PfdsBudget.level") <= levels:
            raise ValueError(
                f"The 'level' parameter of PfdsBudget.level must be at most {levels} for {purpose}. "
                f"Got {level} instead."
            )
        return self.counts_level if purpose == "synth.counts" else self.tree_level


def split_budget(epsilon: float, *, h_max: int, p: int) -> PfdsBudget:
    """Split a sharer's total ``epsilon`` between the tree (eps/2) and the node counts (eps/2)."""
    epsilon = positive_real(epsilon, "epsilon", "split_budget")
    h_max = int_at_least(h_max, 1, "h_max", "split_budget")
    p = int_at_least(p, 2, "p", "split_budget")
    return PfdsBudget(epsilon=epsilon, h_max=h_max, p=p)


LevelEpsilon = Callable[[str, int], float]
"""``level_epsilon(purpose, level)``: the eps one level of a stage (a :class:`Spend` purpose) is calibrated to."""


Released = Callable[[str, Any], Any]
"""``released(name, output)``: the output of release ``name`` (:func:`release_name`) as it leaves the
sharer; a sharer of a run passes its release plan's :meth:`~marketplace.privacy.plan.ReleasePlan.released`,
where the coupled differential test records and replays each output."""


def unchanged(name: str, output: Any) -> Any:
    """The :data:`Released` of a caller outside a run: every output as it is."""
    return output


def per_level_epsilon(epsilon: Any, level_epsilon: Any, levels: int, where: str) -> LevelEpsilon:
    """``level_epsilon`` as given, or ``epsilon`` spread evenly over ``levels`` levels (exactly one of them)."""
    if (epsilon is None) == (level_epsilon is None):
        raise TypeError(f"{where} takes exactly one of 'epsilon' and 'level_epsilon'.")
    if level_epsilon is not None:
        if not callable(level_epsilon):
            raise TypeError(
                f"The 'level_epsilon' parameter of {where} must be a function (purpose, level) -> eps. "
                f"Got {type(level_epsilon).__name__} instead."
            )
        return level_epsilon
    each = positive_real(epsilon, "epsilon", where) / levels
    return lambda purpose, level: each


def total_epsilon(spends: Iterable[Spend]) -> float:
    """Sequential composition of the spends (each already parallel over its level's nodes)."""
    return math.fsum(spend.epsilon for spend in spends)


def ledger_steps(spends: Iterable[Spend]) -> list[Step]:
    """The spends as :class:`marketplace.privacy.accountant.Step` records (what ran, at what it cost)."""
    return [spend.to_step() for spend in spends]
