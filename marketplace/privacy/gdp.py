"""The exact privacy of Gaussian mechanisms, and of any number of them composed.

A Gaussian mechanism adds N(0, sigma^2) noise to a query of L2 sensitivity D. Its privacy is
captured exactly by one number, mu = D / sigma (mu-GDP, Dong, Roth & Su 2022, "Gaussian
Differential Privacy"): the privacy loss between the two worst neighbouring datasets is the same as
between N(0, 1) and N(mu, 1). Composing k Gaussian mechanisms gives exactly
mu = sqrt(mu_1^2 + ... + mu_k^2), and mu converts to (eps, delta)-DP exactly by

    delta(eps) = Phi(mu / 2 - eps / mu) - e^eps Phi(-mu / 2 - eps / mu)

(Balle & Wang 2018, "Improving the Gaussian Mechanism for Differential Privacy", Theorem 8). This
is the tightest statement there is for these mechanisms: no accountant can certify a smaller eps
at that delta. A rho-zCDP statement of the same mechanism (rho = mu^2 / 2) converted by
Canonne–Kamath–Steinke is a valid but looser bound.

It holds for the continuous Gaussian. The ``secure`` mode samples OpenDP's discrete Gaussian,
whose certificate is a zCDP one; ledgers keep the zCDP conversion for those.

>>> round(gaussian_eps(mu=1.0, delta=1e-5), 4)
4.3772
>>> round(gaussian_delta(mu=1.0, eps=gaussian_eps(mu=1.0, delta=1e-5)), 12)
1e-05
"""

from __future__ import annotations

import math

from marketplace.checks import fail, is_real

__all__ = ["calibrate_mu", "gaussian_delta", "gaussian_eps"]

SAFETY = 1e-9
"""Relative margin added to every eps this module returns, so that float rounding in Phi can only
make a reported eps larger than the exact one, never smaller."""


def _positive(value: float, name: str, where: str) -> float:
    if not is_real(value) or not (math.isfinite(value) and value > 0):
        raise fail(ValueError, name, where, "a finite number > 0", value)
    return float(value)


def _delta_arg(value: float, where: str) -> float:
    if not is_real(value) or not 0 < value < 1:
        raise fail(ValueError, "delta", where, "in (0, 1)", value)
    return float(value)


def gaussian_delta(*, mu: float, eps: float) -> float:
    """The exact smallest delta for which a mu-GDP mechanism is (eps, delta)-DP (eps >= 0)."""
    mu = _positive(mu, "mu", "gaussian_delta")
    if not is_real(eps) or not (math.isfinite(eps) and eps >= 0):
        raise fail(ValueError, "eps", "gaussian_delta", "a finite number >= 0", eps)
    from scipy.special import log_ndtr  # here, not at import: importing marketplace.privacy stays light

    log_a = float(log_ndtr(mu / 2 - eps / mu))
    log_b = eps + float(log_ndtr(-mu / 2 - eps / mu))
    if log_b >= log_a:
        return 0.0
    return math.exp(log_a) * -math.expm1(log_b - log_a)


def gaussian_eps(*, mu: float, delta: float) -> float:
    """The smallest eps >= 0 with ``gaussian_delta(mu, eps) <= delta``, rounded up (never below
    the exact value): what k composed Gaussian mechanisms cost, with mu = sqrt(sum mu_i^2)."""
    mu = _positive(mu, "mu", "gaussian_eps")
    delta = _delta_arg(delta, "gaussian_eps")
    if gaussian_delta(mu=mu, eps=0.0) <= delta:
        return 0.0
    lo, hi = 0.0, max(1.0, mu * mu)
    while gaussian_delta(mu=mu, eps=hi) > delta:
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or hi - lo <= 1e-15 * hi:
            break
        lo, hi = (lo, mid) if gaussian_delta(mu=mu, eps=mid) <= delta else (mid, hi)
    return hi * (1 + SAFETY)


def calibrate_mu(total_eps: float, delta: float) -> float:
    """The largest mu whose exact (eps, delta) conversion stays within ``total_eps``: how much
    Gaussian noise (sigma = sensitivity / mu) a target (eps, delta) allows.

    >>> mu = calibrate_mu(1.0, 1e-5); round(mu, 4), gaussian_eps(mu=mu, delta=1e-5) <= 1.0
    (0.2681, True)
    """
    total_eps = _positive(total_eps, "total_eps", "calibrate_mu")
    delta = _delta_arg(delta, "calibrate_mu")

    def fits(mu: float) -> bool:
        return gaussian_eps(mu=mu, delta=delta) <= total_eps

    lo, hi = 0.0, 1.0
    while fits(hi):
        lo, hi = hi, 2 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if not lo < mid < hi or hi - lo <= 1e-14 * hi:
            break
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
