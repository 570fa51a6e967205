"""Logistic regression on a weighted log-loss whose weights may be negative (implicit M²M).

Implicit M²M turns a sketch into one weight per synthetic point, w(x~) = Phi(x~)^T S z, and fits
a model by minimising sum_i w_i loss(x~_i). The weights are signed, so the usual solvers do not
apply as documented (scikit-learn's LogisticRegression accepts negative ``sample_weight`` without a
word, but its solvers assume a convex objective). Here the objective is written out:

    L(beta, b) = (1/n) sum_i w_i [log(1 + exp(t_i)) - y_i t_i] + (l2/2) ||beta||^2,  t_i = x_i . beta + b,

and minimised with scipy's L-BFGS-B with its exact gradient. With negative weights L need not be
convex, but each log-loss grows at most linearly in (beta, b) while the penalty grows
quadratically in beta, so L is bounded below on beta; ``l2`` must therefore be positive. The
intercept is not penalised; if it runs away (it can, when the weights of one class sum to a
negative number), the result says so through ``converged``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._checks import as_finite_array, check_int, check_positive

__all__ = ["LogisticModel", "weighted_logistic_regression"]


@dataclass(frozen=True, eq=False)
class LogisticModel:
    """A fitted logistic model P(y = 1 | x) = sigmoid(x . coef + intercept)."""

    coef: np.ndarray
    intercept: float
    converged: bool
    n_iter: int
    message: str = ""

    def decision_function(self, X: ArrayLike) -> np.ndarray:
        X = as_finite_array("LogisticModel.decision_function", "X", X, ndim=2)
        if X.shape[1] != self.coef.size:
            raise ValueError(
                f"The 'X' parameter of LogisticModel.decision_function must have {self.coef.size} "
                f"columns. Got shape {X.shape} instead."
            )
        return X @ self.coef + self.intercept

    def predict_proba(self, X: ArrayLike) -> np.ndarray:
        """P(y = 1 | x) for every row."""
        from scipy.special import expit

        return expit(self.decision_function(X))

    def predict(self, X: ArrayLike) -> np.ndarray:
        return (self.decision_function(X) > 0).astype(np.int64)


def weighted_logistic_regression(
    X: ArrayLike, y: ArrayLike, weights: ArrayLike, *, l2: float = 1e-3, max_iter: int = 1000
) -> LogisticModel:
    """Minimise the signed-weight log-loss of the module docstring over (coef, intercept)."""
    owner = "weighted_logistic_regression"
    X = as_finite_array(owner, "X", X, ndim=2)
    y = as_finite_array(owner, "y", y, ndim=1)
    w = as_finite_array(owner, "weights", weights, ndim=1)
    if y.shape[0] != X.shape[0] or w.shape[0] != X.shape[0] or X.shape[0] == 0:
        raise ValueError(
            f"The 'y' and 'weights' parameters of {owner} must have one value per row of X "
            f"({X.shape[0]} > 0). Got {y.shape[0]} and {w.shape[0]} instead."
        )
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(
            f"The 'y' parameter of {owner} must hold 0/1 labels. Got values {np.unique(y)[:5].tolist()} instead."
        )
    l2 = check_positive(owner, "l2", l2)
    max_iter = check_int(owner, "max_iter", max_iter)
    n, d = X.shape
    from scipy.optimize import minimize  # here, not at import: scipy.optimize costs ~0.3 s, needed only here
    from scipy.special import expit

    def objective(params: np.ndarray) -> tuple[float, np.ndarray]:
        beta, b = params[:d], params[d]
        t = X @ beta + b
        loss = np.logaddexp(0.0, t) - y * t
        residual = w * (expit(t) - y)
        value = float(w @ loss) / n + 0.5 * l2 * float(beta @ beta)
        grad = np.empty(d + 1)
        grad[:d] = X.T @ residual / n + l2 * beta
        grad[d] = residual.sum() / n
        return value, grad

    result = minimize(
        objective, np.zeros(d + 1), jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": 1e-8}
    )
    params = result.x
    return LogisticModel(
        coef=params[:d].copy(),
        intercept=float(params[d]),
        converged=bool(result.success),
        n_iter=int(result.nit),
        message=str(result.message),
    )
