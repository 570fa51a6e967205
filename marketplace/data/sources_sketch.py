"""Data sources of the sketch experiments (M²M paper): uniform data, LifeSci and Occupancy.

Each source has two groups, ``consumer`` (0) and ``owners`` (1), so a scenario gives the consumer
group 0 (``data.consumer.target_groups: [0]``) and the owners group 1 (``data.partition.groups:
[1]``): the owners then hold exactly the paper's dataset and the consumer its own rows.

* ``uniform``: ``rows`` owner rows and ``consumer_rows`` consumer rows, uniform on [0, 1]^dim (the
  paper's Random10 for rows = 27,000, dim = 10). Label: 1 when the attributes sum above dim / 2.
* ``lifesci``: ds1.10 (26,733 rows, 10 principal components, a 0/1 label, no header); a random
  ``consumer_rows`` of them (drawn from the source stream) go to the consumer.
* ``occupancy``: the occupancy-detection data; the training file is the owners', the two test
  files the consumer's (the paper's split). Features: Temperature, Humidity, Light, CO2,
  HumidityRatio; label: Occupancy.
"""

from __future__ import annotations

import bz2
import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.schema import Range, SchemaError

GROUPS = ("consumer", "owners")
LIFESCI_FILE = "ds1.10.csv.bz2"
OCCUPANCY_OWNERS = ("datatraining.txt",)
OCCUPANCY_CONSUMER = ("datatest.txt", "datatest2.txt")
OCCUPANCY_FEATURES = ("Temperature", "Humidity", "Light", "CO2", "HumidityRatio")


@dataclass(frozen=True)
class UniformSource:
    """Rows uniform on [0, 1]^dim: ``rows`` for the owners, ``consumer_rows`` for the consumer."""

    rows: Annotated[int, Range(min=1)] = 27_000
    dim: Annotated[int, Range(min=1, max=10_000)] = 10
    consumer_rows: Annotated[int, Range(min=1)] = 1000


@dataclass(frozen=True)
class LifeSciSource:
    """LifeSci (ds1.10.csv.bz2 in ``root``); ``consumer_rows`` random rows go to the consumer."""

    root: str
    consumer_rows: Annotated[int, Range(min=1)] = 1000


@dataclass(frozen=True)
class OccupancySource:
    """Occupancy detection (the three .txt files in ``root``)."""

    root: str


def check_available(kind: str, cfg, path: str) -> None:
    """SchemaError when a file the source reads is missing (no file is read)."""
    names = {"lifesci": (LIFESCI_FILE,), "occupancy": OCCUPANCY_OWNERS + OCCUPANCY_CONSUMER}.get(kind, ())
    if not names:
        return
    if cfg is None:
        raise SchemaError(f"{path}.{kind}", f"a {kind} section (with root)", "nothing")
    missing = [n for n in names if not (Path(cfg.root) / n).is_file()]
    if missing:
        raise SchemaError(f"{path}.{kind}.root", f"a folder holding {', '.join(names)}", f"{cfg.root!r} (missing {', '.join(missing)})")


def load(kind: str, cfg, rng: np.random.Generator) -> Dataset:
    """The dataset of one of this module's kinds."""
    if kind == "uniform":
        return uniform(cfg, rng)
    if kind == "lifesci":
        return lifesci(cfg, rng)
    if kind == "occupancy":
        return occupancy(cfg)
    raise ValueError(f"unknown sketch data source kind {kind!r}")


def _dataset(X: np.ndarray, y: np.ndarray, group: np.ndarray, names: tuple[str, ...], name: str) -> Dataset:
    return Dataset(X=X, y=y.astype(np.int64), group=group.astype(np.int64), feature_names=names,
                   group_names=GROUPS, name=name)


def uniform(cfg: UniformSource, rng: np.random.Generator) -> Dataset:
    n = cfg.rows + cfg.consumer_rows
    X = rng.random((n, cfg.dim))
    y = X.sum(axis=1) > cfg.dim / 2
    group = np.r_[np.zeros(cfg.consumer_rows), np.ones(cfg.rows)]
    return _dataset(X, y, group, tuple(f"u{j}" for j in range(cfg.dim)), "uniform")


def lifesci(cfg: LifeSciSource, rng: np.random.Generator) -> Dataset:
    from marketplace.data.sources import read_verified

    path = Path(cfg.root) / LIFESCI_FILE
    table = np.loadtxt(io.BytesIO(bz2.decompress(read_verified(path))), delimiter=",", ndmin=2)
    if table.shape[1] != 11 or not np.isfinite(table).all():
        raise ValueError(f"{path}: expected 11 finite numeric columns (10 attributes and a 0/1 label), got shape {table.shape}")
    if cfg.consumer_rows >= len(table):
        raise ValueError(f"data.source.lifesci.consumer_rows = {cfg.consumer_rows} must be below the {len(table)} rows of {path}")
    group = np.ones(len(table))
    group[rng.choice(len(table), size=cfg.consumer_rows, replace=False)] = 0
    return _dataset(table[:, :10], table[:, 10], group, tuple(f"pc{j + 1}" for j in range(10)), "lifesci")


def _occupancy_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    from marketplace.data.sources import read_verified

    reader = csv.reader(io.StringIO(read_verified(path).decode("utf-8")))
    header = next(reader, [])
    missing = [c for c in (*OCCUPANCY_FEATURES, "Occupancy") if c not in header]
    if missing:
        raise ValueError(f"{path}: no column named {missing}; the header has {header}")
    # the rows carry a row number before the header's first column
    positions = [header.index(c) + 1 for c in (*OCCUPANCY_FEATURES, "Occupancy")]
    rows = []
    for row in reader:
        if not row:
            continue
        if len(row) != len(header) + 1:
            raise ValueError(f"{path}, line {reader.line_num}: {len(row)} fields, expected {len(header) + 1}")
        rows.append([float(row[i]) for i in positions])
    table = np.array(rows, dtype=np.float64)
    return table[:, :-1], table[:, -1]


def occupancy(cfg: OccupancySource) -> Dataset:
    parts = [(_occupancy_file(Path(cfg.root) / name), g) for g, names in enumerate((OCCUPANCY_CONSUMER, OCCUPANCY_OWNERS))
             for name in names]
    X = np.vstack([p[0][0] for p in parts])
    y = np.concatenate([p[0][1] for p in parts])
    group = np.concatenate([np.full(len(p[0][1]), p[1]) for p in parts])
    return _dataset(X, y, group, OCCUPANCY_FEATURES, "occupancy")
