"""Cores of the DP-Pred baselines: private linear models per agent, and their ensembles.

* **Objective perturbation** (Chaudhuri, Monteleoni & Sarwate 2011, Algorithm 2) for logistic
  regression and for a linear SVM with the Huber-smoothed hinge loss (the hinge itself is not
  differentiable, which the method needs). With rows of norm <= 1, a loss whose derivative is
  bounded by 1 and whose second derivative is bounded by c (1/4 for the logistic loss, 1/(2h) for
  the Huber loss of width h) and the regulariser Lambda/2 ||w||^2, it minimises
  mean loss + (Lambda + Delta)/2 ||w||^2 + b.w / n, where b has density ∝ exp(-eps' ||b|| / 2)
  (norm ~ Gamma(dim, 2/eps'), uniform direction) and eps' = eps - log(1 + 2c/(n Lambda) +
  c^2/(n Lambda)^2); when that is not positive, Delta = c/(n (e^(eps/4) - 1)) - Lambda and
  eps' = eps/2. The result is eps-DP for datasets differing in one row (replaced).
  diffprivlib's LogisticRegression implements the same method, but diffprivlib 0.6.6 does not
  import with scikit-learn 1.9 (``sklearn.tree._tree`` no longer exports ``DOUBLE``), so it is
  written here; the Gamma-norm noise has no counterpart in :mod:`marketplace.privacy.mechanisms`
  and is drawn from ``rng`` (simulation only).
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
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from marketplace.privacy.mechanisms import Laplace

from ._checks import choice, fail, generator, noise_generator, positive_real, real_matrix, real_vector
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

LOSSES = ("logistic", "huber")


@dataclass(frozen=True, eq=False)
class LinearModel:
    """w.x + b on raw features: a classifier (sign, labels -1/+1) or a regressor, with its cost."""

    coef: np.ndarray
    intercept: float
    task: str
    epsilon: float
    mechanism: str

    def decision_function(self, X: Any) -> np.ndarray:
        rows = real_matrix(X, "X", "LinearModel.decision_function", columns=self.coef.size, allow_empty=True)
        return rows @ self.coef + self.intercept

    def predict(self, X: Any) -> np.ndarray:
        scores = self.decision_function(X)
        return np.where(scores >= 0, 1, -1) if self.task == "classification" else scores


# ---------------------------------------------------------------------------------------------
# Objective perturbation (classification).


def _loss(loss: str, margins: np.ndarray, h: float) -> tuple[np.ndarray, np.ndarray]:
    """The loss of each margin z = y w.x and its derivative."""
    if loss == "logistic":
        return np.logaddexp(0.0, -margins), -expit(-margins)
    value = np.where(margins > 1 + h, 0.0, np.where(margins < 1 - h, 1 - margins, (1 + h - margins) ** 2 / (4 * h)))
    slope = np.where(margins > 1 + h, 0.0, np.where(margins < 1 - h, -1.0, -(1 + h - margins) / (2 * h)))
    return value, slope


def _curvature(loss: str, h: float) -> float:
    """c, the bound on the loss's second derivative."""
    return 0.25 if loss == "logistic" else 1.0 / (2 * h)


def _classifier_inputs(X, y, norm_bound, fit_intercept, where):
    rows = real_matrix(X, "X", where)
    labels = real_vector(y, "y", where, size=rows.shape[0])
    if not np.isin(labels, (-1.0, 1.0)).all():
        raise ValueError(f"The 'y' parameter of {where} must hold labels -1 and +1. "
                         f"Got {float(labels[~np.isin(labels, (-1.0, 1.0))][0])!r} instead.")
    return _unit_rows(rows, norm_bound, fit_intercept, where), labels


def _unit_rows(rows: np.ndarray, norm_bound: Any, fit_intercept: Any, where: str) -> np.ndarray:
    """Rows divided by the public ``norm_bound`` and clipped to norm 1; with an intercept, a constant
    column is appended and the rows divided by sqrt(2), so that every row keeps norm <= 1."""
    norm_bound = positive_real(norm_bound, "norm_bound", where)
    if not isinstance(fit_intercept, bool):
        raise fail(TypeError, "fit_intercept", where, "a bool", fit_intercept)
    scaled = rows / norm_bound
    norms = np.linalg.norm(scaled, axis=1, keepdims=True)
    scaled = scaled / np.maximum(norms, 1.0)
    if fit_intercept:
        scaled = np.hstack([scaled, np.ones((scaled.shape[0], 1))]) / math.sqrt(2)
    return scaled


def _raw_model(w: np.ndarray, norm_bound: float, fit_intercept: bool, **fields) -> LinearModel:
    if fit_intercept:
        return LinearModel(coef=w[:-1] / (norm_bound * math.sqrt(2)), intercept=float(w[-1] / math.sqrt(2)), **fields)
    return LinearModel(coef=w / norm_bound, intercept=0.0, **fields)


def _minimise(Z: np.ndarray, y: np.ndarray, loss: str, h: float, ridge: float, linear: np.ndarray) -> np.ndarray:
    """argmin mean loss(y w.z) + ridge/2 ||w||^2 + linear.w (strongly convex, smooth)."""
    n = Z.shape[0]

    def objective(w):
        value, slope = _loss(loss, y * (Z @ w), h)
        return (value.mean() + 0.5 * ridge * w @ w + linear @ w,
                Z.T @ (slope * y) / n + ridge * w + linear)

    result = minimize(objective, np.zeros(Z.shape[1]), jac=True, method="L-BFGS-B",
                      options={"maxiter": 10_000, "gtol": 1e-10, "ftol": 1e-15})
    return result.x


def _check_loss_args(loss, regularization, huber_h, where):
    loss = choice(loss, LOSSES, "loss", where)
    regularization = positive_real(regularization, "regularization", where)
    huber_h = positive_real(huber_h, "huber_h", where)
    return loss, regularization, huber_h


def objective_perturbation(X: Any, y: Any, *, loss: str, epsilon: float, regularization: float,
                           rng: np.random.Generator, huber_h: float = 0.5, norm_bound: float = 1.0,
                           fit_intercept: bool = True) -> LinearModel:
    """An epsilon-DP linear classifier by objective perturbation (Chaudhuri et al. 2011, Algorithm 2).

    ``loss``: "logistic" (logistic regression) or "huber" (linear SVM, Huber hinge of width
    ``huber_h``). ``regularization``: Lambda. Rows are divided by the public ``norm_bound`` and
    clipped to norm 1 (with an intercept, a constant column is added and rows scaled by 1/sqrt(2)).
    """
    where = "objective_perturbation"
    loss, regularization, huber_h = _check_loss_args(loss, regularization, huber_h, where)
    epsilon = positive_real(epsilon, "epsilon", where)
    rng = generator(rng, where)
    Z, labels = _classifier_inputs(X, y, norm_bound, fit_intercept, where)
    n, dim = Z.shape
    c = _curvature(loss, huber_h)
    eps_prime = epsilon - math.log1p(2 * c / (n * regularization) + (c / (n * regularization)) ** 2)
    extra = 0.0
    if eps_prime <= 0:
        extra = c / (n * math.expm1(epsilon / 4)) - regularization
        eps_prime = epsilon / 2
    direction = rng.normal(size=dim)
    b = rng.gamma(shape=dim, scale=2.0 / eps_prime) * direction / np.linalg.norm(direction)
    w = _minimise(Z, labels, loss, huber_h, regularization + extra, b / n)
    return _raw_model(w, float(norm_bound), fit_intercept, task="classification", epsilon=epsilon,
                      mechanism=f"objective_perturbation.{loss}")


def erm_classifier(X: Any, y: Any, *, loss: str, regularization: float, huber_h: float = 0.5,
                   norm_bound: float = 1.0, fit_intercept: bool = True) -> LinearModel:
    """The same regularised fit without noise (not private: epsilon = inf), as a reference."""
    where = "erm_classifier"
    loss, regularization, huber_h = _check_loss_args(loss, regularization, huber_h, where)
    Z, labels = _classifier_inputs(X, y, norm_bound, fit_intercept, where)
    w = _minimise(Z, labels, loss, huber_h, regularization, np.zeros(Z.shape[1]))
    return _raw_model(w, float(norm_bound), fit_intercept, task="classification", epsilon=math.inf, mechanism="none")


# ---------------------------------------------------------------------------------------------
# Functional mechanism (linear regression).


def _bounds(value: Any, name: str, where: str, count: int | None) -> np.ndarray:
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(TypeError, name, where, "(lo, hi) pairs of real numbers", value) from None
    shape_ok = array.ndim == 2 and array.shape[1] == 2 and (count is None or array.shape[0] == count)
    if not shape_ok or not np.isfinite(array).all() or (array[:, 0] > array[:, 1]).any():
        expected = f"{count} finite (lo, hi) pairs with lo <= hi" if count is not None else "finite (lo, hi) pairs with lo <= hi"
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
    quadratic = [_square_range(x_bounds[j]) if j == l else _product_range(x_bounds[j], x_bounds[l])
                 for j, l in zip(*np.triu_indices(dim))]
    return np.array(linear + quadratic)


def _regression_bounds(x_bounds, y_bounds, fit_intercept, where, count=None):
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


def _regression_inputs(X, y, x_bounds, y_bounds, fit_intercept, where):
    rows = real_matrix(X, "X", where)
    labels = real_vector(y, "y", where, size=rows.shape[0])
    xb, yb = _regression_bounds(x_bounds, y_bounds, fit_intercept, where, rows.shape[1])
    Z = np.clip(rows, xb[: rows.shape[1], 0], xb[: rows.shape[1], 1])
    if fit_intercept:
        Z = np.hstack([Z, np.ones((Z.shape[0], 1))])
    return Z, np.clip(labels, yb[0], yb[1]), xb, yb


def functional_mechanism(X: Any, y: Any, *, epsilon: float, x_bounds: Any, y_bounds: Any, rng: np.random.Generator,
                         regularization: float = 1e-3, fit_intercept: bool = True, secure: bool = False) -> LinearModel:
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


def erm_regressor(X: Any, y: Any, *, x_bounds: Any, y_bounds: Any, regularization: float = 1e-3,
                  fit_intercept: bool = True) -> LinearModel:
    """The same ridge fit without noise (not private: epsilon = inf), as a reference."""
    where = "erm_regressor"
    regularization = positive_real(regularization, "regularization", where)
    Z, labels, _, _ = _regression_inputs(X, y, x_bounds, y_bounds, fit_intercept, where)
    w = _ridge_solve(Z.T @ Z, Z.T @ labels, Z.shape[0], regularization)
    return _linear_model(w, fit_intercept, epsilon=math.inf, mechanism="none")


def _linear_model(w: np.ndarray, fit_intercept: bool, **fields) -> LinearModel:
    if fit_intercept:
        return LinearModel(coef=w[:-1], intercept=float(w[-1]), task="regression", **fields)
    return LinearModel(coef=w, intercept=0.0, task="regression", **fields)


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
