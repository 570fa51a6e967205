"""``uniform``: rows uniform on [0, 1]^dim (the M²M paper's Random10 for rows = 27,000, dim = 10).

Two groups, ``consumer`` (0) and ``owners`` (1): a scenario gives the consumer group 0
(``data.consumer.target_groups: [0]``) and the owners group 1 (``data.partition.groups: [1]``).
The label is 1 when the attributes sum above dim / 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.schema import Range

GROUPS = ("consumer", "owners")
"""The two groups of the sketch sources (uniform, lifesci, occupancy)."""


@dataclass(frozen=True)
class UniformSource:
    """``rows`` owner rows and ``consumer_rows`` consumer rows, uniform on [0, 1]^dim."""

    rows: Annotated[int, Range(min=1)] = 27_000
    dim: Annotated[int, Range(min=1, max=10_000)] = 10
    consumer_rows: Annotated[int, Range(min=1)] = 1000


def two_groups(X: np.ndarray, y: np.ndarray, group: np.ndarray, names: tuple[str, ...], name: str) -> Dataset:
    """A dataset with the consumer / owners groups of the sketch sources."""
    return Dataset(
        X=X, y=y.astype(np.int64), group=group.astype(np.int64), feature_names=names, group_names=GROUPS, name=name
    )


def uniform(cfg: UniformSource, rng: np.random.Generator) -> Dataset:
    n = cfg.rows + cfg.consumer_rows
    X = rng.random((n, cfg.dim))
    y = X.sum(axis=1) > cfg.dim / 2
    group = np.r_[np.zeros(cfg.consumer_rows), np.ones(cfg.rows)]
    return two_groups(X, y, group, tuple(f"u{j}" for j in range(cfg.dim)), "uniform")


SOURCE = Source(
    kind="uniform", options=UniformSource, load=uniform, summary="rows uniform on the unit box (M²M's Random10)"
)
