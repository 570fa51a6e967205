"""What the consumer pays for `summarize`'s points: posted prices, a spending budget, and the bill.

Each owner posts a price per point (its sale terms, sent to the curator once, before its first bid).
The consumer's request carries a spending budget (``summarize.spending_budget``; None: no limit).
Every point the curator receives from an owner it asked, and accepts, is bought at that owner's
price, whether or not it later enters D_s: the owner handed it over. Paying only for the points
that enter D_s would tell an owner whether its point beat the others' (the choice from the pool
depends on every owner's points, and is not a DP release), so the price is posted and paid per point
handed over: what an owner is paid reveals only how often it was asked, which it saw itself.

The curator never asks for a point the consumer cannot pay for: an owner whose price no longer fits
what is left is not ranked in the round, and an ask that would overspend is not sent. Both decisions
read only public prices and what was paid so far, a function of earlier rounds' selections (the
composed auction's outputs), never a bid.

>>> purse = Purse(3.0)
>>> purse.post("owner-1", 2.0, None)
>>> purse.within_budget(["owner-1", "owner-2", "owner-1"])  # owner-2 posted no price: its points are free
['owner-1', 'owner-2']
>>> purse.pay("owner-1"); purse.affordable("owner-1")
False
"""

from __future__ import annotations

import math
from typing import Any

SLACK = 1e-9
"""Relative slack on the budget comparison, so that prices summing to the budget exactly (in decimal)
are not refused for a rounding error of the floats."""


class Purse:
    """The consumer's spending budget (None: no limit), the owners' posted prices, and the bill."""

    def __init__(self, budget: float | None) -> None:
        if budget is not None and not (math.isfinite(budget) and budget >= 0):
            raise ValueError(f"The 'budget' parameter of Purse must be a finite number >= 0 or None. Got {budget!r}")
        self.budget = budget
        self.prices: dict[str, float] = {}
        self.caps: dict[str, int | None] = {}
        self.bought: dict[str, int] = {}
        self.paid_to: dict[str, float] = {}
        self.paid = 0.0
        self.not_sent = 0
        """Asks the auction drew that the budget could not pay for (not sent)."""

    @property
    def in_use(self) -> bool:
        """Whether anything is for sale at a price, or the consumer has a budget (the report says so)."""
        return self.budget is not None or bool(self.prices)

    def post(self, owner: str, price: float, points: int | None) -> None:
        """``owner``'s terms: its price per point and how many points it sells in this run."""
        self.prices[owner] = float(price)
        self.caps[owner] = points

    def price(self, owner: str) -> float:
        """``owner``'s posted price (0 when it posted no terms)."""
        return self.prices.get(owner, 0.0)

    def affordable(self, owner: str, committed: float = 0.0) -> bool:
        """Whether the consumer can pay ``owner``'s price on top of what it paid and ``committed``."""
        if self.budget is None:
            return True
        return self.paid + committed + self.price(owner) <= self.budget * (1 + SLACK) + SLACK

    def within_budget(self, asked: list[str]) -> list[str]:
        """The asks of ``asked`` (in their order) that the budget can pay for if every one delivers;
        the rest are not sent."""
        kept: list[str] = []
        committed = 0.0
        for owner in asked:
            if self.affordable(owner, committed):
                kept.append(owner)
                committed += self.price(owner)
            else:
                self.not_sent += 1
        return kept

    def pay(self, owner: str) -> None:
        """The consumer buys one point of ``owner`` at its posted price."""
        price = self.price(owner)
        self.bought[owner] = self.bought.get(owner, 0) + 1
        self.paid_to[owner] = self.paid_to.get(owner, 0.0) + price
        self.paid += price

    def spent_reason(self) -> str:
        """The end reason when no owner with a point for sale is affordable any more."""
        return (
            f"the consumer's spending budget is spent: paid {self.paid:g} of {self.budget:g}, and no owner with a "
            "point left sells one for what is left"
        )

    def report(self) -> dict[str, Any]:
        """The bill: the budget, what was paid (in all and per owner), points bought, posted prices."""
        return {
            "spending_budget": self.budget,
            "paid": self.paid,
            "points_bought": sum(self.bought.values()),
            "bought": dict(self.bought),
            "paid_to": dict(self.paid_to),
            "prices": dict(self.prices),
            "caps": dict(self.caps),
            "asks_not_sent": self.not_sent,
        }
