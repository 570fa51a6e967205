"""``stc_synthetic``: one of the STC paper's three 2-D source/target sets (1 gaussians, 2 grid,
3 random). Group 0 is the source population, group 1 the target; the label of a point is the
cluster it was drawn from. The generator's public box is in :mod:`marketplace.protocols.stc.synthetic`.
The `stc` protocol declares this source (its spec's ``data_sources``); any scenario may use it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.schema import Range

from .synthetic import synthetic_dataset


@dataclass(frozen=True)
class StcSyntheticSource:
    """Options of ``data.source.stc_synthetic``: which of the three sets, and how many points of each side."""

    which: Literal[1, 2, 3] = 2
    n_source: Annotated[int, Range(min=1)] = 1000
    n_target: Annotated[int, Range(min=1)] = 1000


def stc_synthetic(cfg: StcSyntheticSource, rng: np.random.Generator) -> Dataset:
    """The chosen set, source rows (group 0) then target rows (group 1), drawn with a seed taken from ``rng``."""
    data = synthetic_dataset(cfg.which, seed=int(rng.integers(2**63 - 1)), n_source=cfg.n_source, n_target=cfg.n_target)
    X = np.vstack([data.source, data.target])
    y = np.concatenate([data.source_clusters, data.target_clusters]).astype(np.int64)
    group = np.repeat([0, 1], [len(data.source), len(data.target)])
    return Dataset(
        X=X,
        y=y,
        group=group,
        feature_names=("x0", "x1"),
        group_names=("source", "target"),
        name=f"stc_synthetic/{data.name}",
    )


SOURCE = Source(
    kind="stc_synthetic",
    options=StcSyntheticSource,
    load=stc_synthetic,
    summary="the STC paper's generated 2-D source/target sets",
)
