"""What a :meth:`~marketplace.privacy.lifetime.ledger.LifetimeLedger.reserve` decides, without I/O.

The ledger reads the rows that count inside its write transaction and hands them here with the
request; :func:`decide` says whether the request is reserved or declined (the global budget first,
then the consumer's quota, then the sale terms), and :func:`declined` words the error of a decline
by the budget or the quota. The ledger writes the outcome in the same transaction. Every decision
reads only the declared cost and those rows: nothing here touches the file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from marketplace.privacy.lifetime.cost import BudgetDeclined, Charge, Cost
from marketplace.privacy.lifetime.filters import Limits, amount
from marketplace.privacy.lifetime.terms import SaleTerms


@dataclass(frozen=True)
class Request:
    """One call of :meth:`LifetimeLedger.reserve`, its arguments checked and its cost priced: what
    the steps of its write transaction share."""

    request_id: str
    consumer: str
    what: str
    cost: Cost
    """The declared cost, restated under the ledger's relation."""
    charge: Charge
    """What the ledger's filter charges for ``cost``."""
    quota: tuple[float, float] | None
    points: int | None
    terms: SaleTerms | None


@dataclass(frozen=True)
class Decision:
    """What :meth:`LifetimeLedger.reserve` decided for a request inside its write, and what it read
    to decide (the errors of a decline say what is left)."""

    state: str
    """``reserved`` or ``declined``."""
    rows: list[tuple[str, Charge]]
    """(consumer, charge) of every row counted before this request."""
    quota: Limits | None
    """The consumer's quota as a filter, when it has one."""
    over_quota: bool
    cap: int
    """The most points the sale terms let the request reserve (0 without terms, or once declined)."""
    sold_out: bool


def decide(limits: Limits, request: Request, rows: list[tuple[str, Charge]], sale_cap: Callable[[], int]) -> Decision:
    """Whether ``request`` is reserved or declined under the ledger's ``limits``, given ``rows``
    ((consumer, charge) of every row that counts): the global budget first, then the consumer's
    quota, then (when it buys points) the sale terms, whose cap (``sale_cap()``, read from the
    ledger) is asked only for a request that fits the budget and the quota."""
    consumer, charge, terms, points = request.consumer, request.charge, request.terms, request.points
    counted = [c for _, c in rows]
    state = "reserved" if limits.fits(counted, charge) else "declined"
    quota_limits = None if request.quota is None else Limits(limits.filter, *request.quota)
    over_quota = (
        state == "reserved"
        and quota_limits is not None
        and not quota_limits.fits([c for who, c in rows if who == consumer], charge)
    )
    if over_quota:
        state = "declined"
    cap = 0 if terms is None or state != "reserved" else sale_cap()
    sold_out = terms is not None and state == "reserved" and cap <= 0 < (points or 0)
    state = "declined" if sold_out else state
    return Decision(state=state, rows=rows, quota=quota_limits, over_quota=over_quota, cap=cap, sold_out=sold_out)


def left_of(limits: Limits, decision: Decision) -> Charge:
    """What is left of the global budget, as the decision read it."""
    return limits.remaining(limits.spent(c for _, c in decision.rows))


def declined(
    owner: str, limits: Limits, budget: tuple[float, float], request: Request, decision: Decision
) -> BudgetDeclined | None:
    """The error of a request declined by the consumer's quota or by the budget (``budget``: the
    ledger's (eps, delta)), saying what is left of it; None when it was reserved. A request declined
    by the sale terms (``decision.sold_out``) is worded by :func:`.sales.terms_declined`, which reads
    the ledger."""
    request_id, consumer, what, cost, charge = (
        request.request_id,
        request.consumer,
        request.what,
        request.cost,
        request.charge,
    )
    quota_limits = decision.quota
    if decision.over_quota and quota_limits is not None:
        mine = quota_limits.spent(c for who, c in decision.rows if who == consumer)
        return BudgetDeclined(
            f"{owner}: declined request {request_id!r} ({what}, for {consumer}): it costs "
            f"{cost.describe()}, "
            f"charged as {amount(charge)}, and {amount(quota_limits.remaining(mine))} is left of {consumer}'s "
            f"quota "
            f"(eps={quota_limits.eps:g}, delta={quota_limits.delta:g}) "
            f"under the filter {limits.describe()}",
            owner=owner,
            request_id=request_id,
            cost=cost,
            remaining=quota_limits.remaining(mine),
            filter=limits.filter,
        )
    if decision.state == "declined":
        left = left_of(limits, decision)
        return BudgetDeclined(
            f"{owner}: declined request {request_id!r} ({what}, for {consumer}): it costs "
            f"{cost.describe()}, "
            f"charged as {amount(charge)}, and {amount(left)} is left of the budget "
            f"(eps={budget[0]:g}, delta={budget[1]:g}) under the filter {limits.describe()}",
            owner=owner,
            request_id=request_id,
            cost=cost,
            remaining=left,
            filter=limits.filter,
        )
    return None
