"""``adult``: UCI Adult (census income) for summaries under covariate shift: one-hot categoricals,
standardised numerics, label income > 50K, groups the values of one categorical column. Reads the
registered dataset ``adult`` (``marketplace data fetch adult``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.textio import MISSING_VALUES, codes
from marketplace.datasets import read_bytes
from marketplace.schema import SchemaError

DATASET = "adult"
COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
)  # fmt: skip
NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
CATEGORICAL = tuple(c for c in COLUMNS[:-1] if c not in NUMERIC)
FILES = ("adult.data", "adult.test")


@dataclass(frozen=True)
class AdultSource:
    group: str = "race"
    """Categorical column that defines the groups (e.g. race, sex, relationship, workclass)."""


def check(cfg: AdultSource, path: str) -> None:
    if cfg.group not in CATEGORICAL:
        raise SchemaError(f"{path}.group", f"one of the categorical columns {list(CATEGORICAL)}", repr(cfg.group))


def adult(cfg: AdultSource, rng: np.random.Generator | None = None) -> Dataset:
    """adult.data then adult.test, rows with a missing value dropped. Numeric columns are
    standardised (z-score over all kept rows), categorical ones one-hot encoded with every category
    kept (feature ``column=value``); the group of a row is the code of its value in ``cfg.group``."""
    check(cfg, "data.source.adult")
    records = [record for name in FILES for record in records_of(name)]
    columns = list(zip(*records)) if records else [() for _ in COLUMNS]
    table = dict(zip(COLUMNS, columns))
    blocks, names = [], []
    for column in COLUMNS[:-1]:
        block, block_names = _encode(column, table[column])
        blocks.append(block)
        names.extend(block_names)
    y = np.array([value.rstrip(".") == ">50K" for value in table["income"]], dtype=np.int64)
    group, group_names = codes(list(table[cfg.group]))
    return Dataset(
        X=np.hstack(blocks),
        y=y,
        group=group,
        feature_names=tuple(names),
        group_names=group_names,
        name=f"adult-by-{cfg.group}",
    )


def records_of(name: str) -> list[tuple[str, ...]]:
    """Stripped fields of every complete row of one Adult file (junk first line and blanks skipped)."""
    records = []
    for number, line in enumerate(read_bytes(DATASET, name).decode("utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("|"):
            continue
        fields = tuple(field.strip() for field in line.split(","))
        if len(fields) != len(COLUMNS):
            raise ValueError(f"{DATASET}/{name}, line {number}: {len(fields)} fields, expected {len(COLUMNS)}")
        if not any(field in MISSING_VALUES for field in fields):
            records.append(fields)
    return records


def _encode(column: str, values: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """A standardised numeric column, or the one-hot block of a categorical one, with feature names."""
    if column in NUMERIC:
        x = np.array(values, dtype=np.float64)
        std = x.std()
        return ((x - x.mean()) / (std if std > 0 else 1.0))[:, None], [column]
    codes_, categories = codes(list(values))
    return np.eye(len(categories))[codes_], [f"{column}={category}" for category in categories]


SOURCE = Source(
    kind="adult",
    options=AdultSource,
    load=adult,
    check=check,
    datasets=lambda cfg: (DATASET,),
    summary="UCI Adult, one-hot and standardised, grouped by a categorical column",
)
