"""``occupancy``: the occupancy-detection data. The training file is the owners' (group 1), the
two test files the consumer's (group 0), the paper's split. Features: Temperature, Humidity,
Light, CO2, HumidityRatio; label: Occupancy. Reads the registered dataset ``occupancy``."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.sources.uniform import two_groups
from marketplace.datasets import read_bytes

DATASET = "occupancy"
OWNERS = ("datatraining.txt",)
CONSUMER = ("datatest.txt", "datatest2.txt")
FEATURES = ("Temperature", "Humidity", "Light", "CO2", "HumidityRatio")


@dataclass(frozen=True)
class OccupancySource:
    """No options."""


def _read(name: str) -> tuple[np.ndarray, np.ndarray]:
    reader = csv.reader(io.StringIO(read_bytes(DATASET, name).decode("utf-8")))
    header = next(reader, [])
    missing = [c for c in (*FEATURES, "Occupancy") if c not in header]
    if missing:
        raise ValueError(f"{DATASET}/{name}: no column named {missing}; the header has {header}")
    positions = [header.index(c) + 1 for c in (*FEATURES, "Occupancy")]  # rows carry a row number first
    rows = []
    for row in reader:
        if not row:
            continue
        if len(row) != len(header) + 1:
            raise ValueError(f"{DATASET}/{name}, line {reader.line_num}: {len(row)} fields, expected {len(header) + 1}")
        rows.append([float(row[i]) for i in positions])
    table = np.array(rows, dtype=np.float64)
    return table[:, :-1], table[:, -1]


def occupancy(cfg: OccupancySource, rng: np.random.Generator | None = None) -> Dataset:
    parts = [(_read(name), g) for g, names in enumerate((CONSUMER, OWNERS)) for name in names]
    X = np.vstack([p[0][0] for p in parts])
    y = np.concatenate([p[0][1] for p in parts])
    group = np.concatenate([np.full(len(p[0][1]), p[1]) for p in parts])
    return two_groups(X, y, group, FEATURES, "occupancy")


SOURCE = Source(
    kind="occupancy",
    options=OccupancySource,
    load=occupancy,
    datasets=lambda cfg: (DATASET,),
    summary="occupancy detection (training file to owners, test files to the consumer)",
)
