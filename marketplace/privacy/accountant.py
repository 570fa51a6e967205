"""Privacy accounting: what k releases cost together, and a ledger that refuses to overspend.

One import for what callers use; the parts live by responsibility: the composition theorems and
calibration in :mod:`.composition`, a ledger's records in :mod:`.steps`, how its steps add up and
which accountant produced each part in :mod:`.totals`, the ledger in :mod:`.ledger` (exact Gaussian
accounting: :mod:`.gdp`; the accountant's parameter checks: :mod:`.params`).

k steps compose by one of four theorems, ``basic``, ``advanced`` (Dwork–Rothblum–Vadhan),
``optimal`` (Kairouz–Oh–Viswanath) and ``zcdp`` (Bun–Steinke, converted by Canonne–Kamath–Steinke),
each stated in :mod:`.composition`; every one returns a :class:`Guarantee` ``(eps, delta)``.

>>> advanced(0.01, 1656, 0.01)            # the paper's D_v figure
Guarantee(eps=1.4014..., delta=0.01)
>>> round(optimal(0.1, 100, 1e-6).eps, 3), round(advanced(0.1, 100, 1e-6).eps, 3)
(4.775, 6.308)
>>> calibrate(1.40, 1656, 0.01, "optimal") > calibrate(1.40, 1656, 0.01, "advanced")
True

A :class:`PrivacyLedger` records what has been spent on one protected dataset and refuses a spend
that would exceed its budget:

>>> from marketplace.privacy.neighbouring import replace_one
>>> ledger = PrivacyLedger("consumer:D_v", neighbouring=replace_one("a row of D_v"), budget=(1.41, 0.01),
...                        theorem="advanced")
>>> ledger.spend(0.01, mechanism="mwem", count=1656)
Guarantee(eps=1.4014..., delta=0.01)
>>> ledger.spend(0.01, mechanism="mwem", count=100)
Traceback (most recent call last):
  ...
marketplace.privacy.ledger.BudgetExceeded: consumer:D_v: refused, the planned spend exceeds ...
"""

from __future__ import annotations

from marketplace.privacy.composition import (
    MAX_OPTIMAL_STEPS,
    THEOREMS,
    ZCDP_CONVERSIONS,
    ZERO,
    Guarantee,
    advanced,
    basic,
    calibrate,
    calibrate_zcdp,
    compose,
    optimal,
    zcdp_of_gaussian,
    zcdp_of_pure,
    zcdp_to_dp,
)
from marketplace.privacy.ledger import BUDGET_TOLERANCE, GAUSSIAN_ACCOUNTANTS, BudgetExceeded, PrivacyLedger
from marketplace.privacy.steps import Step
from marketplace.privacy.totals import (
    ACCOUNTANTS,
    ADVANCED,
    BASIC,
    EXACT_GAUSSIAN,
    NO_BOUND,
    NOTHING_SPENT,
    OPTIMAL,
    ZCDP,
)

__all__ = [
    "ACCOUNTANTS",
    "ADVANCED",
    "BASIC",
    "BUDGET_TOLERANCE",
    "EXACT_GAUSSIAN",
    "GAUSSIAN_ACCOUNTANTS",
    "MAX_OPTIMAL_STEPS",
    "NOTHING_SPENT",
    "NO_BOUND",
    "OPTIMAL",
    "THEOREMS",
    "ZCDP",
    "ZCDP_CONVERSIONS",
    "ZERO",
    "BudgetExceeded",
    "Guarantee",
    "PrivacyLedger",
    "Step",
    "advanced",
    "basic",
    "calibrate",
    "calibrate_zcdp",
    "compose",
    "optimal",
    "zcdp_of_gaussian",
    "zcdp_of_pure",
    "zcdp_to_dp",
]
