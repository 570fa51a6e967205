"""What one release costs, as its requester declares it, and what a filter charges for it.

A :class:`Cost` holds what the mechanism states about itself: an (eps, delta)-DP figure, a
rho-zCDP figure, or both (a Laplace release is eps-DP and eps^2/2-zCDP; an analytic Gaussian is
(eps, delta)-DP and rho-zCDP). Each filter charges the figure it can compose:

* ``basic`` charges (eps, delta); a cost stated only in zCDP cannot be charged there.
* ``zcdp`` charges rho; a pure eps-DP cost without a stated rho is charged eps^2/2 (Bun and Steinke,
  *Concentrated Differential Privacy*, 2016, Prop. 1.4); an (eps, delta) cost with delta > 0 and no
  rho cannot be charged there (it has no zCDP guarantee).

>>> Cost.pure(0.5).charge("zcdp")
Charge(eps=None, delta=None, rho=0.125)
>>> Cost.gaussian(sensitivity=1.0, sigma=2.0).rho
0.125
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, NamedTuple

from marketplace.privacy.neighbouring import REPLACE_ONE_DISTINCT, budget_relation_text

FILTERS = ("basic", "zcdp")


class LedgerInputError(ValueError):
    """A value given to the lifetime ledger is not what it must be (the message names it)."""


def fail(name: str, where: str, expected: str, value: Any) -> LedgerInputError:
    """One message format: "The 'x' parameter of f must be ... Got ... instead."."""
    return LedgerInputError(f"The {name!r} parameter of {where} must be {expected}. Got {value!r} instead.")


def _real(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)


def positive(value: Any, name: str, where: str) -> float:
    """A finite real number > 0 (bools refused), as a float."""
    if not (_real(value) and value > 0):
        raise fail(name, where, "a finite number > 0", value)
    return float(value)


def non_negative(value: Any, name: str, where: str) -> float:
    """A finite real number >= 0 (bools refused), as a float."""
    if not (_real(value) and value >= 0):
        raise fail(name, where, "a finite number >= 0", value)
    return float(value)


def probability(value: Any, name: str, where: str) -> float:
    """A delta: a real number in [0, 1)."""
    if not (_real(value) and 0 <= value < 1):
        raise fail(name, where, "a number in [0, 1)", value)
    return float(value)


class BudgetDeclined(Exception):
    """A release was declined: its declared cost does not fit in what the owner has left.
    ``reason`` names the owner, the request, the cost, what is left and the filter."""

    def __init__(
        self, reason: str, *, owner: str, request_id: str, cost: Cost | None, remaining: Charge, filter: str
    ) -> None:
        super().__init__(reason)
        self.reason, self.owner, self.request_id = reason, owner, request_id
        self.cost, self.remaining, self.filter = cost, remaining, filter


def check_filter(value: Any, where: str) -> str:
    """One of :data:`FILTERS`."""
    if value not in FILTERS:
        raise fail("filter", where, f"one of {list(FILTERS)}", value)
    return value


class Charge(NamedTuple):
    """What a filter takes for one release: (eps, delta) under ``basic``, rho under ``zcdp``."""

    eps: float | None
    delta: float | None
    rho: float | None


@dataclass(frozen=True)
class Cost:
    """A release's declared privacy cost: ``eps`` (with ``delta``, 0 for pure DP), ``rho``, or both.
    At least one of eps and rho; every figure finite, eps and rho > 0, delta in [0, 1)."""

    eps: float | None = None
    delta: float = 0.0
    rho: float | None = None

    def __post_init__(self) -> None:
        if self.eps is None and self.rho is None:
            raise LedgerInputError("The 'cost' of a release must state eps (with delta) or rho, or both. Got neither.")
        if self.eps is not None:
            object.__setattr__(self, "eps", positive(self.eps, "eps", "Cost"))
        object.__setattr__(self, "delta", probability(self.delta, "delta", "Cost"))
        if self.eps is None and self.delta != 0:
            raise fail("delta", "Cost", "0 when no eps is given (a rho-only cost)", self.delta)
        if self.rho is not None:
            object.__setattr__(self, "rho", positive(self.rho, "rho", "Cost"))

    @classmethod
    def pure(cls, eps: float) -> Cost:
        """An eps-DP release (Laplace, randomized response, ...)."""
        return cls(eps=eps)

    @classmethod
    def approximate(cls, eps: float, delta: float) -> Cost:
        """An (eps, delta)-DP release with no zCDP statement."""
        return cls(eps=eps, delta=delta)

    @classmethod
    def zcdp(cls, rho: float) -> Cost:
        """A rho-zCDP release."""
        return cls(rho=rho)

    @classmethod
    def gaussian(cls, *, sensitivity: float, sigma: float) -> Cost:
        """The Gaussian mechanism N(0, sigma^2) on an L2-sensitivity query: sensitivity^2/(2 sigma^2)-zCDP."""
        sensitivity = positive(sensitivity, "sensitivity", "Cost.gaussian")
        sigma = positive(sigma, "sigma", "Cost.gaussian")
        return cls(rho=sensitivity**2 / (2 * sigma**2))

    @classmethod
    def of(cls, mechanism: Any, count: int = 1) -> Cost:
        """The cost of ``count`` calls of a mechanism of :mod:`marketplace.privacy.mechanisms`, from
        its ``privacy_cost()``: eps, delta and rho each multiplied by ``count`` (basic composition for
        (eps, delta), additivity for zCDP)."""
        if not hasattr(mechanism, "privacy_cost"):
            raise fail(
                "mechanism", "Cost.of", "a mechanism with privacy_cost() (marketplace.privacy.mechanisms)", mechanism
            )
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise fail("count", "Cost.of", "an integer >= 1", count)
        stated = mechanism.privacy_cost()
        eps, delta, rho = stated.get("epsilon"), stated.get("delta") or 0.0, stated.get("rho")
        return cls(
            eps=None if eps is None else eps * count,
            delta=delta * count if eps is not None else 0.0,
            rho=None if rho is None else rho * count,
        )

    def charge(self, filter: str) -> Charge:
        """What ``filter`` charges for this cost; :class:`LedgerInputError` if it cannot charge it."""
        check_filter(filter, "Cost.charge")
        if filter == "basic":
            if self.eps is None:
                raise LedgerInputError(
                    f"A 'basic' ledger charges (eps, delta), and this cost states only rho={self.rho!r}: "
                    "declare the release's (eps, delta) too, or keep the owner's ledger under the 'zcdp' filter."
                )
            return Charge(self.eps, self.delta, None)
        if self.rho is not None:
            return Charge(None, None, self.rho)
        if self.delta > 0 or self.eps is None:  # no rho: __post_init__ holds that eps is stated
            raise LedgerInputError(
                f"A 'zcdp' ledger charges rho, and this cost is (eps={self.eps!r}, delta={self.delta!r})-DP "
                "with no zCDP statement: declare its rho (e.g. Cost.gaussian or Cost.of(mechanism))."
            )
        return Charge(None, None, self.eps * self.eps / 2)

    def as_replace_one(self) -> Cost:
        """This cost, stated under add/remove-one, restated under replace-one (a replacement is a
        removal and an addition: group privacy for two records). (eps, delta) becomes
        (2 eps, 2 e^eps delta) (S. Vadhan, *The Complexity of Differential Privacy*, 2017, Lemma 2.2);
        rho becomes 4 rho (Bun and Steinke, 2016, Prop. 1.9). Raises :class:`LedgerInputError` if the
        converted delta is not below 1."""
        delta = 2 * math.exp(self.eps) * self.delta if self.eps is not None else 0.0
        if delta >= 1:
            raise LedgerInputError(
                f"a cost of {self.describe()} under add/remove-one has no replace-one statement "
                f"with delta < 1 (2 e^eps delta = {delta:g})"
            )
        return Cost(
            eps=None if self.eps is None else 2 * self.eps, delta=delta, rho=None if self.rho is None else 4 * self.rho
        )

    def describe(self) -> str:
        """``eps=0.1``, ``eps=0.5, delta=1e-06, rho=0.02``, ``rho=0.125``."""
        parts = []
        if self.eps is not None:
            parts.append(f"eps={self.eps:g}" + (f", delta={self.delta:g}" if self.delta else ""))
        if self.rho is not None:
            parts.append(f"rho={self.rho:g}")
        return ", ".join(parts)


def restate(cost: Cost, stated_under: str, ledger_relation: str | None) -> Cost:
    """``cost``, stated under the relation ``stated_under``, as a ledger kept under
    ``ledger_relation`` charges it: unchanged under the same relation, :meth:`Cost.as_replace_one`
    from add/remove-one to replace-one (or to its distinct-points restriction, a subset of its
    pairs); unchanged from replace-one to that restriction (a guarantee over every replace-one pair
    holds over some of them). :class:`LedgerInputError` saying why for any other pair: in particular
    a cost under the restriction says nothing about the pairs it leaves out, so it is never charged
    as a replace-one or add/remove-one cost. Either relation may be given by its budget name
    (``replace-one-distinct``, :func:`~marketplace.privacy.neighbouring.budget_relation_text`)."""
    stated_under = budget_relation_text(stated_under)
    ledger_relation = None if ledger_relation is None else budget_relation_text(ledger_relation)
    if stated_under == ledger_relation:
        return cost
    if stated_under == "add/remove-one" and ledger_relation in ("replace-one", REPLACE_ONE_DISTINCT):
        return cost.as_replace_one()
    if stated_under == "replace-one" and ledger_relation == REPLACE_ONE_DISTINCT:
        return cost
    raise LedgerInputError(f"a cost stated under {stated_under!r} cannot be restated under {ledger_relation!r}")
