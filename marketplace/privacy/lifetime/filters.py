"""The two privacy filters of a lifetime ledger: may one more release be charged?

A filter is a stopping rule for adaptively chosen releases: each release's cost may depend on every
earlier result, and the filter declines a release that would take the composed cost past the
budget. Its guarantee is that the whole sequence, however it was chosen, is (eps, delta)-DP.

* ``basic``: charge (eps_i, delta_i); allow while sum eps_i <= eps and sum delta_i <= delta. Basic
  composition is a valid filter (Rogers, Roth, Ullman and Vadhan, *Privacy Odometers and Filters:
  Pay-as-you-Go Composition*, NeurIPS 2016).
* ``zcdp``: charge rho_i; allow while sum rho_i <= rho_budget. The sequence is then
  rho_budget-zCDP (the Rényi filter of Feldman and Zrnic, *Individual Privacy Accounting via a Rényi
  Filter*, NeurIPS 2021, at every order; Whitehouse, Ramdas, Rogers and Wu, *Fully-Adaptive
  Composition in Differential Privacy*, ICML 2023), hence (eps, delta)-DP by Bun and Steinke's
  conversion eps = rho + 2 sqrt(rho ln(1/delta)) (*Concentrated Differential Privacy*, 2016,
  Prop. 1.3). rho_budget is the largest rho that conversion maps into the budget's eps.

Sums are taken with :func:`math.fsum` (correctly rounded) and compared with the budget as they are:
no tolerance is added.

>>> round(zcdp_budget(1.0, 1e-6), 6)
0.017469
>>> bun_steinke_eps(zcdp_budget(1.0, 1e-6), 1e-6) <= 1.0
True
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from marketplace.privacy.lifetime.cost import Charge, LedgerInputError, check_filter

DESCRIPTIONS = {
    "basic": "basic composition (sum of eps and sum of delta within the budget; a valid filter: "
    "Rogers, Roth, Ullman, Vadhan, Privacy Odometers and Filters, NeurIPS 2016)",
    "zcdp": "zCDP (sum of rho within the rho budget, converted to (eps, delta) by Bun-Steinke; a valid filter: "
    "Whitehouse, Ramdas, Rogers, Wu, Fully-Adaptive Composition in Differential Privacy, ICML 2023)",
}


def bun_steinke_eps(rho: float, delta: float) -> float:
    """rho-zCDP implies (rho + 2 sqrt(rho ln(1/delta)), delta)-DP (Bun and Steinke 2016, Prop. 1.3)."""
    if rho == 0:
        return 0.0
    return rho + 2 * math.sqrt(rho * math.log(1 / delta))


def zcdp_budget(eps: float, delta: float) -> float:
    """The largest rho whose Bun-Steinke conversion at ``delta`` is at most ``eps``.

    Solving rho + 2 sqrt(rho L) = eps (L = ln(1/delta)) for sqrt(rho) gives sqrt(L + eps) - sqrt(L),
    computed as eps / (sqrt(L + eps) + sqrt(L)) to avoid cancellation, then stepped down by ulps until
    the conversion of the float result is within eps (so rounding never overstates the budget)."""
    if not 0 < delta < 1:
        raise LedgerInputError(
            f"A 'zcdp' ledger needs a budget delta in (0, 1): rho-zCDP gives no (eps, 0) "
            f"guarantee. Got delta={delta!r} instead."
        )
    log_inv = math.log(1 / delta)
    rho = (eps / (math.sqrt(log_inv + eps) + math.sqrt(log_inv))) ** 2
    while rho > 0 and bun_steinke_eps(rho, delta) > eps:
        rho = math.nextafter(rho, 0.0)
    return rho


def counted(charge: Charge, name: str, filter: str) -> float:
    """``charge``'s figure ``name`` (eps, delta or rho), which every charge a ``filter`` ledger counts
    carries (:meth:`Cost.charge`); a TypeError if it carries none."""
    value: float | None = getattr(charge, name)
    if value is None:
        raise TypeError(f"A {filter!r} filter counts {name}, and the charge {charge!r} carries none.")
    return value


class Limits:
    """A budget as a filter sees it: (eps, delta) for ``basic``, rho for ``zcdp``."""

    def __init__(self, filter: str, eps: float, delta: float) -> None:
        self.filter = check_filter(filter, "Limits")
        self.eps, self.delta = eps, delta
        self.rho = zcdp_budget(eps, delta) if filter == "zcdp" else None

    def rho_budget(self) -> float:
        """The rho budget of a ``zcdp`` filter (a ``basic`` one has none: a ValueError)."""
        if self.rho is None:
            raise ValueError(f"A {self.filter!r} filter has no rho budget.")
        return self.rho

    def spent(self, charges: Iterable[Charge]) -> Charge:
        """The filter's total of ``charges`` (every charge that counts)."""
        charges = list(charges)
        if self.filter == "basic":
            eps = math.fsum(counted(c, "eps", self.filter) for c in charges)
            return Charge(eps, math.fsum(counted(c, "delta", self.filter) for c in charges), None)
        return Charge(None, None, math.fsum(counted(c, "rho", self.filter) for c in charges))

    def fits(self, charges: Iterable[Charge], extra: Charge) -> bool:
        """Whether ``extra`` may be charged on top of ``charges``: only the declared figures and the
        ledger's own charges decide."""
        total = self.spent([*charges, extra])
        if self.filter == "basic":
            return counted(total, "eps", self.filter) <= self.eps and counted(total, "delta", self.filter) <= self.delta
        return counted(total, "rho", self.filter) <= self.rho_budget()

    def remaining(self, spent: Charge) -> Charge:
        """What a further charge may still take (never below 0)."""
        if self.filter == "basic":
            eps, delta = counted(spent, "eps", self.filter), counted(spent, "delta", self.filter)
            return Charge(max(0.0, self.eps - eps), max(0.0, self.delta - delta), None)
        return Charge(None, None, max(0.0, self.rho_budget() - counted(spent, "rho", self.filter)))

    def guarantee(self, spent: Charge) -> tuple[float, float]:
        """The (eps, delta)-DP guarantee of everything charged so far."""
        if self.filter == "basic":
            return counted(spent, "eps", self.filter), counted(spent, "delta", self.filter)
        rho = counted(spent, "rho", self.filter)
        return (bun_steinke_eps(rho, self.delta), self.delta if rho > 0 else 0.0)

    def describe(self) -> str:
        """The filter, in words, with its budget."""
        text = DESCRIPTIONS[self.filter]
        if self.filter == "zcdp":
            text += f"; rho budget {self.rho:.6g} for (eps={self.eps:g}, delta={self.delta:g})"
        return text


def amount(charge: Charge) -> str:
    """``eps=0.3, delta=0`` or ``rho=0.0125``."""
    if charge.rho is not None:
        return f"rho={charge.rho:.6g}"
    return f"eps={charge.eps:.6g}, delta={charge.delta:.6g}"
