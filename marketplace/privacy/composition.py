"""Composition theorems: what k releases cost together, and the per-step budget a total allows.

Composition of k steps, each eps0-DP (or (eps0, delta0)-DP), by four theorems:

* ``basic``: (k eps0, k delta0).
* ``advanced`` (Dwork–Rothblum–Vadhan 2010): eps0 sqrt(2k ln(1/delta)) + k eps0 (e^eps0 - 1),
  with total delta k delta0 + delta. The paper's figures use it.
* ``optimal`` (Kairouz–Oh–Viswanath 2015): the exact smallest eps for a target total delta. k pure
  eps0-DP steps are dominated by k-fold randomized response, whose privacy loss is (k - 2l) eps0
  with l ~ Binomial(k, 1/(1 + e^eps0)); so delta(eps) = sum over l with (k - 2l) eps0 > eps of
  C(k, l) (e^((k-l) eps0) - e^eps e^(l eps0)) / (1 + e^eps0)^k, summed in log space, and eps is
  found by bisection (delta(eps) decreases).
* ``zcdp`` (Bun–Steinke 2016): an eps0-DP step is eps0^2/2-zCDP, rho adds up, and the total is
  converted to (eps, delta) once, by the conversion of Canonne–Kamath–Steinke 2020 (tighter than
  Bun–Steinke's rho + 2 sqrt(rho ln(1/delta)), which :func:`zcdp_to_dp` also offers).

Every function returns a :class:`Guarantee` ``(eps, delta)``; zero steps cost ``(0, 0)``.

>>> advanced(0.01, 1656, 0.01)            # the paper's D_v figure
Guarantee(eps=1.4014..., delta=0.01)
>>> round(optimal(0.1, 100, 1e-6).eps, 3), round(advanced(0.1, 100, 1e-6).eps, 3)
(4.775, 6.308)
>>> calibrate(1.40, 1656, 0.01, "optimal") > calibrate(1.40, 1656, 0.01, "advanced")
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple, overload

import numpy as np
from numpy.typing import NDArray

from marketplace.privacy.params import fail, nonnegative, nonnegative_int, one_of, positive, probability

THEOREMS = ("basic", "advanced", "optimal", "zcdp")
ZCDP_CONVERSIONS = ("bun-steinke", "cks")
MAX_OPTIMAL_STEPS = 10**7  # optimal() holds O(k) floats; beyond this use advanced or zcdp


class Guarantee(NamedTuple):
    """An (eps, delta)-DP guarantee."""

    eps: float
    delta: float


ZERO = Guarantee(0.0, 0.0)


def check_theorem(value: object, where: str) -> str:
    """``value``, if it names one of ``THEOREMS``."""
    return one_of(value, THEOREMS, "theorem", where)


# --- composition theorems


def basic(eps0: float, k: int, delta0: float = 0.0) -> Guarantee:
    """k steps of (eps0, delta0)-DP are (k eps0, 1 - (1 - delta0)^k)-DP (Kairouz–Oh–Viswanath 2015,
    Theorem 3.3 at eps = k eps0; never more than the union bound k delta0, and always below 1).

    >>> basic(0.5, 4, 1e-6)
    Guarantee(eps=2.0, delta=3.99999...e-06)
    >>> round(basic(0.1, 40, 1 - math.exp(-0.1)).delta, 4)   # the paper's auction over 40 rounds
    0.9817
    """
    eps0, k = positive(eps0, "eps0", "basic"), nonnegative_int(k, "k", "basic")
    delta0 = probability(delta0, "delta0", "basic")
    return ZERO if k == 0 else Guarantee(k * eps0, compose_delta(delta0, k))


def compose_delta(delta0: float, k: int) -> float:
    """1 - (1 - delta0)^k, computed without cancellation: the delta of k (., delta0) steps by basic composition."""
    return -math.expm1(k * math.log1p(-delta0)) if delta0 > 0 else 0.0


def advanced(eps0: float, k: int, delta: float, *, delta0: float = 0.0) -> Guarantee:
    """Advanced composition (Dwork–Rothblum–Vadhan): k steps of (eps0, delta0)-DP are
    (eps0 sqrt(2k ln(1/delta)) + k eps0 (e^eps0 - 1), k delta0 + delta)-DP for any delta in (0, 1).

    >>> advanced(0.01 / math.sqrt(1000), 1000, 1e-4).eps   # the paper's D_s figure, p = 200
    0.04301...
    """
    eps0, k = positive(eps0, "eps0", "advanced"), nonnegative_int(k, "k", "advanced")
    delta = probability(delta, "delta", "advanced", positive=True)
    delta0 = probability(delta0, "delta0", "advanced")
    if k == 0:
        return ZERO
    try:
        eps = eps0 * math.sqrt(2 * k * math.log(1 / delta)) + k * eps0 * math.expm1(eps0)
    except OverflowError:  # e^eps0 past the float range: the theorem gives no useful bound
        eps = math.inf
    return Guarantee(eps, k * delta0 + delta)


def _kov_log_delta(eps: float, log_weight: np.ndarray, loss: np.ndarray) -> float:
    """log of the exact delta(eps) of k-fold randomized response (-inf when it is 0).

    ``loss[l] = (k - 2l) eps0`` decreases, so the terms with loss > eps are a prefix."""
    n = int(np.searchsorted(-loss, -eps, side="left"))
    if n == 0:
        return -math.inf
    terms = log_weight[:n] + np.log(-np.expm1(eps - loss[:n]))
    top = terms.max()
    return float(top + math.log(np.exp(terms - top).sum()))


def _kov_terms(eps0: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """log C(k, l) e^((k-l) eps0) / (1 + e^eps0)^k and the loss (k - 2l) eps0, for l <= k/2
    (only losses > eps >= 0 ever contribute)."""
    from scipy.special import gammaln  # here, not at import: importing marketplace.privacy stays light

    ell = np.arange(k // 2 + 1, dtype=np.float64)
    log_weight = (
        gammaln(k + 1) - gammaln(ell + 1) - gammaln(k - ell + 1) + (k - ell) * eps0 - k * np.logaddexp(0.0, eps0)
    )
    return log_weight, (k - 2 * ell) * eps0


@functools.lru_cache(maxsize=256)
def _optimal(eps0: float, k: int, delta: float, delta0: float) -> float:
    if delta0 > 0:  # KOV Thm 3.3: delta_total = 1 - (1 - delta0)^k (1 - delta_pure)
        target = -math.expm1(math.log1p(-delta) - k * math.log1p(-delta0))
        if target <= 0:
            raise ValueError(
                f"optimal: delta={delta!r} is not more than 1 - (1 - delta0)^k "
                f"= {-math.expm1(k * math.log1p(-delta0))!r}; no eps reaches it"
            )
    else:
        target = delta
    if target == 0:
        return k * eps0
    log_weight, loss = _kov_terms(eps0, k)
    log_target = math.log(target)
    lo, hi = 0.0, k * eps0  # delta(k eps0) = 0 <= target
    if _kov_log_delta(lo, log_weight, loss) <= log_target:
        return 0.0
    for _ in range(1100):  # invariant: delta(lo) > target >= delta(hi); to float precision
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if _kov_log_delta(mid, log_weight, loss) <= log_target:
            hi = mid
        else:
            lo = mid
    return hi


def optimal(eps0: float, k: int, delta: float, *, delta0: float = 0.0) -> Guarantee:
    """Optimal composition (Kairouz–Oh–Viswanath): the smallest eps such that k steps of
    (eps0, delta0)-DP are (eps, delta)-DP, exactly (bisection to float precision, rounded up).

    Cost: O(k) memory and about 60 O(k) passes; ``k`` is limited to ``MAX_OPTIMAL_STEPS``.

    >>> optimal(0.1, 100, 1e-6).eps
    4.7745...
    >>> optimal(0.1, 100, 0.0).eps           # delta = 0 leaves only basic composition
    10.0...
    """
    eps0, k = positive(eps0, "eps0", "optimal"), nonnegative_int(k, "k", "optimal")
    delta = probability(delta, "delta", "optimal")
    delta0 = probability(delta0, "delta0", "optimal")
    if k > MAX_OPTIMAL_STEPS:
        raise fail(ValueError, "k", "optimal", f"at most {MAX_OPTIMAL_STEPS} (use advanced or zcdp)", k)
    if k == 0:
        return ZERO
    return Guarantee(_optimal(eps0, k, delta, delta0), delta)


def zcdp_of_pure(eps0: float) -> float:
    """An eps0-DP mechanism is eps0^2/2-zCDP (Bun–Steinke 2016, Prop. 1.4)."""
    eps0 = positive(eps0, "eps0", "zcdp_of_pure")
    return eps0 * eps0 / 2


def zcdp_of_gaussian(sensitivity: float, sigma: float) -> float:
    """The Gaussian mechanism N(0, sigma^2) on an L2-sensitivity query is
    sensitivity^2 / (2 sigma^2)-zCDP.

    >>> zcdp_of_gaussian(1.0, 2.0)
    0.125
    """
    sensitivity = positive(sensitivity, "sensitivity", "zcdp_of_gaussian")
    sigma = positive(sigma, "sigma", "zcdp_of_gaussian")
    return sensitivity**2 / (2 * sigma**2)


def _cks_eps(rho: float, delta: float) -> float:
    """Canonne–Kamath–Steinke 2020 (Prop. 12 / Cor. 13): rho-zCDP is (eps, delta)-DP with
    eps = min over a > 1 of a rho + log(1 - 1/a) - (log(delta) + log(a)) / (a - 1).
    Minimised over t = log(a - 1): a coarse grid, then Brent's method in the best cell."""

    @overload
    def eps_at(t: float) -> np.float64: ...
    @overload
    def eps_at(t: NDArray[np.float64]) -> NDArray[np.float64]: ...
    def eps_at(t: float | NDArray[np.float64]) -> np.float64 | NDArray[np.float64]:  # works on floats and arrays
        log_a = np.logaddexp(0.0, t)  # a = 1 + e^t
        return (1 + np.exp(t)) * rho + (t - log_a) - (math.log(delta) + log_a) * np.exp(-t)

    grid = np.linspace(-12.0, 40.0, 261)
    values = eps_at(grid)
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    from scipy.optimize import minimize_scalar  # here: importing scipy.optimize costs ~0.7 s

    best = minimize_scalar(lambda t: float(eps_at(t)), bounds=(lo, hi), method="bounded", options={"xatol": 1e-10})
    return min(float(values[i]), float(best.fun))


def zcdp_to_dp(rho: float, delta: float, *, method: str = "bun-steinke") -> float:
    """The eps of the (eps, delta)-DP guarantee implied by rho-zCDP.

    ``method="bun-steinke"``: rho + 2 sqrt(rho ln(1/delta)) (Bun–Steinke 2016, Prop. 1.3).
    ``method="cks"``: the tighter conversion of Canonne–Kamath–Steinke 2020 (never larger).

    >>> zcdp_to_dp(0.5, 1e-5)
    5.2985...
    >>> zcdp_to_dp(0.5, 1e-5, method="cks") < zcdp_to_dp(0.5, 1e-5)
    True
    """
    rho = nonnegative(rho, "rho", "zcdp_to_dp")
    delta = probability(delta, "delta", "zcdp_to_dp", positive=True)
    if method not in ZCDP_CONVERSIONS:
        raise fail(ValueError, "method", "zcdp_to_dp", f"one of {list(ZCDP_CONVERSIONS)}", method)
    if rho == 0:
        return 0.0
    bun_steinke = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    if method == "bun-steinke":
        return bun_steinke
    return max(0.0, min(bun_steinke, _cks_eps(rho, delta)))


def compose(eps0: float, k: int, *, theorem: str, delta: float | None = None, delta0: float = 0.0) -> Guarantee:
    """k steps of (eps0, delta0)-DP composed by ``theorem`` (one of ``THEOREMS``).

    ``delta`` is the theorem's delta: the slack of advanced composition, the total target of
    optimal, the conversion delta of zcdp; basic ignores it. ``zcdp`` needs pure steps
    (delta0 = 0) and converts with the Canonne–Kamath–Steinke bound.
    """
    theorem = check_theorem(theorem, "compose")
    if theorem == "basic":
        return basic(eps0, k, delta0)
    if delta is None:
        raise fail(ValueError, "delta", f"compose (theorem {theorem!r})", "given", delta)
    if theorem == "advanced":
        return advanced(eps0, k, delta, delta0=delta0)
    if theorem == "optimal":
        return optimal(eps0, k, delta, delta0=delta0)
    if probability(delta0, "delta0", "compose") > 0:
        raise fail(ValueError, "delta0", "compose (theorem 'zcdp')", "0 (zCDP of pure steps only)", delta0)
    rho = nonnegative_int(k, "k", "compose") * zcdp_of_pure(eps0)
    eps = zcdp_to_dp(rho, delta, method="cks")
    return ZERO if k == 0 else Guarantee(eps, delta)


def calibrate(total_eps: float, k: int, delta: float = 0.0, theorem: str = "advanced") -> float:
    """The largest per-step eps0 such that k eps0-DP steps composed by ``theorem`` stay within
    total_eps (with ``delta`` as in :func:`compose`). Basic gives total_eps / k; the others are
    solved by bisection, rounded down.

    >>> calibrate(1.0, 10, theorem="basic")
    0.1
    >>> eps0 = calibrate(1.40, 1656, 0.01, "advanced"); round(eps0, 5), advanced(eps0, 1656, 0.01).eps <= 1.40
    (0.00999, True)
    """
    total_eps = positive(total_eps, "total_eps", "calibrate")
    theorem = check_theorem(theorem, "calibrate")
    k = nonnegative_int(k, "k", "calibrate")
    if k == 0:
        raise fail(ValueError, "k", "calibrate", "an integer >= 1 (zero steps cost nothing)", k)
    if theorem == "basic":
        return total_eps / k
    if theorem == "optimal":
        return _calibrate_optimal(total_eps, k, probability(delta, "delta", "calibrate"))
    delta = probability(delta, "delta", f"calibrate (theorem {theorem!r})", positive=True)
    cost = functools.partial(compose, k=k, theorem=theorem, delta=delta)
    lo, hi = 0.0, total_eps / k  # grow hi until it no longer fits; fits(0) holds trivially
    while cost(hi).eps <= total_eps:
        lo, hi = hi, 2 * hi
    return _bisect(lambda eps0: cost(eps0).eps <= total_eps, lo, hi)


def calibrate_zcdp(total_eps: float, delta: float) -> float:
    """The largest total rho whose (eps, delta) conversion (Canonne–Kamath–Steinke, as the ledger
    uses) stays within total_eps: how much zCDP budget a target (eps, delta) allows.

    >>> rho = calibrate_zcdp(1.0, 1e-5); round(rho, 5), zcdp_to_dp(rho, 1e-5, method="cks") <= 1.0
    (0.03056, True)
    """
    total_eps = positive(total_eps, "total_eps", "calibrate_zcdp")
    delta = probability(delta, "delta", "calibrate_zcdp", positive=True)

    def fits(rho: float) -> bool:
        return zcdp_to_dp(rho, delta, method="cks") <= total_eps

    lo, hi = 0.0, total_eps
    while fits(hi):
        lo, hi = hi, 2 * hi
    return _bisect(fits, lo, hi)


def _calibrate_optimal(total_eps: float, k: int, delta: float) -> float:
    """delta(total_eps) of k-fold randomized response increases with eps0: bisect on it."""
    if k > MAX_OPTIMAL_STEPS:
        raise fail(ValueError, "k", "calibrate", f"at most {MAX_OPTIMAL_STEPS} for optimal", k)
    if delta == 0:
        return total_eps / k
    log_delta = math.log(delta)

    def fits(eps0: float) -> bool:
        return _kov_log_delta(total_eps, *_kov_terms(eps0, k)) <= log_delta

    lo, hi = total_eps / k, 2 * total_eps / k  # basic always fits
    while fits(hi) and hi < 700:
        lo, hi = hi, 2 * hi
    return _bisect(fits, lo, hi)


def _bisect(fits: Callable[[float], bool], lo: float, hi: float) -> float:
    """The largest x in [lo, hi) with fits(x), for a monotone fits with fits(lo) true."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi or hi - lo <= 1e-14 * hi:
            break
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo
