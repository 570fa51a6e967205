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

>>> budget = split_budget(1.0, h_max=8, p=4)
>>> budget.tree_level, budget.counts_level
(0.0625, 0.16666666666666666)
>>> round(budget.tree_level * 8 + budget.counts_level * 3, 12)
1.0
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from marketplace.privacy.accountant import Step

from ._checks import MalformedPlain, int_at_least, positive_real

__all__ = ["PURPOSES", "Spend", "PfdsBudget", "split_budget", "total_epsilon", "ledger_steps"]

PURPOSES = ("tree.split", "tree.leaves", "synth.counts")
"""What a spend paid for: split selections on one level, the leaves' class counts, node counts of one level."""


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
        return Step(mechanism=f"pfds.{self.purpose}.level{self.level}", eps=self.epsilon)


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


def split_budget(epsilon: float, *, h_max: int, p: int) -> PfdsBudget:
    """Split a sharer's total ``epsilon`` between the tree (eps/2) and the node counts (eps/2)."""
    epsilon = positive_real(epsilon, "epsilon", "split_budget")
    h_max = int_at_least(h_max, 1, "h_max", "split_budget")
    p = int_at_least(p, 2, "p", "split_budget")
    return PfdsBudget(epsilon=epsilon, h_max=h_max, p=p)


def total_epsilon(spends: Iterable[Spend]) -> float:
    """Sequential composition of the spends (each already parallel over its level's nodes)."""
    return math.fsum(spend.epsilon for spend in spends)


def ledger_steps(spends: Iterable[Spend]) -> list[Step]:
    """The spends as :class:`marketplace.privacy.accountant.Step` records, for a ``PrivacyLedger``."""
    return [spend.to_step() for spend in spends]
