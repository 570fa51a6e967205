"""The models an agent trains and how they are scored (the ERM tasks of the paper's experiments).

Every agent turns rows into a design matrix with the public schema (numeric attributes scaled to
[0, 1] by their public range, categorical ones one-hot) and fits a scikit-learn model: logistic
regression, a linear SVM, or linear regression on the label scaled to [0, 1] by its public range.
A fitted model is kept as a :class:`Fitted` (weights and intercept on that design), which is all
a report needs to score it later on a test set.

Errors: the misclassification rate for classification; for regression the mean squared error on
the scaled label, predictions clipped to [0, 1] (the public label range: post-processing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .schema import ClassLabels, PublicSchema

__all__ = ["MODELS", "Fitted", "fit_model", "model_error", "task_of", "scaled_labels"]

MODELS = ("logistic", "svm", "linear")


def task_of(model: str) -> str:
    if model not in MODELS:
        raise ValueError(f"The 'model' parameter must be one of {list(MODELS)}. Got {model!r} instead.")
    return "regression" if model == "linear" else "classification"


@dataclass(frozen=True, eq=False)
class Fitted:
    """A linear model on ``schema.to_features`` rows: w.x + b (classification: code 1 when > 0)."""

    coef: np.ndarray
    intercept: float
    task: str

    def predict(self, features: np.ndarray) -> np.ndarray:
        score = features @ self.coef + self.intercept
        if self.task == "classification":
            return (score > 0).astype(np.int64)
        return np.clip(score, 0.0, 1.0)

    def to_plain(self) -> dict[str, Any]:
        return {"coef": self.coef.tolist(), "intercept": self.intercept, "task": self.task}

    @classmethod
    def from_plain(cls, plain: dict[str, Any]) -> Fitted:
        return cls(
            coef=np.asarray(plain["coef"], dtype=np.float64), intercept=float(plain["intercept"]), task=plain["task"]
        )


def scaled_labels(schema: PublicSchema, y: Any) -> np.ndarray:
    """Targets of the fit: class codes (0/1), or real labels scaled to [0, 1] by the public range."""
    if isinstance(schema.label, ClassLabels):
        return schema.encode_labels(y)
    label = schema.label
    return (np.asarray(y, dtype=np.float64) - label.lo) / (label.hi - label.lo)


def fit_model(model: str, schema: PublicSchema, X: np.ndarray, y: Any, *, seed: int = 0) -> Fitted:
    """Fit ``model`` on rows ``X`` (schema order) and labels ``y`` (as the schema's label says)."""
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.svm import LinearSVC

    task = task_of(model)
    if task == "classification" and not isinstance(schema.label, ClassLabels):
        raise ValueError(f"model {model!r} is a classifier but the table's label is a regression label")
    if task == "regression" and isinstance(schema.label, ClassLabels):
        raise ValueError("model 'linear' is a regressor but the table's label is a class label")
    features = schema.to_features(X)
    target = scaled_labels(schema, y)
    width = features.shape[1]
    if task == "classification":
        if schema.n_codes != 2:
            raise ValueError(f"pfds models are binary classifiers; the table has {schema.n_codes} classes")
        classes = np.unique(target)
        if classes.size < 2:  # one class only: a constant predictor
            return Fitted(coef=np.zeros(width), intercept=1.0 if classes.size and classes[0] == 1 else -1.0, task=task)
        if model == "logistic":
            fitted = LogisticRegression(C=1.0, max_iter=2000).fit(features, target)
        else:
            fitted = LinearSVC(C=1.0, dual=False, max_iter=5000, random_state=seed).fit(features, target)
        return Fitted(coef=fitted.coef_.ravel().astype(np.float64), intercept=float(fitted.intercept_[0]), task=task)
    fitted = LinearRegression().fit(features, target)
    return Fitted(coef=np.asarray(fitted.coef_, dtype=np.float64), intercept=float(fitted.intercept_), task=task)


def model_error(fitted: Fitted, schema: PublicSchema, X: np.ndarray, y: Any) -> float:
    """Misclassification rate, or MSE on the scaled label, of ``fitted`` on rows ``X`` and labels ``y``."""
    prediction = fitted.predict(schema.to_features(X))
    target = scaled_labels(schema, y)
    if fitted.task == "classification":
        return float(np.mean(prediction != target))
    return float(np.mean((prediction - target) ** 2))
