"""M²M, the consumer's side: statistics of a sketched dataset as linear functions of its sketch.

To estimate mean_i f(x_i) from a sketch z, M²M fits f by a linear model a . Phi(x) on n_s synthetic
points x~ drawn from a public prior psi (uniform on the box), by ridge regression

    a = argmin (1/n_s) ||P a - F||^2 + lambda ||a||^2 = S P^T F / n_s,   S = (P^T P / n_s + lambda I)^-1,

(P = Phi(x~), F = f(x~)) and answers <a, z>. That answer is also F . w / n_s with w = P S z: one
weight per synthetic point, the same for every f. So a fit factorises P^T P / n_s + lambda I once
(Cholesky), solves it for z once, and every query afterwards (moments, CDF, covariance, counts,
any f) is a weighted mean over the synthetic points; the weights are the paper's implicit-M²M
weights, which fit models too (:meth:`M2MFit.logistic_regression`).

lambda trades the approximation error against the noise amplification sigma_xi^2 ||a||^2 / n^2
(sigma_xi^2 the variance of one coordinate of the numerator noise, n + zeta the noisy count). The
rules, all expressed as the lambda of the averaged loss above:

=============  ============================  ==================================================
rule           lambda                        where it comes from
=============  ============================  ==================================================
``summed``     sigma^2 / ((n + zeta) n_s)     eq. (5) applied to the *summed* squared error
                                             (docs/design.md's calibration; the default)
``averaged``   sigma^2 / (n + zeta)           eq. (5) applied to the averaged loss, literally
``theorem``    sigma^2 / (n + zeta)^2         Theorem 1 (the MSE bound); same order as
                                             ``summed`` when n_s ~ n
=============  ============================  ==================================================

With 2 Delta_1^2 / eps_num^2 = sigma^2 for Laplace noise, ``averaged`` is the paper's
lambda = 2 Delta_1^2 / (eps_num^2 (n + zeta)). A float gives lambda directly. Every lambda is
floored at 1e-9 times the mean diagonal of P^T P / n_s, so that an exact sketch (sigma = 0) and a
rank-deficient map (HIST's one-hot groups each sum to 1) still give a well-posed system.

Measured (benchmarks/bench_sketch.py --accuracy, E[x_j] at eps = 1, n = 27,000, n_s = 1e5):
``averaged`` shrinks every estimate towards the prior's mean. On uniform data (the paper's
Random10, whose mean *is* the prior's) that looks harmless, even best with an intercept; on data
whose mean differs from the prior's (Beta(2, 5) per attribute) it is off by 20-30%, where
``summed`` and ``theorem`` stay at the noise-free level. Hence the default ``summed``.

``intercept=True`` adds an unpenalised constant feature whose sketch is exactly 1 (the count
divided by itself): the constant part of f then costs no noise. It is not in the paper; it
lowers the error when f has a large mean (e.g. E[x_j] on [0, 1]).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import ArrayLike

from . import design_cache
from ._checks import as_finite_array, check_choice, check_generator, check_int, is_real
from .domain import Prior
from .feature_maps import FeatureMap
from .logistic import LogisticModel, weighted_logistic_regression
from .release import SketchRelease

__all__ = ["M2MDesign", "M2MFit", "fit_m2m", "REGULARIZATION_RULES", "DEFAULT_SAMPLES"]

REGULARIZATION_RULES = ("summed", "averaged", "theorem")
DEFAULT_SAMPLES = 100_000
#: Phi of the synthetic points is kept in memory when it takes at most this many bytes.
DEFAULT_CACHE_BYTES = 256 * 2**20
#: lambda >= LAMBDA_FLOOR * mean diagonal of the Gram matrix.
LAMBDA_FLOOR = 1e-9
#: Designs :meth:`M2MDesign.shared` keeps per process (each holds its synthetic points' features:
#: 32 MB at the quickstart's 20,000 samples and 200 features).
SHARED_DESIGNS = 2
_SHARED: OrderedDict[tuple, M2MDesign] = OrderedDict()
_SHARED_LOCK = threading.Lock()


class M2MDesign:
    """The release-independent half of M²M: the map, the synthetic points and their Gram matrix.

    Build it once per feature map and reuse it for every sketch of that map (owners, merges):
    :meth:`fit` then only adds lambda, factorises the m x m system and solves it.
    """

    def __init__(self, feature_map: FeatureMap, samples: ArrayLike, *, cache_bytes: int = DEFAULT_CACHE_BYTES):
        if not isinstance(feature_map, FeatureMap):
            raise TypeError(
                f"The 'feature_map' parameter of M2MDesign must be a FeatureMap. "
                f"Got {type(feature_map).__name__} instead."
            )
        samples = feature_map.check(samples, owner="M2MDesign")
        if samples.shape[0] < 1:
            raise ValueError("The 'samples' parameter of M2MDesign must hold at least one point. Got none instead.")
        cache_bytes = check_int("M2MDesign", "cache_bytes", cache_bytes, minimum=0)
        self.feature_map = feature_map
        self.samples = np.array(samples)
        self.samples.setflags(write=False)
        self.columns = np.ascontiguousarray(samples.T)  # one contiguous row per attribute, for range queries
        self.columns.setflags(write=False)
        n_s, m = samples.shape[0], feature_map.n_features
        self._features: np.ndarray | None = None
        if feature_map.dense and n_s * m * 8 <= cache_bytes:
            self._features = feature_map.transform(samples)
            self.gram = self._features.T @ self._features / n_s
            self.feature_mean = self._features.mean(axis=0)
        else:
            self.gram = feature_map.gram(samples) / n_s
            self.feature_mean = feature_map.adjoint(samples, np.ones(n_s)) / n_s
        self.gram.setflags(write=False)

    @classmethod
    def build(
        cls,
        feature_map: FeatureMap,
        *,
        rng: np.random.Generator,
        n_samples: int = DEFAULT_SAMPLES,
        prior: Prior | None = None,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> M2MDesign:
        """Draw ``n_samples`` synthetic points from ``prior`` (uniform on the map's box by default)."""
        if not isinstance(feature_map, FeatureMap):
            raise TypeError(
                f"The 'feature_map' parameter of M2MDesign.build must be a FeatureMap. "
                f"Got {type(feature_map).__name__} instead."
            )
        n_samples = check_int("M2MDesign.build", "n_samples", n_samples)
        rng = check_generator("M2MDesign.build", rng)
        prior = Prior(feature_map.box) if prior is None else prior
        if not isinstance(prior, Prior) or prior.box.state() != feature_map.box.state():
            raise ValueError(
                "The 'prior' parameter of M2MDesign.build must be a Prior on the feature map's box. "
                f"Got {prior!r} instead."
            )
        return cls(feature_map, prior.sample(n_samples, rng), cache_bytes=cache_bytes)

    @classmethod
    def shared(
        cls, feature_map: FeatureMap, *, seed: np.random.SeedSequence, n_samples: int, prior: Prior | None = None
    ) -> M2MDesign:
        """:meth:`build` from ``seed``, memoised in this process: the design depends on public settings
        alone (the map, the seed, the sample count, the prior), and is read-only, so a process that
        answers request after request of one marketplace builds it once instead of once a request
        (the largest part of a warm consumer's work). Keeps the :data:`SHARED_DESIGNS` latest."""
        prior = Prior(feature_map.box) if prior is None else prior
        key = (
            feature_map.fingerprint,
            seed.generate_state(8).tobytes(),
            int(n_samples),
            repr(prior.box.state()),
            repr(sorted(prior.discrete.items())),
        )
        with _SHARED_LOCK:
            design = _SHARED.get(key)
            if design is not None:
                _SHARED.move_to_end(key)
                return design
        design = cls._kept(key, feature_map)
        if design is None:
            design = cls.build(feature_map, rng=np.random.default_rng(seed), n_samples=n_samples, prior=prior)
            design_cache.write(key, feature_map, design._arrays())
        with _SHARED_LOCK:
            _SHARED[key] = design
            while len(_SHARED) > SHARED_DESIGNS:
                _SHARED.popitem(last=False)
        return design

    @classmethod
    def _kept(cls, key: tuple[object, ...], feature_map: FeatureMap) -> M2MDesign | None:
        """The design ``key`` as an earlier process built it (:mod:`.design_cache`), or None."""
        arrays = design_cache.read(key, feature_map)
        if arrays is None:
            return None
        design = cls.__new__(cls)
        design.feature_map = feature_map
        design.samples, design.gram = arrays["samples"], arrays["gram"]
        design.feature_mean, design._features = arrays["feature_mean"], arrays.get("features")
        design.columns = np.ascontiguousarray(design.samples.T)
        for array in (design.samples, design.columns, design.gram):
            array.setflags(write=False)
        return design

    def _arrays(self) -> dict[str, np.ndarray]:
        """What :meth:`_kept` restores the design from."""
        arrays = {"samples": self.samples, "gram": self.gram, "feature_mean": self.feature_mean}
        return arrays | ({"features": self._features} if self._features is not None else {})

    @property
    def n_samples(self) -> int:
        return int(self.samples.shape[0])

    def features_times(self, coef: np.ndarray) -> np.ndarray:
        """Phi(x~) @ coef over the synthetic points."""
        if self._features is not None:
            return self._features @ coef
        return self.feature_map.apply(self.samples, coef)

    def features_transposed_times(self, values: np.ndarray) -> np.ndarray:
        """Phi(x~)^T @ values over the synthetic points."""
        if self._features is not None:
            return self._features.T @ values
        return self.feature_map.adjoint(self.samples, values)

    def regularization(self, release: SketchRelease, rule: str | float = "summed") -> float:
        """lambda (of the averaged loss) for ``release`` under ``rule`` (module docstring), floored."""
        floor = LAMBDA_FLOOR * float(np.trace(self.gram)) / self.gram.shape[0]
        if is_real(rule) and not isinstance(rule, str):  # a number (a str never is one)
            if not rule >= 0 or not np.isfinite(rule):
                raise ValueError(
                    f"The 'regularization' parameter of M2MDesign.fit must be a rule name or a finite "
                    f"real >= 0. Got {rule!r} instead."
                )
            return max(float(rule), floor)
        rule = check_choice("M2MDesign.fit", "regularization", rule, REGULARIZATION_RULES)
        n, variance = release.n_estimate, release.numerator_variance
        lam = {"summed": variance / (n * self.n_samples), "averaged": variance / n, "theorem": variance / n**2}[rule]
        return max(lam, floor)

    def fit(self, release: SketchRelease, *, regularization: str | float = "summed", intercept: bool = False) -> M2MFit:
        """Solve the ridge system for ``release`` once; queries on the result reuse the solution."""
        if not isinstance(release, SketchRelease):
            raise TypeError(
                f"The 'release' parameter of M2MDesign.fit must be a SketchRelease. "
                f"Got {type(release).__name__} instead."
            )
        release.check_map(self.feature_map, owner="M2MDesign.fit")
        if not isinstance(intercept, bool):
            raise TypeError(f"The 'intercept' parameter of M2MDesign.fit must be a bool. Got {intercept!r} instead.")
        lam = self.regularization(release, regularization)
        return M2MFit(self, release, lam=lam, intercept=intercept)

    def system(self, lam: float, intercept: bool) -> np.ndarray:
        """The m x m (m+1 with an intercept, first) matrix P^T P / n_s + lambda I."""
        m = self.gram.shape[0]
        if not intercept:
            return self.gram + lam * np.eye(m)
        A = np.empty((m + 1, m + 1))
        A[0, 0] = 1.0
        A[0, 1:] = A[1:, 0] = self.feature_mean
        A[1:, 1:] = self.gram + lam * np.eye(m)
        return A


def _factorise(A: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """Cholesky of the SPD system; if rounding made it indefinite, an eigendecomposition."""
    from scipy import linalg  # here, not at import: the consumer needs it only once its sketch has come

    try:
        factor = linalg.cho_factor(A, lower=True, check_finite=False)
        return lambda b: linalg.cho_solve(factor, b, check_finite=False)
    except linalg.LinAlgError:
        values, vectors = np.linalg.eigh(A)
        values = np.maximum(values, values.max() * 1e-15)
        return lambda b: vectors @ ((vectors.T @ b) / (values if b.ndim == 1 else values[:, None]))


class M2MFit:
    """M²M estimates from one sketch: every query is a weighted mean over the synthetic points.

    ``weights`` are the implicit-M²M weights w(x~) = [1, Phi(x~)]^T S [1, z] (without the leading
    1s when there is no intercept); ``mean(f)`` is mean_i w_i f(x~_i), which equals <a_f, z> for the
    ridge coefficients a_f of f (see :meth:`coefficients`).
    """

    def __init__(self, design: M2MDesign, release: SketchRelease, *, lam: float, intercept: bool):
        self.design, self.release, self.lam, self.intercept = design, release, float(lam), intercept
        self._solve = _factorise(design.system(self.lam, intercept))
        z = release.z
        target = np.concatenate([[1.0], z]) if intercept else z
        self._u = self._solve(target)
        weights = design.features_times(self._u[1:] if intercept else self._u)
        if intercept:
            weights += self._u[0]
        weights.setflags(write=False)
        self.weights = weights

    @property
    def samples(self) -> np.ndarray:
        return self.design.samples

    @property
    def n_estimate(self) -> float:
        """The dataset size used for counts: the sketch's noisy count (floored at 1)."""
        return self.release.n_estimate

    def _values(self, f: Callable[[np.ndarray], np.ndarray], owner: str) -> np.ndarray:
        if not callable(f):
            raise TypeError(
                f"The 'f' parameter of {owner} must be a vectorised function of an (n, d) array. "
                f"Got {type(f).__name__} instead."
            )
        values = np.asarray(f(self.samples), dtype=np.float64)
        if values.ndim not in (1, 2) or values.shape[0] != self.design.n_samples:
            raise ValueError(
                f"The 'f' parameter of {owner} must return one value (or one row) per point: shape "
                f"({self.design.n_samples},) or ({self.design.n_samples}, q). Got {values.shape} instead."
            )
        if not np.isfinite(values).all():
            raise ValueError(f"The 'f' parameter of {owner} must return finite values. Got NaN or infinity instead.")
        return values

    def mean(self, f: Callable[[np.ndarray], np.ndarray]) -> float | np.ndarray:
        """The estimate of mean_i f(x_i); f maps an (n, d) array to (n,) or (n, q) values."""
        values = self._values(f, "M2MFit.mean")
        estimate = self._weighted_mean(values)
        return float(estimate) if values.ndim == 1 else estimate

    def _weighted_mean(self, values: np.ndarray) -> np.ndarray:
        return self.weights @ values / self.design.n_samples

    def coefficients(self, f: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, float | np.ndarray]:
        """Explicit M²M: (a, a0) with mean f ~ a0 + <a, z> (a0 = 0 without an intercept). Applies to
        any sketch of the same map whose lambda is this fit's."""
        values = self._values(f, "M2MFit.coefficients")
        columns = values.reshape(values.shape[0], -1)
        rhs = self.design.features_transposed_times(columns) / self.design.n_samples
        if self.intercept:
            rhs = np.vstack([columns.mean(axis=0), rhs])
        solution = self._solve(rhs)
        a, a0 = (solution[1:], solution[0]) if self.intercept else (solution, np.zeros(columns.shape[1]))
        if values.ndim == 1:
            return a[:, 0], float(a0[0])
        return a, a0

    def moments(self, order: int = 1) -> np.ndarray:
        """mean_i x_ij^order for every attribute j: a (d,) array."""
        order = check_int("M2MFit.moments", "order", order)
        return self._weighted_mean(self._values(lambda X: X**order, "M2MFit.mean"))  # (n, d) values

    def cdf(self, points: ArrayLike) -> np.ndarray:
        """mean_i 1{x_ij <= t} for every attribute j and point t: a (d, p) array. ``points`` is a
        (p,) array shared by all attributes or a (d, p) array, one row per attribute."""
        d = self.design.feature_map.dim
        points = as_finite_array("M2MFit.cdf", "points", points)
        if points.ndim == 1:
            points = np.broadcast_to(points, (d, points.size))
        if points.ndim != 2 or points.shape[0] != d or points.shape[1] == 0:
            raise ValueError(
                f"The 'points' parameter of M2MFit.cdf must be a (p,) or ({d}, p) array. "
                f"Got shape {points.shape} instead."
            )
        columns, w = self.design.columns, self.weights
        out = np.empty(points.shape)
        for j in range(d):
            for k, t in enumerate(points[j]):
                out[j, k] = w @ (columns[j] <= t)
        return out / self.design.n_samples

    def covariance(self) -> np.ndarray:
        """The (d, d) covariance mean_i (x_i - mu)(x_i - mu)^T with mu = M²M's estimate of the mean
        (as in the paper, §3.4)."""
        mu = self.moments(1)
        centred = self.samples - mu
        return (centred * self.weights[:, None]).T @ centred / self.design.n_samples

    def _ranges(self, lower: ArrayLike, upper: ArrayLike, owner: str) -> tuple[np.ndarray, np.ndarray]:
        d = self.design.feature_map.dim
        arrays = []
        for name, value in (("lower", lower), ("upper", upper)):
            array = np.asarray(value, dtype=np.float64)
            if array.ndim not in (1, 2) or array.shape[-1] != d or np.isnan(array).any():
                raise ValueError(
                    f"The '{name}' parameter of {owner} must be a (d,) or (q, d) array of bounds with "
                    f"d = {d} (-inf/inf for an unconstrained attribute, no NaN). "
                    f"Got shape {array.shape} instead."
                )
            arrays.append(np.atleast_2d(array))
        if arrays[0].shape[0] not in (1, arrays[1].shape[0]) and arrays[1].shape[0] != 1:
            raise ValueError(
                f"The 'upper' parameter of {owner} must have as many rows as 'lower' (or one). "
                f"Got {arrays[1].shape[0]} and {arrays[0].shape[0]} instead."
            )
        lo, hi = np.broadcast_arrays(*arrays)
        return lo, hi

    def fraction(self, lower: ArrayLike, upper: ArrayLike) -> float | np.ndarray:
        """The share of records with lower <= x <= upper in every attribute (a conjunction of range
        predicates); one value per row of (q, d) bounds, a float for (d,) bounds."""
        lo, hi = self._ranges(lower, upper, "M2MFit.fraction")
        single = np.asarray(lower).ndim == 1 and np.asarray(upper).ndim == 1
        columns, w = self.design.columns, self.weights
        inside, test = np.empty(columns.shape[1], dtype=bool), np.empty(columns.shape[1], dtype=bool)
        estimate = np.empty(lo.shape[0])
        for q in range(lo.shape[0]):
            inside.fill(True)
            for j in range(columns.shape[0]):  # only the attributes this query constrains
                if lo[q, j] > -np.inf:
                    inside &= np.greater_equal(columns[j], lo[q, j], out=test)
                if hi[q, j] < np.inf:
                    inside &= np.less_equal(columns[j], hi[q, j], out=test)
            estimate[q] = w @ inside
        estimate /= self.design.n_samples
        return float(estimate[0]) if single else estimate

    def count(self, lower: ArrayLike, upper: ArrayLike) -> float | np.ndarray:
        """COUNT(D, S) for the box S = [lower, upper]: the fraction times the noisy count."""
        return self.fraction(lower, upper) * self.n_estimate

    def logistic_regression(
        self, label: int, *, features: Sequence[int] | None = None, l2: float = 1e-3, max_iter: int = 1000
    ) -> LogisticModel:
        """Implicit M²M: a logistic model of attribute ``label`` (0/1 under the prior, see
        :class:`Prior`'s ``discrete``) on ``features`` (default: every other attribute), minimising
        the log-loss weighted by this fit's signed weights (:mod:`.logistic`)."""
        d = self.design.feature_map.dim
        label = check_int("M2MFit.logistic_regression", "label", label, minimum=0)
        if label >= d:
            raise ValueError(
                f"The 'label' parameter of M2MFit.logistic_regression must be an attribute below {d}. "
                f"Got {label} instead."
            )
        y = self.samples[:, label]
        if not np.all((y == 0) | (y == 1)):
            raise ValueError(
                "The 'label' parameter of M2MFit.logistic_regression must name an attribute that the "
                "prior draws from {0, 1}. Got a continuous attribute instead; build the design with "
                f"Prior(box, discrete={{{label}: (0, 1)}})."
            )
        if features is None:
            columns = [j for j in range(d) if j != label]
        else:
            columns = [check_int("M2MFit.logistic_regression", "features", j, minimum=0) for j in features]
            if not columns or any(j >= d or j == label for j in columns) or len(set(columns)) != len(columns):
                raise ValueError(
                    f"The 'features' parameter of M2MFit.logistic_regression must list distinct "
                    f"attributes below {d} other than the label. Got {list(features)!r} instead."
                )
        return weighted_logistic_regression(self.samples[:, columns], y, self.weights, l2=l2, max_iter=max_iter)


def fit_m2m(
    feature_map: FeatureMap,
    release: SketchRelease,
    *,
    rng: np.random.Generator,
    n_samples: int = DEFAULT_SAMPLES,
    prior: Prior | None = None,
    regularization: str | float = "summed",
    intercept: bool = False,
) -> M2MFit:
    """Build a design (``n_samples`` points from ``prior``) and fit it to ``release`` in one call."""
    design = M2MDesign.build(feature_map, rng=rng, n_samples=n_samples, prior=prior)
    return design.fit(release, regularization=regularization, intercept=intercept)
