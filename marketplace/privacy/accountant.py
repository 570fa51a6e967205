"""Privacy accounting: what k releases cost together, and a ledger that refuses to overspend.

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

A :class:`PrivacyLedger` records what has been spent on one protected dataset and refuses a spend
that would exceed its budget:

>>> from marketplace.privacy.neighbouring import replace_one
>>> ledger = PrivacyLedger("consumer:D_v", neighbouring=replace_one("a row of D_v"), budget=(1.41, 0.01), theorem="advanced")
>>> ledger.spend(0.01, mechanism="mwem", count=1656)
Guarantee(eps=1.4014..., delta=0.01)
>>> ledger.spend(0.01, mechanism="mwem", count=100)
Traceback (most recent call last):
  ...
marketplace.privacy.accountant.BudgetExceeded: consumer:D_v: refused, the planned spend exceeds ...
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from scipy.special import gammaln

from marketplace.privacy.gdp import gaussian_eps
from marketplace.privacy.neighbouring import Neighbouring
from marketplace.privacy.noise import coins_note

THEOREMS = ("basic", "advanced", "optimal", "zcdp")
GAUSSIAN_ACCOUNTANTS = ("exact", "zcdp")
ZCDP_CONVERSIONS = ("bun-steinke", "cks")
MAX_OPTIMAL_STEPS = 10**7  # optimal() holds O(k) floats; beyond this use advanced or zcdp
BUDGET_TOLERANCE = 1e-9  # relative slack when comparing a planned total with a budget (rounding)

EXACT_GAUSSIAN = "exact Gaussian (privacy-loss distribution of the composed Gaussian mechanism)"
BASIC = "basic composition"
ADVANCED = "advanced composition (Dwork-Rothblum-Vadhan)"
OPTIMAL = "optimal composition (Kairouz-Oh-Viswanath)"
ZCDP = "zCDP -> (eps, delta) by Canonne-Kamath-Steinke"
NO_BOUND = "no finite bound (no slack delta left for its zCDP or Gaussian steps)"
NOTHING_SPENT = "nothing spent"
ACCOUNTANTS = (EXACT_GAUSSIAN, BASIC, ADVANCED, OPTIMAL, ZCDP, NO_BOUND, NOTHING_SPENT)
"""What :meth:`PrivacyLedger.accountant` says produced a figure (one of these, or several joined)."""


class Guarantee(NamedTuple):
    """An (eps, delta)-DP guarantee."""

    eps: float
    delta: float


ZERO = Guarantee(0.0, 0.0)


# --- parameter checks: one message format, "The 'x' parameter of f must be ... Got ... instead."


def _fail(kind: type[Exception], name: str, where: str, expected: str, value: Any) -> Exception:
    got = f"{value!r} ({type(value).__name__})" if kind is TypeError else repr(value)
    return kind(f"The {name!r} parameter of {where} must be {expected}. Got {got} instead.")


def _real(value: Any, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(TypeError, name, where, "a real number", value)
    return float(value)


def _positive(value: Any, name: str, where: str) -> float:
    x = _real(value, name, where)
    if not (math.isfinite(x) and x > 0):
        raise _fail(ValueError, name, where, "a finite number > 0", value)
    return x


def _nonnegative(value: Any, name: str, where: str) -> float:
    x = _real(value, name, where)
    if not (math.isfinite(x) and x >= 0):
        raise _fail(ValueError, name, where, "a finite number >= 0", value)
    return x


def _delta(value: Any, name: str, where: str, *, positive: bool = False) -> float:
    x = _real(value, name, where)
    ok = (0 < x < 1) if positive else (0 <= x < 1)
    if not ok:
        raise _fail(ValueError, name, where, "in (0, 1)" if positive else "in [0, 1)", value)
    return x


def _count(value: Any, name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(TypeError, name, where, "an integer", value)
    if value < 0:
        raise _fail(ValueError, name, where, "an integer >= 0", value)
    return int(value)


def _theorem(value: Any, where: str) -> str:
    if value not in THEOREMS:
        raise _fail(ValueError, "theorem", where, f"one of {list(THEOREMS)}", value)
    return value


# --- composition theorems


def basic(eps0: float, k: int, delta0: float = 0.0) -> Guarantee:
    """k steps of (eps0, delta0)-DP are (k eps0, 1 - (1 - delta0)^k)-DP (Kairouz–Oh–Viswanath 2015,
    Theorem 3.3 at eps = k eps0; never more than the union bound k delta0, and always below 1).

    >>> basic(0.5, 4, 1e-6)
    Guarantee(eps=2.0, delta=3.99999...e-06)
    >>> round(basic(0.1, 40, 1 - math.exp(-0.1)).delta, 4)   # the paper's auction over 40 rounds
    0.9817
    """
    eps0, k = _positive(eps0, "eps0", "basic"), _count(k, "k", "basic")
    delta0 = _delta(delta0, "delta0", "basic")
    return ZERO if k == 0 else Guarantee(k * eps0, _compose_delta(delta0, k))


def _compose_delta(delta0: float, k: int) -> float:
    """1 - (1 - delta0)^k, computed without cancellation."""
    return -math.expm1(k * math.log1p(-delta0)) if delta0 > 0 else 0.0


def advanced(eps0: float, k: int, delta: float, *, delta0: float = 0.0) -> Guarantee:
    """Advanced composition (Dwork–Rothblum–Vadhan): k steps of (eps0, delta0)-DP are
    (eps0 sqrt(2k ln(1/delta)) + k eps0 (e^eps0 - 1), k delta0 + delta)-DP for any delta in (0, 1).

    >>> advanced(0.01 / math.sqrt(1000), 1000, 1e-4).eps   # the paper's D_s figure, p = 200
    0.04301...
    """
    eps0, k = _positive(eps0, "eps0", "advanced"), _count(k, "k", "advanced")
    delta = _delta(delta, "delta", "advanced", positive=True)
    delta0 = _delta(delta0, "delta0", "advanced")
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
    l = np.arange(k // 2 + 1, dtype=np.float64)
    log_weight = (gammaln(k + 1) - gammaln(l + 1) - gammaln(k - l + 1)
                  + (k - l) * eps0 - k * np.logaddexp(0.0, eps0))
    return log_weight, (k - 2 * l) * eps0


@functools.lru_cache(maxsize=256)
def _optimal(eps0: float, k: int, delta: float, delta0: float) -> float:
    if delta0 > 0:  # KOV Thm 3.3: delta_total = 1 - (1 - delta0)^k (1 - delta_pure)
        target = -math.expm1(math.log1p(-delta) - k * math.log1p(-delta0))
        if target <= 0:
            raise ValueError(f"optimal: delta={delta!r} is not more than 1 - (1 - delta0)^k "
                             f"= {-math.expm1(k * math.log1p(-delta0))!r}; no eps reaches it")
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
    eps0, k = _positive(eps0, "eps0", "optimal"), _count(k, "k", "optimal")
    delta = _delta(delta, "delta", "optimal")
    delta0 = _delta(delta0, "delta0", "optimal")
    if k > MAX_OPTIMAL_STEPS:
        raise _fail(ValueError, "k", "optimal", f"at most {MAX_OPTIMAL_STEPS} (use advanced or zcdp)", k)
    if k == 0:
        return ZERO
    return Guarantee(_optimal(eps0, k, delta, delta0), delta)


def zcdp_of_pure(eps0: float) -> float:
    """An eps0-DP mechanism is eps0^2/2-zCDP (Bun–Steinke 2016, Prop. 1.4)."""
    eps0 = _positive(eps0, "eps0", "zcdp_of_pure")
    return eps0 * eps0 / 2


def zcdp_of_gaussian(sensitivity: float, sigma: float) -> float:
    """The Gaussian mechanism N(0, sigma^2) on an L2-sensitivity query is
    sensitivity^2 / (2 sigma^2)-zCDP.

    >>> zcdp_of_gaussian(1.0, 2.0)
    0.125
    """
    sensitivity = _positive(sensitivity, "sensitivity", "zcdp_of_gaussian")
    sigma = _positive(sigma, "sigma", "zcdp_of_gaussian")
    return sensitivity**2 / (2 * sigma**2)


def _cks_eps(rho: float, delta: float) -> float:
    """Canonne–Kamath–Steinke 2020 (Prop. 12 / Cor. 13): rho-zCDP is (eps, delta)-DP with
    eps = min over a > 1 of a rho + log(1 - 1/a) - (log(delta) + log(a)) / (a - 1).
    Minimised over t = log(a - 1): a coarse grid, then Brent's method in the best cell."""

    def eps_at(t):  # works on floats and arrays
        log_a = np.logaddexp(0.0, t)  # a = 1 + e^t
        return (1 + np.exp(t)) * rho + (t - log_a) - (math.log(delta) + log_a) * np.exp(-t)

    grid = np.linspace(-12.0, 40.0, 261)
    values = eps_at(grid)
    i = int(np.argmin(values))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    from scipy.optimize import minimize_scalar  # here: importing scipy.optimize costs ~0.7 s

    best = minimize_scalar(lambda t: float(eps_at(t)), bounds=(lo, hi), method="bounded",
                           options={"xatol": 1e-10})
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
    rho = _nonnegative(rho, "rho", "zcdp_to_dp")
    delta = _delta(delta, "delta", "zcdp_to_dp", positive=True)
    if method not in ZCDP_CONVERSIONS:
        raise _fail(ValueError, "method", "zcdp_to_dp", f"one of {list(ZCDP_CONVERSIONS)}", method)
    if rho == 0:
        return 0.0
    bun_steinke = rho + 2 * math.sqrt(rho * math.log(1 / delta))
    if method == "bun-steinke":
        return bun_steinke
    return max(0.0, min(bun_steinke, _cks_eps(rho, delta)))


def compose(eps0: float, k: int, *, theorem: str, delta: float | None = None,
            delta0: float = 0.0) -> Guarantee:
    """k steps of (eps0, delta0)-DP composed by ``theorem`` (one of ``THEOREMS``).

    ``delta`` is the theorem's delta: the slack of advanced composition, the total target of
    optimal, the conversion delta of zcdp; basic ignores it. ``zcdp`` needs pure steps
    (delta0 = 0) and converts with the Canonne–Kamath–Steinke bound.
    """
    theorem = _theorem(theorem, "compose")
    if theorem == "basic":
        return basic(eps0, k, delta0)
    if delta is None:
        raise _fail(ValueError, "delta", f"compose (theorem {theorem!r})", "given", delta)
    if theorem == "advanced":
        return advanced(eps0, k, delta, delta0=delta0)
    if theorem == "optimal":
        return optimal(eps0, k, delta, delta0=delta0)
    if _delta(delta0, "delta0", "compose") > 0:
        raise _fail(ValueError, "delta0", "compose (theorem 'zcdp')", "0 (zCDP of pure steps only)", delta0)
    rho = _count(k, "k", "compose") * zcdp_of_pure(eps0)
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
    total_eps = _positive(total_eps, "total_eps", "calibrate")
    theorem = _theorem(theorem, "calibrate")
    k = _count(k, "k", "calibrate")
    if k == 0:
        raise _fail(ValueError, "k", "calibrate", "an integer >= 1 (zero steps cost nothing)", k)
    if theorem == "basic":
        return total_eps / k
    if theorem == "optimal":
        return _calibrate_optimal(total_eps, k, _delta(delta, "delta", "calibrate"))
    delta = _delta(delta, "delta", f"calibrate (theorem {theorem!r})", positive=True)
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
    total_eps = _positive(total_eps, "total_eps", "calibrate_zcdp")
    delta = _delta(delta, "delta", "calibrate_zcdp", positive=True)

    def fits(rho: float) -> bool:
        return zcdp_to_dp(rho, delta, method="cks") <= total_eps

    lo, hi = 0.0, total_eps
    while fits(hi):
        lo, hi = hi, 2 * hi
    return _bisect(fits, lo, hi)


def _calibrate_optimal(total_eps: float, k: int, delta: float) -> float:
    """delta(total_eps) of k-fold randomized response increases with eps0: bisect on it."""
    if k > MAX_OPTIMAL_STEPS:
        raise _fail(ValueError, "k", "calibrate", f"at most {MAX_OPTIMAL_STEPS} for optimal", k)
    if delta == 0:
        return total_eps / k
    log_delta = math.log(delta)

    def fits(eps0: float) -> bool:
        return _kov_log_delta(total_eps, *_kov_terms(eps0, k)) <= log_delta

    lo, hi = total_eps / k, 2 * total_eps / k  # basic always fits
    while fits(hi) and hi < 700:
        lo, hi = hi, 2 * hi
    return _bisect(fits, lo, hi)


def _bisect(fits, lo: float, hi: float) -> float:
    """The largest x in [lo, hi) with fits(x), for a monotone fits with fits(lo) true."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi or hi - lo <= 1e-14 * hi:
            break
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


# --- the ledger


@dataclass(frozen=True, kw_only=True)
class Step:
    """``count`` releases of one mechanism on a dataset: each (eps, delta)-DP, or rho-zCDP."""

    mechanism: str
    eps: float | None = None
    delta: float = 0.0
    rho: float | None = None
    count: int = 1
    gaussian: bool = False
    """A rho step that is a Gaussian mechanism (mu = sqrt(2 rho)): composed exactly (see :mod:`.gdp`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.mechanism, str) or not self.mechanism:
            raise _fail(TypeError if not isinstance(self.mechanism, str) else ValueError,
                        "mechanism", "Step", "a non-empty string", self.mechanism)
        if (self.eps is None) == (self.rho is None):
            raise ValueError(f"Step {self.mechanism!r}: give exactly one of eps (pure or approximate DP) "
                             f"and rho (zCDP). Got eps={self.eps!r}, rho={self.rho!r}.")
        set_ = functools.partial(object.__setattr__, self)
        if self.eps is not None:
            set_("eps", _positive(self.eps, "eps", "Step"))
            set_("delta", _delta(self.delta, "delta", "Step"))
        else:
            set_("rho", _positive(self.rho, "rho", "Step"))
            if self.delta != 0:
                raise _fail(ValueError, "delta", "Step", "0 for a zCDP step", self.delta)
        if self.gaussian not in (True, False) or (self.gaussian and self.rho is None):
            raise _fail(ValueError, "gaussian", "Step", "True only for a rho step (a Gaussian mechanism)", self.gaussian)
        set_("count", _count(self.count, "count", "Step"))

    def to_dict(self) -> dict[str, Any]:
        if self.gaussian:
            return {"mechanism": self.mechanism, "rho": self.rho, "mu": math.sqrt(2 * self.rho), "count": self.count}
        if self.rho is not None:
            return {"mechanism": self.mechanism, "rho": self.rho, "count": self.count}
        return {"mechanism": self.mechanism, "eps": self.eps, "delta": self.delta, "count": self.count}


def _merged(steps: Iterable[Step]) -> list[dict[str, Any]]:
    """Step dicts with the counts of identical steps (same mechanism and cost) added up, in order."""
    merged: dict[tuple, dict[str, Any]] = {}
    for step in steps:
        entry = step.to_dict()
        key = tuple((name, value) for name, value in entry.items() if name != "count")
        if key in merged:
            merged[key]["count"] += step.count
        else:
            merged[key] = entry
    return list(merged.values())


class BudgetExceeded(ValueError):
    """A planned spend would take a dataset past its privacy budget (nothing was recorded)."""

    def __init__(self, dataset: str, budget: Guarantee, planned: Guarantee, theorem: str,
                 steps: tuple[Step, ...], accountant: str) -> None:
        self.dataset, self.budget, self.planned, self.theorem, self.steps = dataset, budget, planned, theorem, steps
        self.accountant = accountant
        plan = ", ".join(_describe_step(s) for s in steps) or "nothing"
        super().__init__(
            f"{dataset}: refused, the planned spend exceeds the privacy budget: "
            f"budget (eps={budget.eps:g}, delta={budget.delta:g}), "
            f"planned total (eps={planned.eps:.6g}, delta={planned.delta:.6g}) by {accountant} "
            f"after adding {plan}")


def _describe_step(step: Step) -> str:
    cost = f"rho={step.rho:g}" if step.rho is not None else f"eps={step.eps:g}" + (
        f", delta={step.delta:g}" if step.delta else "")
    return f"{step.count} x {step.mechanism} ({cost})"


class PrivacyLedger:
    """What has been spent on one protected dataset (``"consumer:D_v"``, ``"owner-1"``).

    ``neighbouring``: the relation the guarantee is stated for (required: an eps means nothing
    without it; see :mod:`.neighbouring`). ``budget``: an optional (eps, delta) that no spend may take
    the total past (compared with a relative tolerance of ``BUDGET_TOLERANCE``). ``theorem``: how
    :meth:`total` composes. ``delta``: the composition slack of advanced / optimal / zcdp; by default,
    with a budget, the budget's delta minus the steps' own deltas. ``gaussian``: how Gaussian-mechanism
    steps (:meth:`spend_gaussian`) are accounted: ``exact`` (their privacy-loss distribution, the
    tightest valid figure, :mod:`.gdp`) or ``zcdp`` (as rho-zCDP with the Canonne–Kamath–Steinke
    conversion, a looser bound kept as an option).

    How the total is composed. Steps with the same (eps, delta) form a homogeneous group; each group
    is composed by the theorem, or by basic composition when that is smaller, and the groups are
    then added up by basic composition. The slack delta is shared equally by the groups (plus one
    share for the zCDP steps, which are composed together in zCDP and converted). The reported delta
    is the steps' own deltas plus the shares actually used. Under ``theorem="zcdp"`` every pure step
    and zCDP step is composed in zCDP and converted once with the whole slack; approximate-DP steps
    are added by basic composition. Gaussian steps under ``gaussian="exact"``: alone, they compose
    exactly to one mu and convert exactly with the whole slack; next to other steps they get half
    the slack, the rest the other half, and the two add up, whenever that beats treating them as
    zCDP (the smaller valid figure is reported). :meth:`accountant` says which of these routes
    produced the total, part by part, so that a report never names a theorem that was not used.
    """

    def __init__(self, dataset: str, *, neighbouring: Neighbouring, budget: tuple[float, float] | None = None,
                 theorem: str = "advanced", delta: float | None = None, gaussian: str = "exact",
                 coins: str | None = None) -> None:
        if not isinstance(dataset, str) or not dataset:
            raise _fail(TypeError if not isinstance(dataset, str) else ValueError, "dataset",
                        "PrivacyLedger", "a non-empty string", dataset)
        if not isinstance(neighbouring, Neighbouring):
            raise _fail(TypeError, "neighbouring", "PrivacyLedger",
                        "a Neighbouring (marketplace.privacy.neighbouring.replace_one / add_remove_one)", neighbouring)
        if gaussian not in GAUSSIAN_ACCOUNTANTS:
            raise _fail(ValueError, "gaussian", "PrivacyLedger", f"one of {list(GAUSSIAN_ACCOUNTANTS)}", gaussian)
        self.dataset = dataset
        self.neighbouring = neighbouring
        self.gaussian = gaussian
        self.theorem = _theorem(theorem, "PrivacyLedger")
        self.noise: dict[str, Any] | None = None  # where the noise of its releases comes from (set by the party)
        if coins is not None and (not isinstance(coins, str) or not coins):
            raise _fail(TypeError if not isinstance(coins, str) else ValueError, "coins", "PrivacyLedger",
                        "a non-empty string or None", coins)
        self.coins = coins
        """What the mechanism's coins decide (``"the auction's coins (...)"``), when its randomness is a
        sampled choice drawn from the party's noise stream rather than noise added to a value: whoever
        can reproduce the stream can reproduce the choice, and against them the ledger's eps does not
        hold; :meth:`to_dict` says so in the ledger's ``noise`` (``coins``)."""
        self.budget = None if budget is None else _budget(budget)
        self.delta = None if delta is None else _delta(delta, "delta", "PrivacyLedger")
        if self.theorem != "basic" and self.delta is None and self.budget is None:
            raise ValueError(f"PrivacyLedger {dataset!r}: theorem {theorem!r} needs the composition slack "
                             f"'delta' or a budget to take it from")
        self._steps: list[Step] = []
        self._spent = _Groups()

    @property
    def steps(self) -> tuple[Step, ...]:
        return tuple(self._steps)

    def spend(self, eps: float, delta: float = 0.0, *, mechanism: str, count: int = 1) -> Guarantee:
        """Record ``count`` releases of an (eps, delta)-DP ``mechanism``; return the new total.
        Raises :class:`BudgetExceeded` (recording nothing) if the total would pass the budget."""
        return self._record(Step(mechanism=mechanism, eps=eps, delta=delta, count=count))

    def spend_zcdp(self, rho: float, *, mechanism: str, count: int = 1) -> Guarantee:
        """Record ``count`` releases of a rho-zCDP ``mechanism`` that is not a plain Gaussian."""
        return self._record(Step(mechanism=mechanism, rho=rho, count=count))

    def spend_gaussian(self, rho: float, *, mechanism: str, count: int = 1) -> Guarantee:
        """Record ``count`` Gaussian mechanisms, each sensitivity^2 / (2 sigma^2) = ``rho`` (mu =
        sqrt(2 rho)): accounted exactly, or as rho-zCDP when the ledger says ``gaussian="zcdp"``."""
        return self._record(Step(mechanism=mechanism, rho=rho, count=count, gaussian=True))

    def check_plan(self, steps: Iterable[Step]) -> Guarantee:
        """The total if ``steps`` were spent too; :class:`BudgetExceeded` if it passes the budget.
        Records nothing: run it before a run starts."""
        planned = tuple(steps)
        for step in planned:
            if not isinstance(step, Step):
                raise _fail(TypeError, "steps", "check_plan", "an iterable of Step", step)
        spent = self._spent.plus(planned)
        total, parts = spent.compose_parts(self.theorem, self._slack(spent, self.delta), self.gaussian)
        if self.budget is not None and not _within(total, self.budget):
            raise BudgetExceeded(self.dataset, self.budget, total, self.theorem, planned,
                                 _accountant_text(parts, [*self._steps, *planned]))
        return total

    def total(self, *, theorem: str | None = None, delta: float | None = None, gaussian: str | None = None) -> Guarantee:
        """Everything spent, composed by ``theorem`` (default: the ledger's) with slack ``delta``."""
        theorem = self.theorem if theorem is None else _theorem(theorem, "PrivacyLedger.total")
        delta = self.delta if delta is None else _delta(delta, "delta", "PrivacyLedger.total")
        gaussian = self.gaussian if gaussian is None else gaussian
        return self._spent.compose_parts(theorem, self._slack(self._spent, delta), gaussian)[0]

    def accountant(self) -> str:
        """How :meth:`total` obtained its (eps, delta), in words: one of ``ACCOUNTANTS`` when one
        accountant covers every step, else each part with the steps it covers (``"advanced
        composition (...) for 1656 x h2.select, 1656 x h2.measure; basic composition for 1 x
        auction; the parts added by basic composition"``)."""
        _, parts = self._spent.compose_parts(self.theorem, self._slack(self._spent, self.delta), self.gaussian)
        return _accountant_text(parts, self._steps)

    def to_dict(self) -> dict[str, Any]:
        """``{dataset, eps, delta, accountant, configured_theorem, neighbouring, slack_delta, budget,
        steps}`` for a report (identical steps merged, counts added; ``gaussian_accountant`` when a
        Gaussian step exists). ``accountant`` says what produced (eps, delta);
        ``configured_theorem`` is the composition theorem set for the (eps, delta) steps, null when
        the ledger holds none (Gaussian and zCDP steps never use it)."""
        total, parts = self._spent.compose_parts(self.theorem, self._slack(self._spent, self.delta), self.gaussian)
        budget = None if self.budget is None else {"eps": self.budget.eps, "delta": self.budget.delta}
        has_dp_steps = bool(self._spent.counts)
        out = {"dataset": self.dataset, "eps": total.eps, "delta": total.delta,
               "accountant": _accountant_text(parts, self._steps),
               "configured_theorem": self.theorem if has_dp_steps else None,
               "neighbouring": self.neighbouring.to_dict(), "slack_delta": self._slack(self._spent, self.delta),
               "budget": budget, "steps": _merged(self._steps)}
        if self._spent.gauss_rho > 0:
            out["gaussian_accountant"] = self.gaussian
        if self.noise is not None:
            out["noise"] = dict(self.noise)
            coins = coins_note(self.noise, self.coins) if self.coins else None
            if coins:
                out["noise"]["coins"] = coins
        return out

    def __repr__(self) -> str:
        return f"PrivacyLedger({self.dataset!r}, theorem={self.theorem!r}, total={tuple(self.total())})"

    def _record(self, step: Step) -> Guarantee:
        total = self.check_plan([step])
        self._steps.append(step)
        self._spent = self._spent.plus([step])
        return total

    def _slack(self, spent: _Groups, delta: float | None) -> float:
        if delta is not None:
            return delta
        if self.budget is None:
            return 0.0
        return max(0.0, self.budget.delta - spent.own_delta())


@dataclass(frozen=True)
class _Groups:
    """Steps aggregated: counts per (eps, delta), the summed rho of zCDP steps, and the summed rho
    of Gaussian steps (kept apart: they compose exactly)."""

    counts: tuple[tuple[tuple[float, float], int], ...] = ()
    rho: float = 0.0
    gauss_rho: float = 0.0

    def plus(self, steps: Iterable[Step]) -> _Groups:
        counts, rho, gauss_rho = dict(self.counts), self.rho, self.gauss_rho
        for s in steps:
            if s.count == 0:
                continue
            if s.gaussian:
                gauss_rho += s.count * s.rho
            elif s.rho is not None:
                rho += s.count * s.rho
            else:
                counts[(s.eps, s.delta)] = counts.get((s.eps, s.delta), 0) + s.count
        return _Groups(tuple(counts.items()), rho, gauss_rho)

    def own_delta(self) -> float:
        return sum(k * delta0 for (_, delta0), k in self.counts)

    def compose_parts(self, theorem: str, slack: float, gaussian: str = "exact") -> tuple[Guarantee, _Parts]:
        """The total, and which accountant produced each part of it (see :class:`PrivacyLedger`)."""
        counts = dict(self.counts)
        rho_cover = (("zcdp",) if self.rho > 0 else ()) + (("gaussian",) if self.gauss_rho > 0 else ())
        conservative = _compose_groups(counts, self.rho + self.gauss_rho, theorem, slack, rho_cover)
        if self.gauss_rho == 0 or gaussian == "zcdp":
            return conservative
        if slack <= 0:
            return conservative  # a Gaussian has no (eps, 0) guarantee: infinite either way
        mu = math.sqrt(2 * self.gauss_rho)
        if not counts and self.rho == 0:
            return Guarantee(gaussian_eps(mu=mu, delta=slack), slack), ((EXACT_GAUSSIAN, ("gaussian",)),)
        rest, parts = _compose_groups(counts, self.rho, theorem, slack / 2, ("zcdp",) if self.rho > 0 else ())
        exact = Guarantee(rest.eps + gaussian_eps(mu=mu, delta=slack / 2), rest.delta + slack / 2)
        if exact.eps <= conservative[0].eps and exact.delta <= conservative[0].delta:
            return exact, (*parts, (EXACT_GAUSSIAN, ("gaussian",)))
        return conservative


_Parts = tuple[tuple[str, tuple], ...]
"""(accountant label, the steps it covers) per part of a total: a cover holds ``("eps", (eps0,
delta0))`` for a group of identical (eps, delta) steps, ``"zcdp"`` and ``"gaussian"``."""


def _covers(step: Step, cover: tuple) -> bool:
    if step.gaussian:
        return "gaussian" in cover
    if step.rho is not None:
        return "zcdp" in cover
    return ("eps", (step.eps, step.delta)) in cover


def _accountant_text(parts: _Parts, steps: Iterable[Step]) -> str:
    """The accountant of a total in words: the one label when a single kind covers everything,
    else each part with the steps it covers, and how the parts were added."""
    if not parts:
        return NOTHING_SPENT
    if len(parts) == 1 or all(label == BASIC for label, _ in parts):
        return parts[0][0]  # basic composition of parts composed by basic composition is basic composition
    steps = [s for s in steps if s.count > 0]
    described = []
    for label, cover in parts:
        counts: dict[str, int] = {}
        for step in steps:
            if _covers(step, cover):
                counts[step.mechanism] = counts.get(step.mechanism, 0) + step.count
        described.append(f"{label} for " + ", ".join(f"{n} x {m}" for m, n in counts.items()))
    return "; ".join(described) + "; the parts added by basic composition"


def _budget(value: Any) -> Guarantee:
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise _fail(TypeError, "budget", "PrivacyLedger", "a pair (eps, delta)", value)
    return Guarantee(_positive(value[0], "budget[0] (eps)", "PrivacyLedger"),
                     _delta(value[1], "budget[1] (delta)", "PrivacyLedger"))


def _within(total: Guarantee, budget: Guarantee) -> bool:
    slack = 1 + BUDGET_TOLERANCE
    return total.eps <= budget.eps * slack and total.delta <= budget.delta * slack


def _compose_groups(groups: dict[tuple[float, float], int], rho: float, theorem: str,
                    slack: float, rho_cover: tuple = ("zcdp",)) -> tuple[Guarantee, _Parts]:
    """See :class:`PrivacyLedger`: groups by the theorem (or basic), then basic across groups.
    ``rho_cover``: the steps the summed ``rho`` stands for (zCDP and/or Gaussian steps)."""
    if theorem == "zcdp":
        return _compose_groups_zcdp(groups, rho, slack, rho_cover)
    n_shares = len(groups) + (rho > 0)
    share = slack / n_shares if n_shares else 0.0
    eps = delta = 0.0
    parts: list[tuple[str, tuple]] = []
    for (eps0, delta0), k in groups.items():
        best, label = Guarantee(k * eps0, _compose_delta(delta0, k)), BASIC
        if theorem == "advanced" and share > 0:
            candidate = advanced(eps0, k, share, delta0=delta0)
            if candidate < best:
                best, label = candidate, ADVANCED
        elif theorem == "optimal" and k * delta0 + share > 0 and k <= MAX_OPTIMAL_STEPS:
            candidate = Guarantee(*optimal(eps0, k, min(k * delta0 + share, 1 - 1e-16), delta0=delta0))
            if candidate < best:
                best, label = candidate, OPTIMAL
        eps, delta = eps + best.eps, delta + best.delta
        parts.append((label, (("eps", (eps0, delta0)),)))
    if rho > 0:
        eps += zcdp_to_dp(rho, share, method="cks") if share > 0 else math.inf
        delta += share
        parts.append((ZCDP if share > 0 else NO_BOUND, rho_cover))
    return Guarantee(eps, delta), tuple(parts)


def _compose_groups_zcdp(groups: dict[tuple[float, float], int], rho_steps: float, slack: float,
                         rho_cover: tuple) -> tuple[Guarantee, _Parts]:
    eps = delta = pure_basic = 0.0
    rho = rho_steps
    approximate: list[tuple[str, tuple]] = []
    pure: list[tuple] = []
    for (eps0, delta0), k in groups.items():
        if delta0 > 0:
            eps, delta = eps + k * eps0, delta + _compose_delta(delta0, k)
            approximate.append((BASIC, (("eps", (eps0, delta0)),)))
        else:
            rho += k * zcdp_of_pure(eps0)
            pure_basic += k * eps0
            pure.append(("eps", (eps0, delta0)))
    if rho == 0:
        return Guarantee(eps, delta), tuple(approximate)
    converted = zcdp_to_dp(rho, slack, method="cks") if slack > 0 else math.inf
    if rho_steps == 0 and pure_basic <= converted:
        return Guarantee(eps + pure_basic, delta), (*approximate, (BASIC, tuple(pure)))
    cover = (*pure, *(rho_cover if rho_steps > 0 else ()))
    return Guarantee(eps + converted, delta + slack), (*approximate, (ZCDP if slack > 0 else NO_BOUND, cover))
