"""``digits``: scikit-learn's bundled 8x8 digits (1,797 x 64, scaled to [0, 1]); the group of a
row is its digit. No download needed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source


@dataclass(frozen=True)
class DigitsSource:
    """No options."""


def digits(cfg: DigitsSource, rng: np.random.Generator) -> Dataset:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    y = bunch.target.astype(np.int64)
    return Dataset(
        X=bunch.data / 16.0,
        y=y,
        group=y,
        feature_names=tuple(bunch.feature_names),
        group_names=tuple(f"digit-{d}" for d in range(10)),
        name="digits",
    )


SOURCE = Source(kind="digits", options=DigitsSource, load=digits, summary="scikit-learn's bundled 8x8 digits")
