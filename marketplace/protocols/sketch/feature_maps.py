"""The three feature maps Phi of the M²M paper: RFF, RACE and HIST, with their sensitivities.

A sketch is the sum of Phi over the records, so what a single record can change is Phi(x) itself:
under add/remove-one neighbouring (the paper's unbounded DP, the one that also needs a noisy count)
the L1 sensitivity of the sum is max_x ||Phi(x)||_1 and the L2 sensitivity is max_x ||Phi(x)||_2.

====  =========================================  ==================  ===============
map   Phi(x)                                     L1 (Laplace)        L2 (Gaussian)
====  =========================================  ==================  ===============
RFF   [cos Omega^T x, sin Omega^T x], m' = m/2    m' sqrt(2)          sqrt(m')
RACE  one-hot bucket of each of R LSH hashes      R                   sqrt(R)
HIST  one-hot bin of each of the d attributes     d                   sqrt(d)
====  =========================================  ==================  ===============

RFF: a (cos t, sin t) pair has L1 norm sqrt(1 + |sin 2t|) <= sqrt(2), reached at t = pi/4 + k pi/2,
and L2 norm exactly 1. RACE and HIST have exactly one 1 per hash / attribute, so their norms are the
same for every record. The RFF L1 bound is reached only where every projection hits pi/4 mod pi/2
at once, which a record can do when m' <= d; with many more frequencies than dimensions a typical
record reaches about (4/pi)/sqrt(2) ~ 0.9 of it. Replace-one neighbouring would double the L1
bounds. The bounds hold in exact arithmetic; the float32 fast path of RFF rounds each value by at
most ~1e-7, which can exceed them by that relative amount.

Everything a map holds (the box, the frequencies, the hash projections) is drawn from a public seed
and the configured box, never from data, so all parties rebuild the same map and its
``fingerprint`` identifies it in a release.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from ._checks import check_int, check_positive, check_precision
from .domain import Box

#: Rows per block when summing RFF features: the (m', rows) angle buffers stay in the L2 cache.
SUM_CHUNK_ROWS = 2048
#: Rows per block for dense transforms and for gram/apply.
TRANSFORM_CHUNK_ROWS = 4096


def _seeded(owner: str, seed: Any) -> np.random.Generator:
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    return np.random.default_rng(check_int(owner, "seed", seed, minimum=0))


def _read_only(array: Any, dtype: type[np.generic] = np.float64) -> np.ndarray:
    array = np.array(array, dtype=dtype, order="C")
    array.setflags(write=False)
    return array


class FeatureMap:
    """What every map offers: its size, sensitivities and fingerprint, and the chunked operations
    the sketch and M²M need (sum of features, Gram matrix, Phi(X) @ coef)."""

    kind: ClassVar[str] = "feature_map"
    #: True when Phi(x) is dense (worth caching Phi of the M²M samples); False for one-hot maps.
    dense: ClassVar[bool] = True
    box: Box
    fingerprint: str  # sha256 of the kind, the box and the map's parameters (set at construction)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.describe().items() if k != "kind")
        return f"{type(self).__name__}({params}, box={self.box!r}, fingerprint={self.fingerprint[:12]!r})"

    @property
    def dim(self) -> int:
        """Number of attributes of a record."""
        return self.box.dim

    @property
    def n_features(self) -> int:
        """m, the length of Phi(x)."""
        raise NotImplementedError

    @property
    def l1_sensitivity(self) -> float:
        """max_x ||Phi(x)||_1: the Laplace sensitivity of the sum of features (add/remove one)."""
        raise NotImplementedError

    @property
    def l2_sensitivity(self) -> float:
        """max_x ||Phi(x)||_2: the Gaussian sensitivity of the sum of features (add/remove one)."""
        raise NotImplementedError

    @property
    def squared_norm(self) -> float:
        """||Phi(x)||_2^2, the same for every x for these three maps; <Phi(x), Phi(y)> divided by it
        is the map's kernel (Gaussian for RFF, LSH collision rate for RACE, share of equal bins for
        HIST)."""
        return self.l2_sensitivity**2

    def describe(self) -> dict[str, Any]:
        """The public parameters that rebuild the map (besides the seed)."""
        raise NotImplementedError

    def _state(self) -> bytes:
        raise NotImplementedError

    def _set_fingerprint(self) -> None:
        digest = hashlib.sha256(self.kind.encode() + b"|" + self.box.state() + b"|" + self._state())
        object.__setattr__(self, "fingerprint", digest.hexdigest())

    def check(self, X: ArrayLike, *, owner: str) -> np.ndarray:
        """X as a float64 (n, dim) array of finite records inside the box (see :meth:`Box.check`)."""
        return self.box.check(X, owner=owner)

    def transform(self, X: ArrayLike) -> np.ndarray:
        """Phi of every row of X: a float64 (n, m) array."""
        raise NotImplementedError

    def sum_features(self, X: ArrayLike, *, precision: str = "float64") -> np.ndarray:
        """sum_i Phi(x_i), an (m,) float64 vector, computed block by block."""
        raise NotImplementedError

    def gram(self, X: ArrayLike) -> np.ndarray:
        """sum_i Phi(x_i) Phi(x_i)^T, an (m, m) float64 matrix."""
        X = self.check(X, owner=f"{type(self).__name__}.gram")
        G = np.zeros((self.n_features, self.n_features))
        for start in range(0, X.shape[0], TRANSFORM_CHUNK_ROWS):
            P = self.transform(X[start : start + TRANSFORM_CHUNK_ROWS])
            G += P.T @ P
        return G

    def apply(self, X: ArrayLike, coef: ArrayLike) -> np.ndarray:
        """Phi(X) @ coef for an (m,) or (m, q) coefficient array, without forming Phi(X) whole."""
        X = self.check(X, owner=f"{type(self).__name__}.apply")
        coef = _check_coef(self, coef)
        out = np.empty((X.shape[0],) + coef.shape[1:])
        for start in range(0, X.shape[0], TRANSFORM_CHUNK_ROWS):
            out[start : start + TRANSFORM_CHUNK_ROWS] = self.transform(X[start : start + TRANSFORM_CHUNK_ROWS]) @ coef
        return out

    def adjoint(self, X: ArrayLike, values: ArrayLike) -> np.ndarray:
        """Phi(X)^T values for (n,) or (n, q) values: the (m,) or (m, q) right-hand side of a ridge."""
        X = self.check(X, owner=f"{type(self).__name__}.adjoint")
        values = _check_values(self, X, values)
        out = np.zeros((self.n_features,) + values.shape[1:])
        for start in range(0, X.shape[0], TRANSFORM_CHUNK_ROWS):
            out += (
                self.transform(X[start : start + TRANSFORM_CHUNK_ROWS]).T @ values[start : start + TRANSFORM_CHUNK_ROWS]
            )
        return out


def _check_values(fmap: FeatureMap, X: np.ndarray, values: ArrayLike) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.ndim not in (1, 2) or values.shape[0] != X.shape[0]:
        raise ValueError(
            f"The 'values' parameter of {type(fmap).__name__}.adjoint must have one row per record "
            f"({X.shape[0]}). Got shape {values.shape} instead."
        )
    return values


def _check_coef(fmap: FeatureMap, coef: ArrayLike) -> np.ndarray:
    coef = np.asarray(coef, dtype=np.float64)
    if coef.ndim not in (1, 2) or coef.shape[0] != fmap.n_features:
        raise ValueError(
            f"The 'coef' parameter of {type(fmap).__name__}.apply must have {fmap.n_features} rows. "
            f"Got shape {coef.shape} instead."
        )
    return coef


# ---------------------------------------------------------------------------------------------
# RFF


@dataclass(frozen=True, eq=False, repr=False)
class RFF(FeatureMap):
    """Random Fourier features Phi(x) = [cos(Omega^T x), sin(Omega^T x)] for the Gaussian kernel
    exp(-||x - y||^2 / (2 sigma^2)): ``frequencies`` is Omega, (dim, m') with entries
    N(0, sigma^-2), and m = 2 m'. No phase and no 1/sqrt(m) scaling, as in the paper, so that
    <Phi(x), Phi(y)> / m' estimates the kernel."""

    kind: ClassVar[str] = "rff"
    box: Box
    frequencies: np.ndarray
    sigma: float
    _omega_t64: np.ndarray = field(init=False, repr=False, compare=False)  # Omega^T, set in __post_init__

    def __post_init__(self) -> None:
        if not isinstance(self.box, Box):
            raise TypeError(f"The 'box' parameter of RFF must be a Box. Got {type(self.box).__name__} instead.")
        omega = _read_only(self.frequencies)
        if omega.ndim != 2 or omega.shape[0] != self.box.dim or omega.shape[1] < 1 or not np.isfinite(omega).all():
            raise ValueError(
                f"The 'frequencies' parameter of RFF must be a finite ({self.box.dim}, m') matrix. "
                f"Got shape {omega.shape} instead."
            )
        object.__setattr__(self, "frequencies", omega)
        object.__setattr__(self, "sigma", check_positive("RFF", "sigma", self.sigma))
        # the transposed copies used by the hot loop, in both precisions
        object.__setattr__(self, "_omega_t64", _read_only(omega.T))
        self._set_fingerprint()

    @classmethod
    def draw(cls, box: Box, *, n_features: int, sigma: float, seed: int | np.random.SeedSequence) -> RFF:
        """Draw the m' = n_features / 2 frequencies from N(0, sigma^-2 I) with a public seed."""
        m = check_int("RFF.draw", "n_features", n_features, minimum=2)
        if m % 2:
            raise ValueError(
                f"The 'n_features' parameter of RFF.draw must be even ([cos, sin] of m/2 frequencies). Got {m} instead."
            )
        sigma = check_positive("RFF.draw", "sigma", sigma)
        if not isinstance(box, Box):
            raise TypeError(f"The 'box' parameter of RFF.draw must be a Box. Got {type(box).__name__} instead.")
        omega = _seeded("RFF.draw", seed).normal(0.0, 1.0 / sigma, size=(box.dim, m // 2))
        return cls(box=box, frequencies=omega, sigma=sigma)

    @property
    def n_frequencies(self) -> int:
        """m', the number of frequencies."""
        return int(self.frequencies.shape[1])

    @property
    def n_features(self) -> int:
        return 2 * self.n_frequencies

    @property
    def l1_sensitivity(self) -> float:
        return self.n_frequencies * math.sqrt(2.0)

    @property
    def l2_sensitivity(self) -> float:
        return math.sqrt(self.n_frequencies)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "n_features": self.n_features, "sigma": self.sigma}

    def _state(self) -> bytes:
        return repr(self.sigma).encode() + b"|" + self.frequencies.astype("<f8").tobytes()

    def transform(self, X: ArrayLike) -> np.ndarray:
        X = self.check(X, owner="RFF.transform")
        m1 = self.n_frequencies
        out = np.empty((X.shape[0], 2 * m1))
        for start in range(0, X.shape[0], TRANSFORM_CHUNK_ROWS):
            block = out[start : start + TRANSFORM_CHUNK_ROWS]
            angles = X[start : start + TRANSFORM_CHUNK_ROWS] @ self.frequencies
            np.cos(angles, out=block[:, :m1])
            np.sin(angles, out=block[:, m1:])
        return out

    def sum_features(self, X: ArrayLike, *, precision: str = "float64") -> np.ndarray:
        """sum_i [cos(Omega^T x_i), sin(Omega^T x_i)].

        The angles are always computed in float64. ``precision="float64"`` evaluates cos/sin in
        float64 (libm, ~1e-16 per value); ``"float32"`` rounds the angles to float32 and uses numpy's
        SIMD float32 cos/sin (several times faster on CPUs without AVX-512, ~1e-7 per value, so the
        mean feature is off by ~1e-8: far below any DP noise). Blocks are summed pairwise in the
        working precision and accumulated in float64.
        """
        X = self.check(X, owner="RFF.sum_features")
        dtype = np.float64 if check_precision("RFF.sum_features", precision) == "float64" else np.float32
        m1, rows = self.n_frequencies, SUM_CHUNK_ROWS
        totals = np.zeros(2 * m1)
        angles64 = np.empty((m1, rows))
        angles = angles64 if dtype is np.float64 else np.empty((m1, rows), dtype=dtype)
        values = np.empty((m1, rows), dtype=dtype)
        for start in range(0, X.shape[0], rows):
            block = X[start : start + rows]
            k = block.shape[0]
            if k < rows:  # the last, short block gets its own contiguous buffers
                angles64, values = np.empty((m1, k)), np.empty((m1, k), dtype=dtype)
                angles = angles64 if dtype is np.float64 else np.empty((m1, k), dtype=dtype)
            np.matmul(self._omega_t64, block.T, out=angles64)  # (m', k): one row per frequency
            if angles is not angles64:
                np.copyto(angles, angles64, casting="same_kind")
            np.cos(angles, out=values)
            totals[:m1] += values.sum(axis=1)
            np.sin(angles, out=values)
            totals[m1:] += values.sum(axis=1)
        return totals


# ---------------------------------------------------------------------------------------------
# One-hot maps: RACE and HIST


class _OneHotMap(FeatureMap):
    """A map whose Phi(x) has a single 1 in each of ``n_groups`` consecutive groups of columns, so
    it is stored as (n, n_groups) column indices: sums are bincounts, Phi(X) @ coef is a gather."""

    dense: ClassVar[bool] = False
    _group_start: np.ndarray  # each group's first column (set by the subclass's __post_init__)

    @property
    def n_groups(self) -> int:
        raise NotImplementedError

    @property
    def l1_sensitivity(self) -> float:
        return float(self.n_groups)

    @property
    def l2_sensitivity(self) -> float:
        return math.sqrt(self.n_groups)

    def _indices(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def indices(self, X: ArrayLike) -> np.ndarray:
        """The column of the 1 in each group, for every row of X: an (n, n_groups) int64 array."""
        return self._indices(self.check(X, owner=f"{type(self).__name__}.indices"))

    def transform(self, X: ArrayLike) -> np.ndarray:
        idx = self.indices(X)
        out = np.zeros((idx.shape[0], self.n_features))
        np.put_along_axis(out, idx, 1.0, axis=1)
        return out

    def sum_features(self, X: ArrayLike, *, precision: str = "float64") -> np.ndarray:
        """The number of records in each bucket/bin; ``precision`` is accepted for a uniform
        interface and has no effect (the sums are exact integers)."""
        X = self.check(X, owner=f"{type(self).__name__}.sum_features")
        check_precision(f"{type(self).__name__}.sum_features", precision)
        totals = np.zeros(self.n_features, dtype=np.int64)
        for start in range(0, X.shape[0], TRANSFORM_CHUNK_ROWS * 4):
            totals += np.bincount(
                self._indices(X[start : start + TRANSFORM_CHUNK_ROWS * 4]).ravel(), minlength=self.n_features
            )
        return totals.astype(np.float64)

    def gram(self, X: ArrayLike) -> np.ndarray:
        from scipy import sparse  # only M²M needs it

        idx = self.indices(X)
        n, k = idx.shape
        P = sparse.csr_matrix((np.ones(n * k), idx.ravel(), np.arange(0, n * k + 1, k)), shape=(n, self.n_features))
        return (P.T @ P).toarray()

    def apply(self, X: ArrayLike, coef: ArrayLike) -> np.ndarray:
        X = self.check(X, owner=f"{type(self).__name__}.apply")
        coef = _check_coef(self, coef)
        out = np.empty((X.shape[0],) + coef.shape[1:])
        for start in range(0, X.shape[0], TRANSFORM_CHUNK_ROWS):
            out[start : start + TRANSFORM_CHUNK_ROWS] = coef[
                self._indices(X[start : start + TRANSFORM_CHUNK_ROWS])
            ].sum(axis=1)
        return out

    def adjoint(self, X: ArrayLike, values: ArrayLike) -> np.ndarray:
        X = self.check(X, owner=f"{type(self).__name__}.adjoint")
        values = _check_values(self, X, values)
        idx = self._indices(X).ravel()
        columns = values.reshape(values.shape[0], -1)
        out = np.empty((self.n_features, columns.shape[1]))
        for j in range(columns.shape[1]):
            out[:, j] = np.bincount(idx, weights=np.repeat(columns[:, j], self.n_groups), minlength=self.n_features)
        return out.reshape((self.n_features,) + values.shape[1:])


@dataclass(frozen=True, eq=False, repr=False)
class RACE(_OneHotMap):
    """RACE (Coleman & Shrivastava 2020): R repetitions of a Euclidean (p-stable) LSH hash, each
    one-hot over W buckets, so m = R W.

    Repetition r hashes x to floor((a_r . x - lo_r) / bandwidth + b_r) mod W, with a_r ~ N(0, I),
    b_r ~ U[0, 1) and lo_r = min over the box of a_r . x, so the buckets are numbered from the box's
    lowest projection and no two distant slabs share a bucket as long as the box's projected width
    is below W * bandwidth. Two points collide in a repetition with a probability that decreases
    with their distance: the LSH kernel that RACE estimates.
    """

    kind: ClassVar[str] = "race"
    box: Box
    projections: np.ndarray
    offsets: np.ndarray
    buckets: int
    bandwidth: float
    _low: np.ndarray = field(init=False, repr=False, compare=False)  # each repetition's lowest projection of the box

    def __post_init__(self) -> None:
        if not isinstance(self.box, Box):
            raise TypeError(f"The 'box' parameter of RACE must be a Box. Got {type(self.box).__name__} instead.")
        A = _read_only(self.projections)
        if A.ndim != 2 or A.shape[0] != self.box.dim or A.shape[1] < 1 or not np.isfinite(A).all():
            raise ValueError(
                f"The 'projections' parameter of RACE must be a finite ({self.box.dim}, R) matrix. "
                f"Got shape {A.shape} instead."
            )
        b = _read_only(self.offsets)
        if b.shape != (A.shape[1],) or not np.all((b >= 0) & (b < 1)):
            raise ValueError(
                f"The 'offsets' parameter of RACE must be {A.shape[1]} values in [0, 1). Got shape {b.shape} instead."
            )
        object.__setattr__(self, "projections", A)
        object.__setattr__(self, "offsets", b)
        object.__setattr__(self, "buckets", check_int("RACE", "buckets", self.buckets, minimum=2))
        object.__setattr__(self, "bandwidth", check_positive("RACE", "bandwidth", self.bandwidth))
        low = np.minimum(A * self.box.lower[:, None], A * self.box.upper[:, None]).sum(axis=0)
        object.__setattr__(self, "_low", _read_only(low))
        object.__setattr__(self, "_group_start", _read_only(np.arange(A.shape[1]) * self.buckets, dtype=np.int64))
        self._set_fingerprint()

    @classmethod
    def draw(
        cls, box: Box, *, repetitions: int, buckets: int, bandwidth: float, seed: int | np.random.SeedSequence
    ) -> RACE:
        """Draw the R projections and offsets with a public seed."""
        R = check_int("RACE.draw", "repetitions", repetitions)
        buckets = check_int("RACE.draw", "buckets", buckets, minimum=2)
        bandwidth = check_positive("RACE.draw", "bandwidth", bandwidth)
        if not isinstance(box, Box):
            raise TypeError(f"The 'box' parameter of RACE.draw must be a Box. Got {type(box).__name__} instead.")
        rng = _seeded("RACE.draw", seed)
        return cls(
            box=box,
            projections=rng.normal(size=(box.dim, R)),
            offsets=rng.random(R),
            buckets=buckets,
            bandwidth=bandwidth,
        )

    @property
    def repetitions(self) -> int:
        return int(self.projections.shape[1])

    @property
    def n_groups(self) -> int:
        return self.repetitions

    @property
    def n_features(self) -> int:
        return self.repetitions * self.buckets

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "repetitions": self.repetitions,
            "buckets": self.buckets,
            "bandwidth": self.bandwidth,
        }

    def _state(self) -> bytes:
        return (
            f"{self.buckets}|{self.bandwidth!r}|".encode()
            + self.projections.astype("<f8").tobytes()
            + self.offsets.astype("<f8").tobytes()
        )

    def _indices(self, X: np.ndarray) -> np.ndarray:
        cell = np.floor((X @ self.projections - self._low) / self.bandwidth + self.offsets).astype(np.int64)
        return np.mod(cell, self.buckets) + self._group_start


@dataclass(frozen=True, eq=False, repr=False)
class Histogram(_OneHotMap):
    """HIST: for each attribute, the one-hot of its bin among ``bins`` equal bins of the box's
    range (the upper edge belongs to the last bin), so m = d * bins. No randomness."""

    kind: ClassVar[str] = "hist"
    box: Box
    bins: int

    def __post_init__(self) -> None:
        if not isinstance(self.box, Box):
            raise TypeError(f"The 'box' parameter of Histogram must be a Box. Got {type(self.box).__name__} instead.")
        object.__setattr__(self, "bins", check_int("Histogram", "bins", self.bins))
        object.__setattr__(self, "_group_start", _read_only(np.arange(self.box.dim) * self.bins, dtype=np.int64))
        self._set_fingerprint()

    @property
    def n_groups(self) -> int:
        return self.dim

    @property
    def n_features(self) -> int:
        return self.dim * self.bins

    def edges(self, attribute: int) -> np.ndarray:
        """The bins + 1 edges of one attribute's bins."""
        return np.linspace(self.box.lower[attribute], self.box.upper[attribute], self.bins + 1)

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, "bins": self.bins}

    def _state(self) -> bytes:
        return str(self.bins).encode()

    def _indices(self, X: np.ndarray) -> np.ndarray:
        position = (X - self.box.lower) / self.box.width * self.bins
        return np.clip(position.astype(np.int64), 0, self.bins - 1) + self._group_start
