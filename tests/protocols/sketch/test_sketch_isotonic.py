"""The consumer's isotonic regression without scikit-learn (marketplace.protocols.sketch.isotonic):
the numbers of scikit-learn's IsotonicRegression, bit for bit, so reports do not change with it."""

from __future__ import annotations

import numpy as np
import pytest

from marketplace.protocols.sketch.isotonic import isotonic_fit_transform

IsotonicRegression = pytest.importorskip("sklearn.isotonic").IsotonicRegression


def case(rng: np.random.Generator, trial: int) -> tuple[np.ndarray, np.ndarray]:
    """Points of four kinds (scattered, tied, sorted, the moments' orders) and values in and out of the bounds."""
    n = int(rng.integers(1, 25))
    x = [
        rng.uniform(-3, 3, n),
        rng.integers(0, 5, n).astype(float),
        np.sort(rng.uniform(0, 1, n)),
        np.arange(3, 3 + n, dtype=float),
    ][trial % 4]
    y = rng.normal(0.5, 0.6, n) if trial % 3 else np.round(rng.uniform(-0.2, 1.2, n), 2)
    return x, y


@pytest.mark.parametrize("increasing", [True, False])
def test_the_fit_is_scikit_learns_bit_for_bit(increasing):
    rng = np.random.default_rng(5)
    for trial in range(1500):
        x, y = case(rng, trial)
        top = 1.0 if trial % 5 else float(abs(rng.normal()))
        want = IsotonicRegression(y_min=0.0, y_max=top, increasing=increasing).fit_transform(x, y)
        got = isotonic_fit_transform(x, y, y_min=0.0, y_max=top, increasing=increasing)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes(), (x, y, got, want)


def test_the_fit_is_monotone_and_bounded():
    rng = np.random.default_rng(1)
    x = rng.uniform(0, 1, 40)
    got = isotonic_fit_transform(x, rng.normal(0.5, 1.0, 40), y_min=0.0, y_max=1.0, increasing=True)
    steps = got[np.argsort(x, kind="stable")]
    assert np.all(np.diff(steps) >= 0) and got.min() >= 0.0 and got.max() <= 1.0


def test_mismatched_or_empty_input_is_refused():
    with pytest.raises(ValueError):
        isotonic_fit_transform(np.zeros(2), np.zeros(3), y_min=0.0, y_max=1.0, increasing=True)
    with pytest.raises(ValueError):
        isotonic_fit_transform(np.zeros(0), np.zeros(0), y_min=0.0, y_max=1.0, increasing=True)
