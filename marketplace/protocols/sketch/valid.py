"""Answers from a sketch that are possible: each estimate projected onto the set of values a real
dataset could give.

M²M's estimates are linear in a noisy sketch, so nothing keeps them valid: a CDF can go down or
leave [0, 1], a covariance can have a negative variance, a count can be negative. Projecting an
answer onto its valid set is post-processing of a DP release, so it costs no privacy, and it can
only bring the answer closer (in the projection's own norm) to every valid truth, the real one
included. Records live in the unit box, so:

* a CDF, for each attribute, is non-decreasing in t and lies in [0, 1]: the least-squares
  projection is isotonic regression bounded to [0, 1] (:mod:`.isotonic`: scikit-learn's
  ``IsotonicRegression`` to the bit, without importing scikit-learn);
* means, second moments, variances and the covariance are projected together
  (:mod:`.joint`): mean in the box, covariance positive semi-definite, its diagonal equal to
  second moment - mean^2, and 0 <= variance <= (hi - mean)(mean - lo);
* raw moments of higher orders (3, 4, ...) of a value in [0, 1] lie in [0, second moment] and do
  not increase with the order (x^(k+1) <= x^k): isotonic regression over the orders, bounded by the
  projected second moment (a necessary condition, not the whole moment problem);
* a covariance matrix alone is symmetric positive semi-definite: the Frobenius-nearest such matrix
  keeps the eigenvectors and clips negative eigenvalues at 0 (Higham 1988);
* a count fraction lies in [0, 1], and a count is that fraction of a non-negative size.

A user must see when a projection changed something: :func:`change` describes a move (``changed``,
``max_change``, the attributes or queries it touched) as the answers' ``projections`` report it, and
:func:`project_moment_answers` gives those entries for the moments, variances and covariance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from .isotonic import isotonic_fit_transform
from .joint import project_jointly

__all__ = [
    "ROUND_OFF",
    "change",
    "project_cdf",
    "project_counts",
    "project_covariance",
    "project_higher_moments",
    "project_moment_answers",
]


def _isotonic(y: np.ndarray, x: np.ndarray, *, increasing: bool) -> np.ndarray:
    return isotonic_fit_transform(x, y, y_min=0.0, y_max=1.0, increasing=increasing)


def project_cdf(values: np.ndarray, points: np.ndarray) -> tuple[np.ndarray, float]:
    """(d, p) CDF estimates at ``points`` -> the nearest valid CDFs (each row non-decreasing in the
    points, in [0, 1]) and the largest change. The points need not be sorted."""
    values, points = np.asarray(values, dtype=np.float64), np.asarray(points, dtype=np.float64)
    out = np.vstack([_isotonic(row, points, increasing=True) for row in values]) if values.size else values.copy()
    return out, float(np.abs(out - values).max()) if values.size else 0.0


def project_higher_moments(second: np.ndarray, higher: dict[str, list[float]]) -> dict[str, list[float]]:
    """Raw moments of orders 3, 4, ... (``{"3": [...], ...}``) of attributes in [0, 1], given their
    (already consistent) second moments: per attribute, the nearest values with
    second >= m3 >= m4 >= ... >= 0 (bounded isotonic regression over the orders)."""
    if not higher:
        return {}
    orders = sorted(higher, key=int)
    table = np.array([higher[k] for k in orders], dtype=np.float64)  # (orders, d)
    x = np.array([int(k) for k in orders], dtype=np.float64)
    projected = np.column_stack(
        [
            isotonic_fit_transform(x, table[:, j], y_min=0.0, y_max=float(max(top, 0.0)), increasing=False)
            for j, top in enumerate(np.asarray(second, dtype=np.float64))
        ]
    )
    return {k: projected[i].tolist() for i, k in enumerate(orders)}


ROUND_OFF = 1e-12
"""A projection moves a value by at most ``ROUND_OFF * max(1, |value|)`` through floating-point
round-off alone: isotonic regression (scikit-learn's, and :mod:`.isotonic`) returns an already
valid CDF row either unchanged or off by one ulp (1.1e-16), depending on the release, and the joint
projection's solver stops at a gap of 1e-10 times the box's scale. A move that small is no change:
it counts in neither ``changed``, ``max_change`` nor the rows named, so which attributes a report
says were moved is the same under every supported library release. The report states the
threshold (``round_off``)."""


def change(raw: ArrayLike, projected: ArrayLike, *, axis_name: str = "attributes") -> dict[str, Any]:
    """How a projection moved an answer: ``changed`` (a value moved by more than round-off),
    ``max_change`` (the largest such move, 0 when none), ``axis_name`` (the rows with such a move:
    attributes, or count queries; rows being the first axis of ``raw``) and ``round_off`` (the
    relative threshold, :data:`ROUND_OFF`)."""
    raw, projected = np.asarray(raw, dtype=np.float64), np.asarray(projected, dtype=np.float64)
    moved = np.abs(projected - raw)
    moved = np.where(moved > ROUND_OFF * np.maximum(1.0, np.abs(raw)), moved, 0.0)
    rows = moved.reshape(moved.shape[0], -1).max(axis=1) if moved.ndim else moved.reshape(1)
    return {
        "changed": bool((rows > 0).any()),
        "max_change": float(rows.max(initial=0.0)),
        axis_name: [int(j) for j in np.flatnonzero(rows > 0)],
        "round_off": ROUND_OFF,
    }


def _asked(answer: np.ndarray | None, what: str) -> np.ndarray:
    """A part of a joint projection that was asked for (project_jointly answers every part it is given)."""
    if answer is None:
        raise ValueError(f"project_jointly gave no {what}, though they were given to it")
    return answer


def project_moment_answers(
    moments: dict[str, list[float]],
    covariance: np.ndarray | None,
    mean: np.ndarray,
    *,
    lower: np.ndarray,
    upper: np.ndarray,
    second: np.ndarray | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Raw moments by order (``{"1": [...], "2": [...], ...}``, possibly empty), the raw covariance
    (or None) and the raw mean it was centred on -> the consistent answers (``moments``,
    ``variances``, ``covariance``, each present when it can be given) and their ``projections``
    entries. Orders 1 and 2 and the covariance are projected together (:mod:`.joint`), higher
    orders then below the second moment (:func:`project_higher_moments`, unit box only).
    ``second``, the raw second moment, is used when ``moments`` stops before order 2: it joins the
    covariance's projection as a second estimate of the variances, and is not reported."""
    if sorted(moments, key=int) != [str(k) for k in range(1, len(moments) + 1)]:
        raise ValueError(
            f"The 'moments' parameter of project_moment_answers must hold the orders 1..K. "
            f"Got the orders {sorted(moments, key=int)} instead."
        )
    mean = np.asarray(mean, dtype=np.float64)
    asked_second = "2" in moments
    if asked_second:
        second = np.asarray(moments["2"], dtype=np.float64)
    elif covariance is None:
        second = None
    joint = project_jointly(mean, second, covariance, lower=lower, upper=upper)
    answers: dict[str, Any] = {}
    moved: dict[str, Any] = {}
    if moments:
        projected = {"1": joint.mean.tolist()}
        if asked_second:
            projected["2"] = _asked(joint.second, "second moments").tolist()
        higher = {k: v for k, v in moments.items() if int(k) > 2}
        if higher:
            if np.any(np.asarray(lower) < 0) or np.any(np.asarray(upper) > 1):
                raise ValueError(
                    "project_moment_answers: moments of order 3 and more are projected for attributes in "
                    f"[0, 1] only; got the box lower={np.asarray(lower).tolist()}, upper={np.asarray(upper).tolist()}"
                )
            projected.update(project_higher_moments(_asked(joint.second, "second moments"), higher))
        answers["moments"] = {k: projected[k] for k in sorted(moments, key=int)}
        orders = {k: change(moments[k], answers["moments"][k]) for k in answers["moments"]}
        moved["moments"] = {
            "changed": any(o["changed"] for o in orders.values()),
            "max_change": max(o["max_change"] for o in orders.values()),
            "attributes": sorted({j for o in orders.values() for j in o["attributes"]}),
            "orders": orders,
            "round_off": ROUND_OFF,
        }
    if joint.variance is not None:
        answers["variances"] = joint.variance.tolist()
        raw_variance = np.diag(covariance) if covariance is not None else np.asarray(second) - mean**2
        moved["variances"] = change(raw_variance, joint.variance)
    if covariance is not None:
        projected_covariance = _asked(joint.covariance, "covariance")
        answers["covariance"] = projected_covariance.tolist()
        symmetric = (np.asarray(covariance) + np.asarray(covariance).T) / 2
        moved["covariance"] = {
            **change(covariance, projected_covariance),
            "raw_min_eigenvalue": float(np.linalg.eigvalsh(symmetric).min()),
            "iterations": joint.iterations,
            "converged": joint.converged,
        }
    return answers, moved


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
