"""Answers from a sketch that are possible: each estimate projected onto the set of values a real
dataset could give.

M²M's estimates are linear in a noisy sketch, so nothing keeps them valid: a CDF can go down or
leave [0, 1], a covariance can have a negative variance, a count can be negative. Projecting an
answer onto its valid set is post-processing of a DP release, so it costs no privacy, and it can
only bring the answer closer (in the projection's own norm) to every valid truth, the real one
included. Records live in the unit box, so:

* a CDF, for each attribute, is non-decreasing in t and lies in [0, 1]: the least-squares
  projection is isotonic regression bounded to [0, 1] (scikit-learn's ``IsotonicRegression``);
* raw moments of a value in [0, 1] lie in [0, 1] and do not increase with the order
  (x^(k+1) <= x^k): isotonic regression over the orders, bounded to [0, 1];
* a covariance matrix is symmetric positive semi-definite: the Frobenius-nearest such matrix keeps
  the eigenvectors and clips negative eigenvalues at 0 (Higham 1988);
* a count fraction lies in [0, 1], and a count is that fraction of a non-negative size.

Each function returns the projected value and how far the projection moved it (0 when the estimate
was already valid), so a user sees when a projection changed something.
"""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression

__all__ = ["project_cdf", "project_counts", "project_covariance", "project_moments"]


def _isotonic(y: np.ndarray, x: np.ndarray, *, increasing: bool) -> np.ndarray:
    return IsotonicRegression(y_min=0.0, y_max=1.0, increasing=increasing).fit_transform(x, y)


def project_cdf(values: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, float]:
    """(d, p) CDF estimates at ``points`` -> the nearest valid CDFs (each row non-decreasing in the
    points, in [0, 1]) and the largest change. The points need not be sorted."""
    values, points = np.asarray(values, dtype=np.float64), np.asarray(points, dtype=np.float64)
    out = np.vstack([_isotonic(row, points, increasing=True) for row in values]) if values.size else values.copy()
    return out, float(np.abs(out - values).max()) if values.size else 0.0


def project_moments(moments: dict[str, list[float]]) -> tuple[dict[str, list[float]], float]:
    """Raw moments by order ``{"1": [...], "2": [...]}`` of unit-box attributes -> per attribute
    non-increasing in the order and in [0, 1]; and the largest change."""
    if not moments:
        return {}, 0.0
    orders = sorted(moments, key=int)
    table = np.array([moments[k] for k in orders], dtype=np.float64)  # (orders, d)
    x = np.array([int(k) for k in orders], dtype=np.float64)
    projected = np.column_stack([_isotonic(table[:, j], x, increasing=False) for j in range(table.shape[1])])
    return {k: projected[i].tolist() for i, k in enumerate(orders)}, float(np.abs(projected - table).max())


def project_covariance(matrix: np.ndarray) -> tuple[np.ndarray, float]:
    """The nearest (Frobenius) symmetric positive semi-definite matrix, and the largest entry change."""
    matrix = np.asarray(matrix, dtype=np.float64)
    symmetric = (matrix + matrix.T) / 2
    eigenvalues, vectors = np.linalg.eigh(symmetric)
    if eigenvalues.min() >= 0:
        out = symmetric
    else:
        out = (vectors * np.clip(eigenvalues, 0.0, None)) @ vectors.T
        out = (out + out.T) / 2
    return out, float(np.abs(out - matrix).max())


def project_counts(fractions: np.ndarray, size: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Count fractions clipped to [0, 1], the counts they give out of max(size, 0), and the largest
    change of a fraction."""
    fractions = np.asarray(fractions, dtype=np.float64)
    clipped = np.clip(fractions, 0.0, 1.0)
    return clipped, clipped * max(float(size), 0.0), float(np.abs(clipped - fractions).max()) if fractions.size else 0.0
