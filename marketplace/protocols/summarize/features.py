"""h1: random Fourier features (Rahimi & Recht) shared by every party of the `summarize` protocol.

The RBF kernel k(x, y) = exp(-gamma ||x - y||^2) is the Fourier transform of a Gaussian with
covariance 2*gamma*I. Drawing d frequencies from it and a uniform phase for each gives an explicit
map h1 with h1(x) . h1(y) ~ k(x, y). Owners, curator and consumer must all use the *same* draw
(public randomness), so the draw is a frozen value built from a seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Rows transformed per block: bounds the temporary (rows x d) matrix to a few MB.
TRANSFORM_CHUNK_ROWS = 8192

UNIT_ROUNDOFF = 2.0**-53
"""u: the relative error of one float64 operation (round to nearest)."""
COS_ULPS = 4
"""How many ulps any cos numpy may use (libm, or a SIMD one) is off by; an ulp of a value in [-1, 1]
is at most 2u."""


def gamma(n: int) -> float:
    """Higham's gamma_n = n u / (1 - n u): the relative error bound of a sum of n products, whatever
    the order of the additions (blocked, pairwise, with or without fused multiply-adds)."""
    nu = n * UNIT_ROUNDOFF
    return nu / (1.0 - nu) if nu < 1.0 else math.inf


@dataclass(frozen=True, eq=False)
class RandomFourierFeatures:
    """h1: Rahimi-Recht features for the RBF kernel exp(-gamma ||x-y||^2); public shared randomness.

    ``W`` holds one frequency per column (shape ``(dim, d)``), ``b`` one phase per feature. Both are
    stored read-only so that a shared instance cannot drift between parties.
    """

    W: np.ndarray
    b: np.ndarray
    gamma: float

    def __post_init__(self) -> None:
        W = np.array(self.W, dtype=np.float64, order="C")
        b = np.array(self.b, dtype=np.float64)
        if W.ndim != 2 or W.shape[0] < 1 or W.shape[1] < 1:
            raise ValueError(f"W must be a non-empty (dim, d) matrix; got shape {W.shape}")
        if b.shape != (W.shape[1],):
            raise ValueError(f"b must have shape ({W.shape[1]},) to match W; got {b.shape}")
        if not (math.isfinite(self.gamma) and self.gamma > 0):
            raise ValueError(f"gamma must be a finite number > 0; got {self.gamma!r}")
        W.setflags(write=False)
        b.setflags(write=False)
        object.__setattr__(self, "W", W)
        object.__setattr__(self, "b", b)
        object.__setattr__(self, "gamma", float(self.gamma))

    @classmethod
    def draw(cls, dim: int, n_features: int, gamma: float, seed: int | np.random.SeedSequence) -> RandomFourierFeatures:
        """Draw W ~ N(0, 2*gamma) entrywise and b ~ U[0, 2pi]; the same seed gives the same map."""
        if dim < 1 or n_features < 1:
            raise ValueError(f"dim and n_features must be >= 1; got dim={dim}, n_features={n_features}")
        if not (math.isfinite(gamma) and gamma > 0):
            raise ValueError(f"gamma must be a finite number > 0; got {gamma!r}")
        rng = np.random.default_rng(seed)
        W = rng.normal(0.0, math.sqrt(2.0 * gamma), size=(dim, n_features))
        b = rng.uniform(0.0, 2.0 * math.pi, size=n_features)
        return cls(W=W, b=b, gamma=gamma)

    @property
    def dim(self) -> int:
        """Dimension of the input points."""
        return int(self.W.shape[0])

    @property
    def n_features(self) -> int:
        """d, the number of random features (length of h1(x))."""
        return int(self.W.shape[1])

    @property
    def bound(self) -> float:
        """sqrt(2/d): every coordinate of h1(x) lies in [-bound, bound]."""
        return math.sqrt(2.0 / self.n_features)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """Map rows of X (n, dim) to h1(X) (n, d) = sqrt(2/d) cos(X W + b), in float64.

        Works block by block in place, so memory stays at the output plus one small block.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X must have shape (n, {self.dim}); got {X.shape}")
        out = np.empty((X.shape[0], self.n_features), dtype=np.float64)
        scale = self.bound
        for start in range(0, X.shape[0], TRANSFORM_CHUNK_ROWS):
            block = out[start : start + TRANSFORM_CHUNK_ROWS]
            np.matmul(X[start : start + TRANSFORM_CHUNK_ROWS], self.W, out=block)
            block += self.b
            np.cos(block, out=block)
            block *= scale
        return out

    def transform_error(self, X: np.ndarray) -> np.ndarray:
        """A bound on |transform(X) - h1(X)| per row and feature, h1 computed exactly: it holds for
        every correct float64 evaluation of sqrt(2/d) cos(x W + b), so two parties' embeddings of
        one row (an owner's batched product, the curator's or the consumer's one row, another BLAS)
        differ by at most twice it.

        The argument x W + b is a sum of n + 1 terms: its error is at most gamma_(n+1) (|x| |W| + |b|)
        (computed here and enlarged by its own rounding); cos is 1-Lipschitz and never moves by more
        than 2, and is off by at most :data:`COS_ULPS` ulps; the scale adds one rounding. The bound
        grows with |x| |W|: from about 1e-15 for rows of norm 1 to sqrt(2/d) * 2 (nothing is known)
        once |x W| passes about 1e15 / n.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(f"X must have shape (n, {self.dim}); got {X.shape}")
        n = self.dim + 1
        with np.errstate(over="ignore", invalid="ignore"):
            magnitude = (np.abs(X) @ np.abs(self.W) + np.abs(self.b)) * (1.0 + gamma(n + 1))
        argument = np.minimum(2.0, np.nan_to_num(gamma(n) * magnitude, nan=2.0, posinf=2.0))
        cosine = 2 * COS_ULPS * UNIT_ROUNDOFF
        return self.bound * (argument + cosine) * (1.0 + 2 * UNIT_ROUNDOFF) + self.bound * UNIT_ROUNDOFF
