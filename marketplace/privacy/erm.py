"""Differentially private empirical risk minimisation for linear classifiers, by objective perturbation.

Chaudhuri, Monteleoni and Sarwate, "Differentially Private Empirical Risk Minimization" (JMLR,
2011), Algorithm 2, for logistic regression and for a linear SVM with the Huber-smoothed hinge loss
(the hinge itself is not differentiable, which the method needs). With rows of norm <= 1, a loss
whose derivative is bounded by 1 and whose second derivative is bounded by c (1/4 for the logistic
loss, 1/(2h) for the Huber loss of width h) and the regulariser Lambda/2 ||w||^2, it minimises
mean loss + (Lambda + Delta)/2 ||w||^2 + b.w / n, where b has density ∝ exp(-eps' ||b|| / 2)
(norm ~ Gamma(dim, 2/eps'), uniform direction) and eps' = eps - log(1 + 2c/(n Lambda) +
c^2/(n Lambda)^2); when that is not positive, Delta = c/(n (e^(eps/4) - 1)) - Lambda and
eps' = eps/2. The result is eps-DP for datasets differing in one row (replaced).

diffprivlib's LogisticRegression implements the same method, but diffprivlib 0.6.6 does not import
with scikit-learn 1.9 (``sklearn.tree._tree`` no longer exports ``DOUBLE``), so it is written here;
the Gamma-norm noise has no counterpart in :mod:`marketplace.privacy.mechanisms` and is drawn from
``rng`` (simulation only). :func:`erm_classifier` is the same fit without noise, a non-private
reference. Labels are -1 and +1; every model carries the epsilon it cost (``math.inf`` for the
non-private fit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from marketplace.checks import choice, fail, generator, positive_real, real_matrix, real_vector

__all__ = ["LOSSES", "LinearModel", "erm_classifier", "objective_perturbation"]

LOSSES = ("logistic", "huber")
"""The losses :func:`objective_perturbation` takes: logistic regression, and the Huber-smoothed hinge (linear SVM)."""


@dataclass(frozen=True, eq=False)
class LinearModel:
    """w.x + b on raw features: a classifier (sign, labels -1/+1) or a regressor, with its cost."""

    coef: np.ndarray
    intercept: float
    task: str
    epsilon: float
    mechanism: str

    def decision_function(self, X: Any) -> np.ndarray:
        """w.x + b for each row of X."""
        rows = real_matrix(X, "X", "LinearModel.decision_function", columns=self.coef.size, allow_empty=True)
        return rows @ self.coef + self.intercept

    def predict(self, X: Any) -> np.ndarray:
        """The class (-1/+1, sign of the score) of each row, or the regressor's value."""
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


def _classifier_inputs(
    X: Any, y: Any, norm_bound: Any, fit_intercept: Any, where: str
) -> tuple[np.ndarray, np.ndarray]:
    rows = real_matrix(X, "X", where)
    labels = real_vector(y, "y", where, size=rows.shape[0])
    if not np.isin(labels, (-1.0, 1.0)).all():
        raise ValueError(
            f"The 'y' parameter of {where} must hold labels -1 and +1. "
            f"Got {float(labels[~np.isin(labels, (-1.0, 1.0))][0])!r} instead."
        )
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


def _raw_model(
    w: np.ndarray, norm_bound: float, fit_intercept: bool, *, task: str, epsilon: float, mechanism: str
) -> LinearModel:
    if fit_intercept:
        coef, intercept = w[:-1] / (norm_bound * math.sqrt(2)), float(w[-1] / math.sqrt(2))
    else:
        coef, intercept = w / norm_bound, 0.0
    return LinearModel(coef=coef, intercept=intercept, task=task, epsilon=epsilon, mechanism=mechanism)


def _minimise(Z: np.ndarray, y: np.ndarray, loss: str, h: float, ridge: float, linear: np.ndarray) -> np.ndarray:
    """argmin mean loss(y w.z) + ridge/2 ||w||^2 + linear.w (strongly convex, smooth)."""
    n = Z.shape[0]

    def objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        value, slope = _loss(loss, y * (Z @ w), h)
        return (value.mean() + 0.5 * ridge * w @ w + linear @ w, Z.T @ (slope * y) / n + ridge * w + linear)

    result = minimize(
        objective,
        np.zeros(Z.shape[1]),
        jac=True,
        method="L-BFGS-B",
        options={"maxiter": 10_000, "gtol": 1e-10, "ftol": 1e-15},
    )
    return result.x


def _check_loss_args(loss: Any, regularization: Any, huber_h: Any, where: str) -> tuple[str, float, float]:
    loss = choice(loss, LOSSES, "loss", where)
    regularization = positive_real(regularization, "regularization", where)
    huber_h = positive_real(huber_h, "huber_h", where)
    return loss, regularization, huber_h


def objective_perturbation(
    X: Any,
    y: Any,
    *,
    loss: str,
    epsilon: float,
    regularization: float,
    rng: np.random.Generator,
    huber_h: float = 0.5,
    norm_bound: float = 1.0,
    fit_intercept: bool = True,
) -> LinearModel:
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
    return _raw_model(
        w,
        float(norm_bound),
        fit_intercept,
        task="classification",
        epsilon=epsilon,
        mechanism=f"objective_perturbation.{loss}",
    )


def erm_classifier(
    X: Any,
    y: Any,
    *,
    loss: str,
    regularization: float,
    huber_h: float = 0.5,
    norm_bound: float = 1.0,
    fit_intercept: bool = True,
) -> LinearModel:
    """The same regularised fit without noise (not private: epsilon = inf), as a reference."""
    where = "erm_classifier"
    loss, regularization, huber_h = _check_loss_args(loss, regularization, huber_h, where)
    Z, labels = _classifier_inputs(X, y, norm_bound, fit_intercept, where)
    w = _minimise(Z, labels, loss, huber_h, regularization, np.zeros(Z.shape[1]))
    return _raw_model(w, float(norm_bound), fit_intercept, task="classification", epsilon=math.inf, mechanism="none")
