"""The release plan of `summarize` (:mod:`marketplace.privacy.plan`): what a run may release about
each owner's data and about the consumer's D_v, built by
:meth:`~marketplace.protocols.summarize.private_curator.PrivateSchedule.plans` (the one place the
split of eps between the releases is computed) and read by the exchange's ``release_plan``.

An owner's plan has two accounts, each one ledger the curator keeps: ``auction`` (the composed
auction's selections, one per round, replace-one keeping the owner's number of distinct points,
basic composition) and ``D_s`` (the g_l releases of the summary: MWEM's ``h2.select`` and
``h2.measure`` steps, or one Gaussian release per later round). The consumer's has one,
``consumer:D_v`` (g~). The budget check before a run (``summarize.privacy.budget_summary`` and
``budget_validation``), each party's lifetime charge, the ledgers the curator records on and the
noise each release is calibrated with all come from these plans.

Two things :class:`~marketplace.privacy.plan.ReleasePlan` does not do, done here by
:class:`SummarizePlan`: with an empty seed set, D_s's first private MWEM release (T_init iterations
at ``eps_first_round``) and the later ones (``eps_later_rounds``) are recorded under the same
mechanism names, ``h2.select`` and ``h2.measure``, at different costs, where a plan names each
release once (:class:`LedgerRelease`: a plan name of its own, the ledger's name in ``records``); and
an owner's plan that releases nothing noisy (one round, ``eps_auction`` 0) still declares the
negligible ``min_eps`` that keeps its sale on the owner's ledger.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from marketplace.privacy.ledger import PrivacyLedger
from marketplace.privacy.lifetime.cost import Cost
from marketplace.privacy.lifetime.declared import Declared
from marketplace.privacy.neighbouring import REPLACE_ONE
from marketplace.privacy.plan import Account, PlanExceeded, Release, ReleasePlan
from marketplace.privacy.steps import Step

__all__ = [
    "BUDGET_SUMMARY_KEY",
    "BUDGET_VALIDATION_KEY",
    "LedgerRelease",
    "MIN_EPS",
    "NOT_COVERED",
    "SummarizePlan",
]

BUDGET_VALIDATION_KEY = "summarize.privacy.budget_validation"
BUDGET_SUMMARY_KEY = "summarize.privacy.budget_summary"
NOT_COVERED = (
    "the points sold (in the clear), what the choice of a sold point (its best remaining by the bid) reveals of its "
    "unsold points, and which points enter D_s"
)
"""What leaves an owner that its declared cost does not bound (docs/privacy.md)."""
NON_PRIVATE_OWNER = "the non-private form broadcasts D_s's exact mean embedding and asks the exact best bidder"
NON_PRIVATE_CONSUMER = "the non-private form sends D_v's mean embedding in the clear"
MIN_EPS = 1e-12
"""An owner's declared eps when nothing noisy is released (one round, eps_auction 0): its sale stays on
its ledger (an overstatement of the cost, never of the privacy)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LedgerRelease(Release):
    """A release its ledger records under ``records``, a mechanism name another release of the
    plan records too at another cost (D_s's first MWEM release and its later ones, both
    ``h2.select`` / ``h2.measure``); ``name`` is its own, in the plan."""

    records: str = ""

    def step(self, count: int | None = None) -> Step:
        return dataclasses.replace(super().step(count), mechanism=self.records or self.name)


def _signature(step: Step) -> tuple[Any, ...]:
    return step.mechanism, step.eps, step.delta, step.rho, step.gaussian


class SummarizePlan(ReleasePlan):
    """A :class:`ReleasePlan` that knows :class:`LedgerRelease` and declares ``min_eps`` for a plan
    without releases (see the module docstring); its totals are composed once per plan."""

    def spend(self, ledger: PrivacyLedger, name: str, count: int | None = None) -> Step:
        release = self.release(name)
        step = release.step(count)
        if sum(r.step().mechanism == step.mechanism for r in self.releases) == 1:
            return super().spend(ledger, name, count)
        # releases recorded under one mechanism name (LedgerRelease): the ledger tells them apart by
        # their cost only, so identical steps of several together stay within what the plan declares
        # for all of them
        same = _signature(step)
        planned = sum(r.count for r in self.releases if _signature(r.step()) == same)
        done = sum(s.count for s in ledger.steps if _signature(s) == same)
        if done + step.count > planned:
            raise PlanExceeded(
                f"{self.party}: release {name!r} ({step.mechanism}) planned {planned} time(s) at this cost, asked for "
                f"{done + step.count}: every release is charged as planned, never more"
            )
        if step.count:
            ledger.spend(step.eps or 0.0, step.delta, mechanism=step.mechanism, count=step.count)
        return step

    def totals(self) -> dict[str, Any]:
        return dict(_totals(self.accounts, self.releases))

    def declared(self) -> Declared | None:
        if not self.releases and not self.unbounded and self.min_eps > 0:
            what = self.what + (f"; not covered: {self.not_covered}" if self.not_covered else "")
            return Declared(what, Cost(eps=self.min_eps), self.relation)
        return super().declared()


@functools.lru_cache(maxsize=64)
def _totals(accounts: tuple[Account, ...], releases: tuple[Release, ...]) -> tuple[tuple[str, Any], ...]:
    """Each account's planned total: the same for every owner of a run (10,000 owners share one)."""
    plan = ReleasePlan(party="-", what="-", relation=REPLACE_ONE, accounts=accounts, releases=releases)
    return tuple(plan.totals().items())
