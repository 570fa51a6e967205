"""An owner's embedded rows are computed once per process for the same dataset and h1 map (an agent
serving session after session), read-only, and dropped with their dataset."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from marketplace.data.dataset import Dataset
from marketplace.protocols.summarize.features import RandomFourierFeatures
from marketplace.protocols.summarize.identity import duplicate_groups
from marketplace.protocols.summarize.owner_rows import _KEPT, owner_rows


def dataset(rows: np.ndarray) -> Dataset:
    n, dim = rows.shape
    return Dataset(
        X=rows,
        y=np.arange(n) % 2,
        group=np.zeros(n, dtype=np.int64),
        feature_names=tuple(f"f{i}" for i in range(dim)),
        group_names=("g",),
        name="rows",
    )


def test_the_same_dataset_and_map_give_the_same_rows_once_and_read_only():
    data = dataset(np.vstack([np.random.default_rng(1).normal(size=(5, 3)), np.zeros((2, 3))]))
    features = RandomFourierFeatures.draw(3, 8, 0.5, 7)
    first = owner_rows(data, features, "float64")
    assert np.array_equal(first.phi, features.transform(data.X))
    assert np.array_equal(first.same_content, duplicate_groups(data.X, data.y))
    assert owner_rows(data, features, "float64").phi is first.phi  # kept, not computed again
    with pytest.raises(ValueError):
        first.phi[0, 0] = 1.0
    other = RandomFourierFeatures.draw(3, 8, 0.5, 8)  # another map: embedded again
    assert np.array_equal(owner_rows(data, other, "float64").phi, other.transform(data.X))
    assert owner_rows(data, other, "float32").phi.dtype == np.float32
    key = id(data)
    del data, first
    gc.collect()
    assert key not in _KEPT  # gone with its dataset
