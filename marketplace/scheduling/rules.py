"""Scheduling rules: which waiting request runs next. Pure logic on declared costs and on what the
owners' ledgers say they have spent; the rules decide order and admission only, and every owner
still reserves on its own ledger (which may decline).

* ``fcfs``: first come, first served. Requests run in arrival order and every owner is asked.
* ``dpf``: Dominant Privacy Fairness, after PrivateKube (T. Luo, M. Pan, P. Tholoniat, A. Cidon,
  R. Geambasu, M. Lécuyer, *Privacy Budget Scheduling*, OSDI 2021). Each owner's budget unlocks
  gradually: after the n-th arrival, a share min(1, n / N) of it is unlocked. A waiting request is
  granted when every owner it needs has enough unlocked, unspent budget for its declared cost;
  among those, the smallest *dominant share* (the largest, over the owners it asks and the budget's
  dimensions, of cost / budget) goes first, ties in arrival order. A request still waiting when the
  stream ends is not granted.

One adaptation to a market: a request "needs" an owner only while that owner's whole lifetime
budget could still pay for it. An owner that can never pay again would decline anyway, and the
request goes on without it (in PrivateKube a pipeline cannot run without its data blocks, here a
consumer can be served by fewer owners); a request no owner can pay for any more is not granted.

>>> budgets = {"owner-1": {"eps": 1.0, "delta": 0.0}}
>>> small = Demand("req-0002", 1, {"owner-1": {"eps": 0.2, "delta": 0.0}})
>>> big = Demand("req-0001", 0, {"owner-1": {"eps": 0.6, "delta": 0.0}})
>>> rule = Dpf(budgets, unlock_steps=2)
>>> rule.arrive(big); rule.next_grant({"owner-1": {"eps": 0.0, "delta": 0.0}}) is None   # 0.5 unlocked
True
>>> rule.arrive(small); rule.next_grant({"owner-1": {"eps": 0.0, "delta": 0.0}}).id  # all unlocked: smallest first
'req-0002'
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from marketplace.privacy.lifetime import Charge, zcdp_budget
from marketplace.privacy.lifetime.filters import counted

Amounts = Mapping[str, float]
"""A budget, a charge or a spend in the filter's dimensions: ``{"eps": .., "delta": ..}`` (basic) or ``{"rho": ..}``
(zcdp)."""


@dataclass(frozen=True)
class Demand:
    """What one request asks: its id, its position in the stream, and each owner's charge in the
    filter's dimensions (owners that release nothing are left out)."""

    id: str
    index: int
    charges: Mapping[str, Amounts]


def amounts(charge: Charge) -> dict[str, float]:
    """A ledger :class:`~marketplace.privacy.lifetime.Charge` as the dimensions its filter counts."""
    if charge.rho is not None:
        return {"rho": charge.rho}
    return {"eps": counted(charge, "eps", "basic"), "delta": counted(charge, "delta", "basic")}


def filter_budget(filter: str, epsilon: float, delta: float) -> dict[str, float]:
    """An owner's (eps, delta) lifetime budget in its filter's dimensions (rho for ``zcdp``, as its ledger computes
    it)."""
    return {"rho": zcdp_budget(epsilon, delta)} if filter == "zcdp" else {"eps": epsilon, "delta": delta}


def fits(spent: Amounts, charge: Amounts, limit: Amounts, share: float = 1.0) -> bool:
    """Whether ``charge`` on top of ``spent`` stays within ``share`` of ``limit`` in every dimension."""
    return all(math.fsum([spent.get(d, 0.0), c]) <= share * limit[d] for d, c in charge.items())


def dominant_share(demand: Demand, budgets: Mapping[str, Amounts]) -> float:
    """The largest cost / budget over the owners ``demand`` asks and their budgets' dimensions
    (infinite when it asks for a dimension an owner has none of)."""
    shares = [0.0]
    for owner, charge in demand.charges.items():
        for d, c in charge.items():
            if c > 0:
                shares.append(c / budgets[owner][d] if budgets[owner][d] > 0 else math.inf)
    return max(shares)


class Fcfs:
    """First come, first served: every request runs, in arrival order."""

    name = "fcfs"

    def __init__(self) -> None:
        self.queue: list[Demand] = []

    def arrive(self, demand: Demand) -> None:
        """A request arrives."""
        self.queue.append(demand)

    def close(self) -> None:
        """The stream has ended (nothing changes for fcfs)."""

    def next_grant(self, spent: Mapping[str, Amounts]) -> Demand | None:
        """The next request to run, or None when none may run now."""
        return self.queue.pop(0) if self.queue else None

    def left(self) -> list[tuple[Demand, str]]:
        """Requests never granted, each with the reason."""
        return [(d, "not granted") for d in self.queue]


class Dpf:
    """Dominant Privacy Fairness (module docstring): ``budgets`` is each owner's lifetime budget in
    its filter's dimensions, ``unlock_steps`` is N."""

    name = "dpf"

    def __init__(self, budgets: Mapping[str, Amounts], *, unlock_steps: int) -> None:
        if unlock_steps < 1:
            raise ValueError(
                f"The 'unlock_steps' parameter of Dpf must be a whole number >= 1. Got {unlock_steps!r} instead."
            )
        self.budgets = budgets
        self.unlock_steps = unlock_steps
        self.arrived = 0
        self.pending: list[Demand] = []
        self.dropped: list[tuple[Demand, str]] = []

    @property
    def unlocked(self) -> float:
        """The share of every owner's budget unlocked so far: min(1, arrivals / N)."""
        return min(1.0, self.arrived / self.unlock_steps)

    def arrive(self, demand: Demand) -> None:
        """A request arrives: it waits, and a further 1/N of every budget unlocks."""
        self.arrived += 1
        self.pending.append(demand)

    def close(self) -> None:
        """The stream has ended: nothing more unlocks."""

    def needed(self, demand: Demand, spent: Mapping[str, Amounts]) -> list[str]:
        """The owners ``demand`` needs: those it asks whose whole budget could still pay for it."""
        return [o for o, c in demand.charges.items() if fits(spent.get(o, {}), c, self.budgets[o])]

    def next_grant(self, spent: Mapping[str, Amounts]) -> Demand | None:
        """The waiting request with the smallest dominant share among those every needed owner can
        pay from its unlocked, unspent budget; None when there is none."""
        ready = []
        for demand in list(self.pending):
            owners = self.needed(demand, spent)
            if not owners:
                self.pending.remove(demand)
                self.dropped.append((demand, "not granted: no owner it asks has budget left for it"))
                continue
            if all(fits(spent.get(o, {}), demand.charges[o], self.budgets[o], self.unlocked) for o in owners):
                ready.append(demand)
        if not ready:
            return None
        best = min(ready, key=lambda d: (dominant_share(d, self.budgets), d.index))
        self.pending.remove(best)
        return best

    def left(self) -> list[tuple[Demand, str]]:
        """Requests never granted, each with the reason, in stream order."""
        waiting = [
            (
                d,
                f"not granted: still waiting for unlocked budget when the stream ended "
                f"({self.unlocked:.0%} of every budget unlocked)",
            )
            for d in self.pending
        ]
        return sorted([*self.dropped, *waiting], key=lambda item: item[0].index)


def make_rule(name: str, budgets: Mapping[str, Amounts], *, unlock_steps: int) -> Fcfs | Dpf:
    """The scheduler of rule ``name`` (``fcfs`` or ``dpf``)."""
    if name == "fcfs":
        return Fcfs()
    if name == "dpf":
        return Dpf(budgets, unlock_steps=unlock_steps)
    raise ValueError(f"The 'rule' parameter of make_rule must be 'fcfs' or 'dpf'. Got {name!r} instead.")
