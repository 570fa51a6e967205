"""``lifesci``: ds1.10 (26,733 rows, 10 principal components, a 0/1 label, no header), the M²M
paper's LifeSci. A random ``consumer_rows`` of them (drawn from the source stream) form group 0
(``consumer``), the rest group 1 (``owners``). Reads the registered dataset ``lifesci_ds1.10``."""

from __future__ import annotations

import bz2
import io
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.sources.uniform import two_groups
from marketplace.datasets import read_bytes
from marketplace.schema import Range

DATASET = "lifesci_ds1.10"
FILE = "ds1.10.csv.bz2"


@dataclass(frozen=True)
class LifeSciSource:
    consumer_rows: Annotated[int, Range(min=1)] = 1000


def lifesci(cfg: LifeSciSource, rng: np.random.Generator) -> Dataset:
    table = np.loadtxt(io.BytesIO(bz2.decompress(read_bytes(DATASET, FILE))), delimiter=",", ndmin=2)
    if table.shape[1] != 11 or not np.isfinite(table).all():
        raise ValueError(
            f"{DATASET}/{FILE}: expected 11 finite numeric columns (10 attributes and a 0/1 label), "
            f"got shape {table.shape}"
        )
    if cfg.consumer_rows >= len(table):
        raise ValueError(
            f"data.source.lifesci.consumer_rows: {cfg.consumer_rows} must be below the {len(table)} rows of {DATASET}"
        )
    group = np.ones(len(table))
    group[rng.choice(len(table), size=cfg.consumer_rows, replace=False)] = 0
    return two_groups(table[:, :10], table[:, 10], group, tuple(f"pc{j + 1}" for j in range(10)), "lifesci")


SOURCE = Source(
    kind="lifesci",
    options=LifeSciSource,
    load=lifesci,
    datasets=lambda cfg: (DATASET,),
    summary="LifeSci ds1.10 (10 principal components, 0/1 label)",
)
