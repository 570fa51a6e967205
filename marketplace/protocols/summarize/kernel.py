"""The exact RBF kernel and the MMD^2 used to *score* summaries (no random features here).

Scores must not depend on h1: the report compares private greedy, non-private greedy, the exact-kernel
greedy and uniform sampling on the same exact MMD^2(D_s, D_v).
"""

from __future__ import annotations

import math

import numpy as np

#: Kernel entries computed per block (4M float64 = 32 MB; sklearn keeps ~3 such temporaries).
KERNEL_BLOCK_ELEMENTS = 1 << 22


def _check_gamma(gamma: float) -> float:
    if not (math.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a finite number > 0; got {gamma!r}")
    return float(gamma)


def _as_points(name: str, X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D (n, dim) array; got shape {X.shape}")
    return X


def rbf_kernel(X: np.ndarray, Y: np.ndarray, gamma: float) -> np.ndarray:
    """Gram matrix k(x_i, y_j) = exp(-gamma ||x_i - y_j||^2), shape (len(X), len(Y))."""
    X, Y = _as_points("X", X), _as_points("Y", Y)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same number of columns; got {X.shape[1]} and {Y.shape[1]}")
    # imported here: scikit-learn costs ~2 s to import, and an owner process never needs it
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf_kernel

    return sk_rbf_kernel(X, Y, gamma=_check_gamma(gamma))


def kernel_row_sums(X: np.ndarray, Y: np.ndarray, gamma: float) -> np.ndarray:
    """For every row x of X, sum_j k(x, y_j); computed in blocks of rows to bound memory."""
    X, Y = _as_points("X", X), _as_points("Y", Y)
    out = np.empty(X.shape[0], dtype=np.float64)
    rows = max(1, KERNEL_BLOCK_ELEMENTS // max(1, Y.shape[0]))
    for start in range(0, X.shape[0], rows):
        out[start : start + rows] = rbf_kernel(X[start : start + rows], Y, gamma).sum(axis=1)
    return out


def mean_kernel(X: np.ndarray, Y: np.ndarray, gamma: float) -> float:
    """mean over all pairs (x, y) of k(x, y)."""
    X, Y = _as_points("X", X), _as_points("Y", Y)
    if X.shape[0] == 0 or Y.shape[0] == 0:
        raise ValueError("mean_kernel needs at least one point in X and in Y")
    return float(kernel_row_sums(X, Y, gamma).sum() / (X.shape[0] * Y.shape[0]))


def mmd2(X: np.ndarray, Y: np.ndarray, gamma: float) -> float:
    """Biased (V-statistic) MMD^2 with the exact RBF kernel.

    mean k(X, X) + mean k(Y, Y) - 2 mean k(X, Y), diagonals included. It is >= 0 in exact
    arithmetic; rounding can push it a hair below, so it is clipped at 0.
    """
    value = mean_kernel(X, X, gamma) + mean_kernel(Y, Y, gamma) - 2.0 * mean_kernel(X, Y, gamma)
    return max(value, 0.0)


def prefix_mmd2(X: np.ndarray, Y: np.ndarray, gamma: float) -> np.ndarray:
    """``out[l - 1]`` = :func:`mmd2` of the first ``l`` rows of X against Y, for every l (the MMD^2
    of a summary after each round, from its selection order). Exact kernel, computed in blocks of
    rows (O(len(X)^2 + len(X) len(Y)) kernel entries, bounded memory); equal to :func:`mmd2` of each
    prefix up to rounding, clipped at 0 like it."""
    X, Y = _as_points("X", X), _as_points("Y", Y)
    n = X.shape[0]
    if n == 0:
        return np.zeros(0)
    if Y.shape[0] == 0:
        raise ValueError("prefix_mmd2 needs at least one point in Y")
    within = np.empty(n)  # within[i] = 2 sum_{j < i} k(x_i, x_j) + k(x_i, x_i)
    rows = max(1, KERNEL_BLOCK_ELEMENTS // max(1, n))
    for start in range(0, n, rows):
        stop = min(n, start + rows)
        block = rbf_kernel(X[start:stop], X[:stop], gamma)
        lower = np.tril(block, k=start - 1)  # columns j < i for row i = start + r
        within[start:stop] = 2.0 * lower.sum(axis=1) + block[np.arange(stop - start), np.arange(start, stop)]
    sizes = np.arange(1, n + 1, dtype=np.float64)
    cross = np.cumsum(kernel_row_sums(X, Y, gamma)) / (sizes * Y.shape[0])
    values = np.cumsum(within) / sizes**2 + mean_kernel(Y, Y, gamma) - 2.0 * cross
    return np.maximum(values, 0.0)
