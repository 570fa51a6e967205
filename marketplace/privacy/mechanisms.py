"""Noise mechanisms with narrow, checked APIs: Laplace, Gaussian, exponential, report-noisy-max.

Every mechanism takes keyword-only arguments, checks each once (TypeError for a wrong type,
ValueError for a wrong value, both naming the parameter and what it got), and has one
``randomise(value)``. Each states its exact privacy cost for the sensitivity it was given, through
``.epsilon``, ``.delta``, ``.rho`` and :meth:`Mechanism.privacy_cost`.

=================  ====================================  ==========================================
mechanism          noise / selection                     cost (Delta = sensitivity)
=================  ====================================  ==========================================
``Laplace``        Lap(b), b = Delta_1 / eps             eps-DP (and eps^2/2-zCDP)
``Gaussian``       N(0, sigma^2), sigma calibrated       (eps, delta)-DP; rho = Delta_2^2/(2 sigma^2)
``GaussianZCDP``   N(0, sigma^2), sigma = Delta_2/√2rho  rho-zCDP
``Exponential``    P(i) ∝ exp(eps u_i / (2 Delta))       eps-DP (McSherry–Talwar), eps^2/8-zCDP
``ReportNoisyMax`` argmax u_i + Expo(2 Delta / eps)      eps-DP (= permute-and-flip)
=================  ====================================  ==========================================

Sensitivities: Laplace uses the L1 norm of the change of the value between neighbouring datasets,
the Gaussians the L2 norm; selection uses the largest change of any one utility (L-infinity).

**Reading a formula as a mechanism.** ``exp(beta * u)`` weights are the exponential mechanism with
epsilon = 2 beta Delta (:meth:`Exponential.from_weight`), and ``Lap(b)`` noise on a value of L1
sensitivity Delta costs epsilon = Delta / b (:meth:`Laplace.from_scale`). So MWEM as written in
docs/design.md §3 (weights exp(eps psi), measurement + Lap(1/eps)) costs 2 eps Delta_psi for the
selection and eps Delta_w for the measurement, not eps each.

**Two modes** (see :mod:`marketplace.privacy.rng` for the policy):

* ``secure=False`` (simulation): numpy's floating-point samplers on the seeded generator given as
  ``rng``. Reproducible, fast, and *not* safe to release (Mironov 2012: the low bits of
  ``x + b * log(u)`` reveal x).
* ``secure=True``: OpenDP's exact samplers, drawing from OpenDP's OS-seeded CSPRNG; ``rng`` is not
  used. The value is rounded to the grid 2^k, k = floor(log2(scale)) - 40, discrete noise on that
  grid is added exactly, and the result is rounded to float; every output is a multiple of 2^k at
  every input, so no output can rule an input out. OpenDP's own privacy map, which charges the
  rounding (n 2^k for n values), certifies each release: the scale is raised (by a relative
  ~n 2^-40) until it certifies the stated cost. The Gaussian is then the discrete Gaussian
  (Canonne–Kamath–Steinke 2020), which OpenDP certifies in zCDP; ``Gaussian(secure=True)`` is
  therefore calibrated through zCDP and OpenDP's zCDP-to-(eps, delta) conversion, which needs a
  somewhat larger sigma than the analytic calibration of simulation (about 8% at eps = 1,
  delta = 1e-5). Selection uses OpenDP's exact Gumbel-max (the same distribution as the
  exponential mechanism) or exponential-noise max.

>>> from marketplace.privacy.rng import make_rng
>>> lap = Laplace(epsilon=0.5, sensitivity=1.0, rng=make_rng(seed=1, secure=False))
>>> lap.scale, lap.privacy_cost()["epsilon"]
(2.0, 0.5)
>>> Laplace(epsilon=0, sensitivity=1.0, rng=None)
Traceback (most recent call last):
  ...
ValueError: The 'epsilon' parameter of Laplace must be a positive finite real number. Got 0 instead.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from marketplace.privacy.rng import SecureGenerator

if TYPE_CHECKING:  # opendp is imported on first use in secure mode (see _opendp)
    from opendp.mod import Domain, Measurement, Metric

__all__ = [
    "Mechanism",
    "Laplace",
    "Gaussian",
    "GaussianZCDP",
    "Exponential",
    "ReportNoisyMax",
    "analytic_gaussian_sigma",
    "gaussian_delta",
    "GRID_BITS",
]

GRID_BITS = 40
"""Secure mode's grid is 2^k with k = floor(log2(scale)) - GRID_BITS: far finer than the noise."""


# ---------------------------------------------------------------------------------------------
# Parameter checks: one message format, "The 'x' parameter of M must be ... Got ... instead."


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _check_positive(owner: str, name: str, value: Any) -> float:
    if not _is_real(value):
        raise TypeError(f"The '{name}' parameter of {owner} must be a real number. Got {type(value).__name__} instead.")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"The '{name}' parameter of {owner} must be a positive finite real number. Got {value!r} instead."
        )
    return float(value)


def _check_delta(owner: str, value: Any) -> float:
    if not _is_real(value):
        raise TypeError(f"The 'delta' parameter of {owner} must be a real number. Got {type(value).__name__} instead.")
    if not 0 < value < 1:
        raise ValueError(
            f"The 'delta' parameter of {owner} must be in the open interval (0, 1). Got {value!r} instead."
        )
    return float(value)


def _check_secure(owner: str, secure: Any) -> bool:
    if not isinstance(secure, bool):
        raise TypeError(f"The 'secure' parameter of {owner} must be a bool. Got {type(secure).__name__} instead.")
    return secure


def _check_rng(owner: str, rng: Any, secure: bool) -> np.random.Generator | None:
    if secure:
        if rng is not None and not isinstance(rng, np.random.Generator):
            raise TypeError(
                f"The 'rng' parameter of {owner} must be a numpy.random.Generator or None in secure mode "
                f"(it is not used for noise). Got {type(rng).__name__} instead."
            )
        return rng
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"The 'rng' parameter of {owner} must be a numpy.random.Generator "
            f"(marketplace.privacy.rng.make_rng). Got {type(rng).__name__} instead."
        )
    if isinstance(rng, SecureGenerator):
        raise ValueError(
            f"The 'rng' parameter of {owner} is a secure generator but secure=False, which would add "
            "floating-point noise that leaks its input. Pass secure=True."
        )
    return rng


def _as_values(owner: str, value: Any) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"The value given to {owner}.randomise must be a real number or an array of them. "
            f"Got {type(value).__name__} instead."
        ) from None
    if not np.all(np.isfinite(array)):
        raise ValueError(f"The value given to {owner}.randomise must be finite. Got NaN or infinity.")
    return array


def _as_utilities(owner: str, utilities: Any) -> np.ndarray:
    array = _as_values(owner, utilities)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(
            f"The utilities given to {owner} must be a non-empty 1-D array. Got shape {array.shape} instead."
        )
    return array


# ---------------------------------------------------------------------------------------------
# OpenDP, for secure mode (imported on first use: the import takes about two seconds).


@functools.cache
def _opendp() -> ModuleType:
    try:
        import opendp.prelude as dp
    except ImportError as exc:  # pragma: no cover - opendp is a dependency
        raise ImportError("secure=True needs OpenDP: pip install 'opendp>=0.16,<0.17'") from exc
    dp.enable_features("contrib")
    return dp


def _grid_exponent(scale: float) -> int:
    return math.floor(math.log2(scale)) - GRID_BITS


def _certify(
    build: Callable[[float], Measurement], lower: float, d_in: float, d_out: float | tuple[float, float]
) -> tuple[float, Measurement]:
    """The smallest scale >= ``lower`` (to 2^-48 relative) whose OpenDP privacy map passes, and
    its measurement."""
    if build(lower).check(d_in, d_out):
        return lower, build(lower)
    step = lower * 2.0**-45
    while not build(lower + step).check(d_in, d_out):
        step *= 2.0
    lo, hi = lower, lower + step
    while hi / lo - 1 > 2.0**-48:
        mid = (lo + hi) / 2
        if not lo < mid < hi:
            break
        lo, hi = (lo, mid) if build(mid).check(d_in, d_out) else (mid, hi)
    return hi, build(hi)


def _float_vectors(dp: ModuleType, size: int, l2: bool) -> tuple[Domain, Metric]:
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=size)
    return domain, (dp.l2_distance(T=float) if l2 else dp.l1_distance(T=float))


def _run_on_vector(measurement: Measurement, values: np.ndarray) -> np.ndarray:
    return np.asarray(measurement(values.ravel().tolist()), dtype=np.float64).reshape(values.shape)


# ---------------------------------------------------------------------------------------------
# The Gaussian calibration of simulation: Balle & Wang 2018, Theorem 8.


def gaussian_delta(*, sigma: float, epsilon: float, sensitivity: float) -> float:
    """The exact smallest delta for which N(0, sigma^2) noise is (epsilon, delta)-DP.

    delta = Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D), D the L2
    sensitivity (Balle & Wang 2018, Theorem 8).
    """
    from scipy.special import log_ndtr, ndtr  # here, not at import: importing marketplace.privacy stays light

    a, b = sensitivity / (2 * sigma), epsilon * sigma / sensitivity
    return float(ndtr(a - b) - math.exp(epsilon + log_ndtr(-a - b)))


def analytic_gaussian_sigma(*, epsilon: float, delta: float, sensitivity: float) -> float:
    """The smallest sigma (to 2^-50 relative) with ``gaussian_delta(sigma) <= delta``: the analytic
    Gaussian mechanism. Always below the classic sqrt(2 ln(1.25/delta)) Delta/eps, and valid for
    every eps > 0, not only eps < 1."""

    def ok(sigma: float) -> bool:
        return gaussian_delta(sigma=sigma, epsilon=epsilon, sensitivity=sensitivity) <= delta

    hi = sensitivity
    while not ok(hi):
        hi *= 2
    lo = hi / 2
    while ok(lo):
        lo, hi = lo / 2, lo
    while hi / lo - 1 > 2.0**-50:
        mid = (lo + hi) / 2
        if not lo < mid < hi:
            break
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


@functools.cache
def _zcdp_rho_for(epsilon: float, delta: float) -> float:
    """The largest rho whose zCDP guarantee OpenDP converts to (epsilon, delta)-DP (CKS 2020)."""
    dp = _opendp()
    space = dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float)

    def build(scale: float) -> Measurement:
        return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(dp.m.make_gaussian(*space, scale=scale)), delta)

    sigma, _ = _certify(
        build, analytic_gaussian_sigma(epsilon=epsilon, delta=delta, sensitivity=1.0), 1.0, (epsilon, delta)
    )
    return float(dp.m.make_gaussian(*space, scale=sigma).map(1.0))


# ---------------------------------------------------------------------------------------------
# The mechanisms.


class Mechanism:
    """What every mechanism states: its name, cost and mode."""

    name = "mechanism"
    epsilon: float | None
    delta: float | None
    rho: float | None
    sensitivity: float
    secure: bool
    rng: np.random.Generator | None
    """The seeded generator of simulation mode; None (or unused) in secure mode, which draws from OpenDP."""

    def privacy_cost(self) -> dict[str, Any]:
        """The cost of one call of ``randomise``, for an accountant: epsilon/delta ((eps, delta)-DP,
        None when the mechanism is only stated in zCDP) and rho (rho-zCDP)."""
        return {
            "mechanism": self.name,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "rho": self.rho,
            "sensitivity": self.sensitivity,
            "secure": self.secure,
        }

    def _check_pure(self, *, epsilon: float, sensitivity: float, rng: np.random.Generator | None, secure: bool) -> None:
        """Check and set what every pure epsilon-DP mechanism takes (delta is 0)."""
        owner = type(self).__name__
        self.epsilon = _check_positive(owner, "epsilon", epsilon)
        self.sensitivity = _check_positive(owner, "sensitivity", sensitivity)
        self.secure = _check_secure(owner, secure)
        self.rng = _check_rng(owner, rng, self.secure)
        self.delta = 0.0

    def _simulation_rng(self) -> np.random.Generator:
        """The generator simulation draws from: _check_rng holds one whenever secure is False."""
        if self.rng is None:
            raise ValueError(f"{type(self).__name__} has no generator to draw from: secure mode draws from OpenDP.")
        return self.rng

    def __repr__(self) -> str:
        cost = ", ".join(f"{k}={v!r}" for k, v in self.privacy_cost().items() if k != "mechanism")
        return f"{type(self).__name__}({cost})"


class _AdditiveNoise(Mechanism):
    """value + noise: seeded draws in simulation, the OpenDP measurement in secure mode."""

    def _noise(self, shape: tuple[int, ...]) -> np.ndarray:
        raise TypeError(f"{type(self).__name__} must define _noise")

    def measurement(self, size: int) -> Measurement:
        raise TypeError(f"{type(self).__name__} must define measurement")

    @overload
    def randomise(self, value: float) -> float: ...
    @overload
    def randomise(self, value: np.ndarray | Sequence[float]) -> np.ndarray: ...
    def randomise(self, value: float | np.ndarray | Sequence[float]) -> float | np.ndarray:
        """The noisy value: a float for a scalar, an array of the same shape for an array (a 0-d
        array, whose type does not tell it from others, gives a float)."""
        values = _as_values(type(self).__name__, value)
        noisy = self._secure(values) if self.secure else values + self._noise(values.shape)
        return float(noisy) if np.ndim(value) == 0 else noisy

    def _secure(self, values: np.ndarray) -> np.ndarray:
        if values.size == 0:
            return values.copy()
        return _run_on_vector(self.measurement(values.size), values)


class Laplace(_AdditiveNoise):
    """``value + Lap(sensitivity / epsilon)``, element-wise: epsilon-DP for L1 sensitivity."""

    name = "laplace"
    epsilon: float
    delta: float

    def __init__(self, *, epsilon: float, sensitivity: float, rng: np.random.Generator | None, secure: bool = False):
        self._check_pure(epsilon=epsilon, sensitivity=sensitivity, rng=rng, secure=secure)
        self.rho = self.epsilon**2 / 2
        self.scale = self.sensitivity / self.epsilon
        self.grid = 2.0 ** _grid_exponent(self.scale) if self.secure else None
        self._certified: dict[int, Measurement] = {}
        if self.secure:
            _opendp()

    @classmethod
    def from_scale(
        cls, *, scale: float, sensitivity: float, rng: np.random.Generator | None, secure: bool = False
    ) -> Laplace:
        """Lap(scale) noise on a value of L1 sensitivity ``sensitivity``: costs sensitivity/scale."""
        scale = _check_positive(cls.__name__, "scale", scale)
        sensitivity = _check_positive(cls.__name__, "sensitivity", sensitivity)
        return cls(epsilon=sensitivity / scale, sensitivity=sensitivity, rng=rng, secure=secure)

    def _noise(self, shape: tuple[int, ...]) -> np.ndarray:
        return self._simulation_rng().laplace(0.0, self.scale, size=shape)

    def measurement(self, size: int) -> Measurement:
        """Secure mode's OpenDP measurement for ``size`` values, whose privacy map certifies the cost."""
        if not self.secure:
            raise ValueError(f"{type(self).__name__}.measurement exists only in secure mode.")
        if size not in self._certified:
            dp, k = _opendp(), _grid_exponent(self.scale)
            space = _float_vectors(dp, size, l2=False)
            lower = (self.sensitivity + size * 2.0**k) / self.epsilon
            build: Callable[[float], Measurement] = lambda s: dp.m.make_laplace(*space, scale=s, k=k)  # noqa: E731
            _, self._certified[size] = _certify(build, lower, self.sensitivity, self.epsilon)
        return self._certified[size]


class GaussianZCDP(_AdditiveNoise):
    """``value + N(0, sigma^2)``, sigma = sensitivity / sqrt(2 rho): rho-zCDP for L2 sensitivity."""

    name = "gaussian_zcdp"
    rho: float

    def __init__(self, *, rho: float, sensitivity: float, rng: np.random.Generator | None, secure: bool = False):
        owner = type(self).__name__
        self.rho = _check_positive(owner, "rho", rho)
        self.sensitivity = _check_positive(owner, "sensitivity", sensitivity)
        self.secure = _check_secure(owner, secure)
        self.rng = _check_rng(owner, rng, self.secure)
        self.epsilon, self.delta = None, None
        self.sigma = self.sensitivity / math.sqrt(2 * self.rho)
        self._setup_secure()

    def _setup_secure(self) -> None:
        self.grid = 2.0 ** _grid_exponent(self.sigma) if self.secure else None
        self._certified: dict[int, Measurement] = {}
        if self.secure:
            _opendp()

    def _noise(self, shape: tuple[int, ...]) -> np.ndarray:
        return self._simulation_rng().normal(0.0, self.sigma, size=shape)

    def measurement(self, size: int) -> Measurement:
        """Secure mode's OpenDP measurement for ``size`` values, whose privacy map certifies the cost."""
        if not self.secure:
            raise ValueError(f"{type(self).__name__}.measurement exists only in secure mode.")
        if size not in self._certified:
            dp, k = _opendp(), _grid_exponent(self.sigma)
            space = _float_vectors(dp, size, l2=True)
            build: Callable[[float], Measurement] = lambda s: dp.m.make_gaussian(*space, scale=s, k=k)  # noqa: E731
            _, self._certified[size] = _certify(build, self.sigma, self.sensitivity, self.rho)
        return self._certified[size]


class Gaussian(GaussianZCDP):
    """``value + N(0, sigma^2)``: (epsilon, delta)-DP for L2 sensitivity, any epsilon > 0.

    Simulation calibrates sigma with the analytic Gaussian mechanism (Balle & Wang 2018): the
    smallest sigma for which the continuous Gaussian is (epsilon, delta)-DP, below the classic
    sqrt(2 ln(1.25/delta)) sensitivity/epsilon. Secure mode adds discrete Gaussian noise, which
    OpenDP certifies in zCDP: sigma is then sensitivity / sqrt(2 rho) for the largest rho that
    OpenDP's zCDP-to-(eps, delta) conversion turns into (epsilon, delta). ``.calibration`` says
    which; ``.rho`` is a valid zCDP statement in both modes.
    """

    name = "gaussian"
    epsilon: float
    delta: float

    def __init__(
        self, *, epsilon: float, delta: float, sensitivity: float, rng: np.random.Generator | None, secure: bool = False
    ):
        owner = type(self).__name__
        self.epsilon = _check_positive(owner, "epsilon", epsilon)
        self.delta = _check_delta(owner, delta)
        self.sensitivity = _check_positive(owner, "sensitivity", sensitivity)
        self.secure = _check_secure(owner, secure)
        self.rng = _check_rng(owner, rng, self.secure)
        if self.secure:
            self.calibration = "zcdp (discrete Gaussian, OpenDP)"
            self.rho = _zcdp_rho_for(self.epsilon, self.delta)
            self.sigma = self.sensitivity / math.sqrt(2 * self.rho)
        else:
            self.calibration = "analytic (Balle & Wang 2018)"
            self.sigma = analytic_gaussian_sigma(epsilon=self.epsilon, delta=self.delta, sensitivity=self.sensitivity)
            self.rho = self.sensitivity**2 / (2 * self.sigma**2)
        self._setup_secure()


def _secure_noisy_max(divergence: str, scale: float, sensitivity: float, bound: float) -> Measurement:
    """OpenDP's noisy-max over float utilities, with ``scale`` raised until its privacy map
    certifies ``bound`` (rho under zCDP, epsilon under the max divergence)."""
    dp = _opendp()
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    build: Callable[[float], Measurement] = lambda s: dp.m.make_noisy_max(*space, getattr(dp, divergence)(), scale=s)  # noqa: E731
    _, measurement = _certify(build, scale, sensitivity, bound)
    return measurement


class Exponential(Mechanism):
    """Pick index i with probability ∝ exp(epsilon u_i / (2 sensitivity)): epsilon-DP when no
    utility moves by more than ``sensitivity`` between neighbouring datasets (McSherry & Talwar
    2007), and epsilon^2/8-zCDP (Cesar & Rogers 2021). Sampled as a Gumbel-max, so no exp() is
    evaluated and large utilities cannot overflow."""

    name = "exponential"
    epsilon: float
    delta: float
    rho: float

    def __init__(self, *, epsilon: float, sensitivity: float, rng: np.random.Generator | None, secure: bool = False):
        self._check_pure(epsilon=epsilon, sensitivity=sensitivity, rng=rng, secure=secure)
        self.rho = self.epsilon**2 / 8
        self.gumbel_scale = 2 * self.sensitivity / self.epsilon
        self._certified: Measurement | None = None
        if self.secure:  # OpenDP's exact Gumbel noisy-max, certified in zCDP
            self._certified = _secure_noisy_max(
                "zero_concentrated_divergence", self.gumbel_scale, self.sensitivity, self.rho
            )

    @classmethod
    def from_weight(
        cls, *, beta: float, sensitivity: float, rng: np.random.Generator | None, secure: bool = False
    ) -> Exponential:
        """Weights exp(beta u_i) for utilities of sensitivity ``sensitivity``: costs 2 beta sensitivity."""
        beta = _check_positive(cls.__name__, "beta", beta)
        sensitivity = _check_positive(cls.__name__, "sensitivity", sensitivity)
        return cls(epsilon=2 * beta * sensitivity, sensitivity=sensitivity, rng=rng, secure=secure)

    def probabilities(self, utilities: npt.ArrayLike) -> np.ndarray:
        """The exact selection probabilities (a softmax with the largest term subtracted)."""
        logits = _as_utilities(type(self).__name__, utilities) / self.gumbel_scale
        weights = np.exp(logits - logits.max())
        return weights / weights.sum()

    def randomise(self, utilities: npt.ArrayLike) -> int:
        """The selected index."""
        values = _as_utilities(type(self).__name__, utilities)
        if self._certified is not None:  # secure mode: set in __init__ exactly when secure
            return int(self._certified(values.tolist()))
        return int(np.argmax(values / self.gumbel_scale + self._simulation_rng().gumbel(size=values.size)))


class ReportNoisyMax(Mechanism):
    """The index of the largest ``u_i + Expo(2 sensitivity / epsilon)``: epsilon-DP, and the same
    distribution as permute-and-flip (McKenna & Sheldon 2020; Ding et al. 2021), whose expected
    utility is never worse than the exponential mechanism's at the same epsilon."""

    name = "report_noisy_max"
    epsilon: float
    delta: float
    rho: float

    def __init__(self, *, epsilon: float, sensitivity: float, rng: np.random.Generator | None, secure: bool = False):
        self._check_pure(epsilon=epsilon, sensitivity=sensitivity, rng=rng, secure=secure)
        self.rho = self.epsilon**2 / 2
        self.noise_scale = 2 * self.sensitivity / self.epsilon
        self._certified: Measurement | None = None
        if self.secure:  # OpenDP's exponential-noise noisy-max, certified in pure DP
            self._certified = _secure_noisy_max("max_divergence", self.noise_scale, self.sensitivity, self.epsilon)

    def randomise(self, utilities: npt.ArrayLike) -> int:
        """The selected index."""
        values = _as_utilities(type(self).__name__, utilities)
        if self._certified is not None:  # secure mode: set in __init__ exactly when secure
            return int(self._certified(values.tolist()))
        return int(np.argmax(values + self._simulation_rng().exponential(self.noise_scale, size=values.size)))
