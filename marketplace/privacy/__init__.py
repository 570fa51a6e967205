"""Differential privacy: noise mechanisms, the RNG policy, and the privacy accountant.

* :mod:`~marketplace.privacy.mechanisms`: Laplace, Gaussian (analytic; zCDP form), exponential and
  report-noisy-max, each stating its exact cost; ``secure=True`` draws noise with OpenDP's exact
  samplers on a power-of-two grid (immune to the floating-point attack on naive Laplace).
* :mod:`~marketplace.privacy.rng`: seeded generators for reproducible simulation, OS entropy in
  secure mode.
* :mod:`~marketplace.privacy.accountant`: basic, advanced, optimal (Kairouz-Oh-Viswanath) and zCDP
  composition, calibration of per-step budgets, and a per-dataset ledger that refuses overspending.
* :mod:`~marketplace.privacy.lifetime`: an owner's lifetime budget, a durable SQLite ledger charged
  before every release, with a basic-composition or zCDP privacy filter.
* :mod:`~marketplace.privacy.erm`: private linear classifiers by objective perturbation
  (Chaudhuri, Monteleoni and Sarwate, 2011), with their non-private reference fit.
"""

from marketplace.privacy.accountant import (
    THEOREMS,
    BudgetExceeded,
    Guarantee,
    PrivacyLedger,
    Step,
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
from marketplace.privacy.mechanisms import Exponential, Gaussian, GaussianZCDP, Laplace, Mechanism, ReportNoisyMax
from marketplace.privacy.rng import SecureGenerator, is_secure, make_rng

__all__ = [
    "THEOREMS",
    "BudgetExceeded",
    "Exponential",
    "Gaussian",
    "GaussianZCDP",
    "Guarantee",
    "Laplace",
    "Mechanism",
    "PrivacyLedger",
    "ReportNoisyMax",
    "SecureGenerator",
    "Step",
    "advanced",
    "basic",
    "calibrate",
    "calibrate_zcdp",
    "compose",
    "is_secure",
    "make_rng",
    "optimal",
    "zcdp_of_gaussian",
    "zcdp_of_pure",
    "zcdp_to_dp",
]
