"""Which waiting request a served marketplace starts next, and when.

Requests wait in one queue. A request is *admitted* (its session starts, its owners are invited)
when fewer than ``max_sessions`` sessions run and the marketplace's scheduling rule grants it:

* ``fcfs``: first come, first served, in arrival order;
* ``dpf``: Dominant Privacy Fairness (T. Luo, M. Pan, P. Tholoniat, A. Cidon, R. Geambasu,
  M. Lécuyer, *Privacy Budget Scheduling*, OSDI 2021), as market workloads play it
  (:mod:`marketplace.scheduling.rules`): each owner's budget unlocks by 1/N per arriving request, and
  among the requests every needed owner can pay for from its unlocked budget, the smallest dominant
  share goes first.

The server holds no owner's ledger. What DPF counts as an owner's *spent* budget is what the server
itself admitted: the declared cost (:mod:`marketplace.scheduling.costs`) of every session it
started, in the owners' filter, whether or not the owner then took part. That is never less than
what the ledgers hold for these sessions, so the rule admits no more than a rule that read the
ledgers would. Every owner still reserves on its own ledger and may decline: the rule orders and
admits, the ledgers decide what is spent.

A consumer may have :data:`MAX_QUEUED_PER_CONSUMER` requests waiting and :data:`MAX_RUNNING_PER_CONSUMER`
running at once, so one consumer cannot crowd out the others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from marketplace.scheduling.rules import Amounts, Demand, Dpf, amounts, filter_budget, make_rule

MAX_QUEUED_PER_CONSUMER = 8
"""Requests one consumer may have waiting; more are refused."""
MAX_QUEUED = 1024
MAX_RUNNING_PER_CONSUMER = 4
"""Sessions one consumer may have running at once; its further requests wait their turn."""
RULES = ("fcfs", "dpf")


@dataclass
class Waiting:
    """A request in the queue: its session id, consumer, and what it declares it costs each owner."""

    session: str
    consumer: str
    demand: Demand
    item: Any
    """What the server keeps for it (its session)."""


@dataclass
class Admission:
    """The queue and the rule (module docstring). ``budgets``: each owner's lifetime budget in the
    ledgers' filter (needed by ``dpf``); ``unlock_steps``: DPF's N (default: the queue's capacity)."""

    rule: str = "fcfs"
    max_sessions: int = 8
    budgets: dict[str, Amounts] = field(default_factory=dict)
    unlock_steps: int | None = None
    waiting: list[Waiting] = field(default_factory=list)
    spent: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per owner, the declared costs of the sessions admitted so far (what DPF counts as spent)."""
    arrived: int = 0
    never_granted: list[tuple[Any, str]] = field(default_factory=list)
    """Requests DPF will never grant (no owner they ask can pay any more), for the server to refuse."""

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"rule: expected one of {', '.join(RULES)}, got {self.rule!r}")
        if self.max_sessions < 1:
            raise ValueError(f"max_sessions: expected a whole number >= 1, got {self.max_sessions!r}")
        self._rule = make_rule(self.rule, self.budgets, unlock_steps=self.unlock_steps or MAX_QUEUED)

    def refusal(self, consumer: str) -> str | None:
        """Why a new request of ``consumer`` cannot wait (its own queue or the whole queue is full),
        or None."""
        mine = sum(1 for w in self.waiting if w.consumer == consumer)
        if mine >= MAX_QUEUED_PER_CONSUMER:
            return f"{consumer} already has {mine} requests waiting (at most {MAX_QUEUED_PER_CONSUMER})"
        if len(self.waiting) >= MAX_QUEUED:
            return f"the queue is full ({MAX_QUEUED} requests)"
        return None

    def add(self, session: str, consumer: str, charges: dict[str, Amounts], item: Any) -> int:
        """Queue a request; returns how many requests wait ahead of it."""
        demand = Demand(session, self.arrived, charges)
        self.arrived += 1
        self.waiting.append(Waiting(session, consumer, demand, item))
        self._rule.arrive(demand)
        return len(self.waiting) - 1

    def next(self, running: Iterable[str]) -> Any | None:
        """The next request to start, given the consumers of the sessions running now (one entry per
        session); None when none may start now."""
        running = list(running)
        if len(running) >= self.max_sessions or not self.waiting:
            return None
        busy = {c for c in running if running.count(c) >= MAX_RUNNING_PER_CONSUMER}
        eligible = {w.session for w in self.waiting if w.consumer not in busy}
        if not eligible:
            return None
        chosen = self._grant(eligible)
        if chosen is None:
            return None
        self.waiting.remove(chosen)
        for owner, charge in chosen.demand.charges.items():
            mine = self.spent.setdefault(owner, {})
            for dim, value in charge.items():
                mine[dim] = math.fsum([mine.get(dim, 0.0), value])
        return chosen.item

    def _grant(self, eligible: set[str]) -> Waiting | None:
        rule = self._rule
        if not isinstance(rule, Dpf):  # fcfs
            return next((w for w in self.waiting if w.session in eligible), None)
        # dpf: the rule picks among the eligible (others are set aside and put back, in order)
        aside = [d for d in rule.pending if d.id not in eligible]
        rule.pending = [d for d in rule.pending if d.id in eligible]
        try:
            demand = rule.next_grant(self.spent)
        finally:
            rule.pending = sorted([*rule.pending, *aside], key=lambda d: d.index)
        for dropped, _reason in rule.dropped:
            self._drop_from_waiting(dropped.id)
        rule.dropped.clear()
        if demand is None:
            return None
        return next(w for w in self.waiting if w.session == demand.id)

    def _drop_from_waiting(self, session: str) -> None:
        for w in list(self.waiting):
            if w.session == session:
                self.waiting.remove(w)
                self.never_granted.append((w.item, "no owner it asks has budget left for it"))

    def remove(self, keep: Callable[[Waiting], bool]) -> list[Any]:
        """Take out every waiting request ``keep`` says no to (a consumer that has gone); returns them."""
        gone = [w for w in self.waiting if not keep(w)]
        for w in gone:
            self.waiting.remove(w)
        ids = {w.session for w in gone}
        if isinstance(self._rule, Dpf):  # dpf
            self._rule.pending = [d for d in self._rule.pending if d.id not in ids]
        return [w.item for w in gone]


def owner_charges(config: Any, owners: list[str], relation: str, filter: str, exchange: Any) -> dict[str, Amounts]:
    """What a request of ``config`` declares it costs each owner, in the ledgers' filter (owners it
    releases nothing of are left out). Raises :class:`~marketplace.scheduling.costs.NoOwnerCost` for a
    protocol with no finite cost."""
    from marketplace.scheduling.costs import declared_costs

    costs = declared_costs(config, owners, relation, filter, exchange)
    return {o: amounts(c[1]) for o, c in costs.items() if c is not None}


def budgets_of(market: Any, owners: list[str]) -> dict[str, Amounts]:
    """Each owner's lifetime budget in its filter's dimensions, from the marketplace's ``lifetime`` section."""
    life = market.config.lifetime
    out: dict[str, Amounts] = {}
    for owner in owners:
        budget = life.budget_of(owner)
        out[owner] = filter_budget(life.filter, budget.epsilon, budget.delta)
    return out
