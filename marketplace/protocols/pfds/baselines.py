"""Cores of the DP-Pred baselines: private linear models per agent, and their ensembles.

* **Objective perturbation** (Chaudhuri, Monteleoni & Sarwate 2011) for logistic regression and a
  Huber-hinge linear SVM: :mod:`marketplace.privacy.erm` (re-exported here).
* **Functional mechanism** (Zhang et al. 2012) for linear regression: the objective
  sum_i (y_i - w.x_i)^2 is a polynomial in w whose coefficients are the sums y_i x_ij and
  x_ij x_il (j <= l); they get Laplace noise calibrated to their joint L1 sensitivity, and the
  noisy quadratic is made positive definite by a ridge term and spectral trimming (its
  non-positive eigen-directions are dropped). The sensitivity is computed from the public bounds of
  every feature and of the label: a replaced row moves each coefficient by at most the width of the
  range that coefficient can take, so Delta = sum_j range(y x_j) + sum_{j<=l} range(x_j x_l).
  This avoids diffprivlib's defect (IBM/differential-privacy-library#105): its LinearRegression
  computes the sensitivity of the x_j^2 coefficients from the lower bound twice, which is 0 for a
  feature bounded in [0, U], so those coefficients get no noise at all. Coefficients that cannot
  move (the intercept column's 1 x 1 = n) are released exactly.
* **Ensembles** (DP-Pred's aggregation): majority vote of the agents' classifiers, average of
  their regressors.

Labels of the classifiers are -1 and +1, as in the paper. Every model carries the epsilon it cost
(``math.inf`` for the non-private fits used as references).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from marketplace.privacy.erm import LOSSES, LinearModel, erm_classifier, objective_perturbation
from marketplace.privacy.mechanisms import Laplace

from ._checks import fail, noise_generator, positive_real, real_matrix, real_vector
from .label import majority_vote

__all__ = [
    "LOSSES",
    "LinearModel",
    "objective_perturbation",
    "erm_classifier",
    "functional_mechanism",
    "functional_mechanism_sensitivity",
    "erm_regressor",
    "vote_classifiers",
    "average_regressors",
]


# ---------------------------------------------------------------------------------------------
# Functional mechanism (linear regression).


def _bounds(value: Any, name: str, where: str, count: int | None) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(TypeError, name, where, "(lo, hi) pairs of real numbers", value) from None
    shape_ok = array.ndim == 2 and array.shape[1] == 2 and (count is None or array.shape[0] == count)
    if not shape_ok or not np.isfinite(array).all() or (array[:, 0] > array[:, 1]).any():
        expected = (
            f"{count} finite (lo, hi) pairs with lo <= hi"
            if count is not None
            else "finite (lo, hi) pairs with lo <= hi"
        )
        raise fail(ValueError, name, where, expected, value)
    return array


def _product_range(a: np.ndarray, b: np.ndarray) -> float:
    corners = np.array([a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]])
    return float(corners.max() - corners.min())


def _square_range(a: np.ndarray) -> float:
    low = 0.0 if a[0] <= 0 <= a[1] else min(a[0] ** 2, a[1] ** 2)
    return float(max(a[0] ** 2, a[1] ** 2) - low)


def _coefficient_ranges(x_bounds: np.ndarray, y_bounds: np.ndarray) -> np.ndarray:
    """How far each released coefficient (y x_j for every j, then x_j x_l for j <= l) can move."""
    dim = x_bounds.shape[0]
    linear = [_product_range(y_bounds, x_bounds[j]) for j in range(dim)]
    quadratic = [
        _square_range(x_bounds[j]) if j == m else _product_range(x_bounds[j], x_bounds[m])
        for j, m in zip(*np.triu_indices(dim))
    ]
    return np.array(linear + quadratic)


def _regression_bounds(
    x_bounds: Any, y_bounds: Any, fit_intercept: bool, where: str, count: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    xb = _bounds(x_bounds, "x_bounds", where, count)
    yb = _bounds([y_bounds] if np.ndim(y_bounds) == 1 else y_bounds, "y_bounds", where, 1)[0]
    if not isinstance(fit_intercept, bool):
        raise fail(TypeError, "fit_intercept", where, "a bool", fit_intercept)
    if fit_intercept:
        xb = np.vstack([xb, [1.0, 1.0]])
    return xb, yb


def functional_mechanism_sensitivity(x_bounds: Any, y_bounds: Any, *, fit_intercept: bool = True) -> float:
    """The L1 sensitivity of the released coefficients when one row is replaced: the sum of their ranges."""
    xb, yb = _regression_bounds(x_bounds, y_bounds, fit_intercept, "functional_mechanism_sensitivity")
    return float(_coefficient_ranges(xb, yb).sum())


def _ridge_solve(quadratic: np.ndarray, linear: np.ndarray, n: int, regularization: float) -> np.ndarray:
    """argmin w.(Q/n + reg I)w - 2 linear.w / n over the eigen-directions where Q/n + reg I is positive."""
    values, vectors = np.linalg.eigh(quadratic / n + regularization * np.eye(quadratic.shape[0]))
    keep = values > 1e-12 * max(1.0, np.abs(values).max())
    return vectors[:, keep] @ ((vectors[:, keep].T @ (linear / n)) / values[keep])


def _regression_inputs(
    X: Any, y: Any, x_bounds: Any, y_bounds: Any, fit_intercept: bool, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    rows = real_matrix(X, "X", where)
    labels = real_vector(y, "y", where, size=rows.shape[0])
    xb, yb = _regression_bounds(x_bounds, y_bounds, fit_intercept, where, rows.shape[1])
    Z = np.clip(rows, xb[: rows.shape[1], 0], xb[: rows.shape[1], 1])
    if fit_intercept:
        Z = np.hstack([Z, np.ones((Z.shape[0], 1))])
    return Z, np.clip(labels, yb[0], yb[1]), xb, yb


def functional_mechanism(
    X: Any,
    y: Any,
    *,
    epsilon: float,
    x_bounds: Any,
    y_bounds: Any,
    rng: np.random.Generator,
    regularization: float = 1e-3,
    fit_intercept: bool = True,
    secure: bool = False,
) -> LinearModel:
    """An epsilon-DP linear regression by the functional mechanism, with the sensitivity computed from
    the public bounds (``x_bounds``: one (lo, hi) per feature; ``y_bounds``: (lo, hi)). Rows and labels
    are clipped to those bounds. ``regularization``: the ridge term added to the mean squared error."""
    where = "functional_mechanism"
    epsilon = positive_real(epsilon, "epsilon", where)
    regularization = positive_real(regularization, "regularization", where)
    rng, secure = noise_generator(rng, secure, where)
    Z, labels, xb, yb = _regression_inputs(X, y, x_bounds, y_bounds, fit_intercept, where)
    n, dim = Z.shape
    ranges = _coefficient_ranges(xb, yb)
    upper = np.triu_indices(dim)
    exact = np.concatenate([Z.T @ labels, (Z.T @ Z)[upper]])
    noisy = exact.copy()
    moving = ranges > 0
    if moving.any():
        mechanism = Laplace(epsilon=epsilon, sensitivity=float(ranges.sum()), rng=rng, secure=secure)
        noisy[moving] = np.atleast_1d(mechanism.randomise(exact[moving]))
    linear = noisy[:dim]
    quadratic = np.zeros((dim, dim))
    quadratic[upper] = noisy[dim:]
    quadratic = quadratic + np.triu(quadratic, 1).T
    w = _ridge_solve(quadratic, linear, n, regularization)
    return _linear_model(w, fit_intercept, epsilon=epsilon, mechanism="functional_mechanism")


def erm_regressor(
    X: Any, y: Any, *, x_bounds: Any, y_bounds: Any, regularization: float = 1e-3, fit_intercept: bool = True
) -> LinearModel:
    """The same ridge fit without noise (not private: epsilon = inf), as a reference."""
    where = "erm_regressor"
    regularization = positive_real(regularization, "regularization", where)
    Z, labels, _, _ = _regression_inputs(X, y, x_bounds, y_bounds, fit_intercept, where)
    w = _ridge_solve(Z.T @ Z, Z.T @ labels, Z.shape[0], regularization)
    return _linear_model(w, fit_intercept, epsilon=math.inf, mechanism="none")


def _linear_model(w: np.ndarray, fit_intercept: bool, *, epsilon: float, mechanism: str) -> LinearModel:
    if fit_intercept:
        return LinearModel(coef=w[:-1], intercept=float(w[-1]), task="regression", epsilon=epsilon, mechanism=mechanism)
    return LinearModel(coef=w, intercept=0.0, task="regression", epsilon=epsilon, mechanism=mechanism)


# ---------------------------------------------------------------------------------------------
# Ensembles.


def _models(models: Any, task: str, where: str) -> list[LinearModel]:
    models = list(models) if isinstance(models, (list, tuple)) else None
    if not models or not all(isinstance(m, LinearModel) and m.task == task for m in models):
        raise TypeError(f"The 'models' parameter of {where} must be a non-empty list of {task} LinearModel.")
    return models


def vote_classifiers(models: Sequence[LinearModel], X: Any, *, rng: np.random.Generator | None = None) -> np.ndarray:
    """The majority vote (-1/+1) of the classifiers on X; ties go to -1, or at random with ``rng``."""
    models = _models(models, "classification", "vote_classifiers")
    votes = np.vstack([(m.predict(X) > 0).astype(np.int64) for m in models])
    return np.where(majority_vote(votes, n_classes=2, rng=rng) == 1, 1, -1)


def average_regressors(models: Sequence[LinearModel], X: Any) -> np.ndarray:
    """The committee's prediction: the average of the regressors' predictions on X."""
    models = _models(models, "regression", "average_regressors")
    return np.mean([m.predict(X) for m in models], axis=0)
