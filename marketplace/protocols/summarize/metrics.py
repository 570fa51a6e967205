"""Downstream quality of a summary: accuracy of a linear SVM trained on it, tested on target data."""

from __future__ import annotations

import numpy as np

#: Generous iteration cap so that standardized, small training sets converge without warnings.
SVM_MAX_ITER = 10_000


def svm_accuracy(
    train_X: np.ndarray,
    train_y: np.ndarray,
    test_X: np.ndarray,
    test_y: np.ndarray,
    *,
    C: float = 1.0,
    seed: int = 0,
) -> float:
    """Fraction of test points a standardized LinearSVC(C) trained on (train_X, train_y) gets right.

    A summary may hold a single class (small p, strong shift); the classifier then predicts that class
    everywhere instead of failing. An empty training or test set is an error.
    """
    # imported here so that processes that never score a summary do not pay scikit-learn's import
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import LinearSVC

    train_X, test_X = np.asarray(train_X, dtype=np.float64), np.asarray(test_X, dtype=np.float64)
    train_y, test_y = np.asarray(train_y), np.asarray(test_y)
    if train_X.ndim != 2 or train_y.shape != (train_X.shape[0],):
        raise ValueError(f"train_X must be (n, dim) with one label per row; got {train_X.shape}, {train_y.shape}")
    if test_X.ndim != 2 or test_y.shape != (test_X.shape[0],):
        raise ValueError(f"test_X must be (n, dim) with one label per row; got {test_X.shape}, {test_y.shape}")
    if train_X.shape[0] == 0:
        raise ValueError("svm_accuracy needs at least one training point")
    if test_X.shape[0] == 0:
        raise ValueError("svm_accuracy needs at least one test point")
    if train_X.shape[1] != test_X.shape[1]:
        raise ValueError(f"train and test points differ in dimension: {train_X.shape[1]} vs {test_X.shape[1]}")

    classes = np.unique(train_y)
    if classes.size == 1:
        return float(np.mean(test_y == classes[0]))
    model = make_pipeline(StandardScaler(), LinearSVC(C=C, dual="auto", random_state=seed, max_iter=SVM_MAX_ITER))
    model.fit(train_X, train_y)
    return float(np.mean(model.predict(test_X) == test_y))


def increase_pct(value: float | None, reference: float | None) -> float | None:
    """How many percent ``value`` is over ``reference`` (negative: under it); None when either is
    missing or the reference is 0. The report and the sweeps compare a method's MMD^2 with greedy's so."""
    if value is None or reference is None or reference == 0:
        return None
    return 100.0 * (value / reference - 1.0)
