"""``bike``: UCI Bike Sharing, hourly (hour.csv), regression on cnt (an integer count). Categorical
codes as documented in its Readme, normalised weather in [0, 1]. Reads the registered dataset
``bike_sharing``."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

import numpy as np

from marketplace.protocols.pfds.tables.base import Table, encode, text

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PublicSchema

DATASET = "bike_sharing"
BIKE_LAYOUT = (  # hour.csv (Readme.txt): categorical codes as documented, normalised weather in [0, 1]
    ("season", (1, 2, 3, 4)), ("yr", (0, 1)), ("mnth", tuple(range(1, 13))), ("hr", (0, 23)),
    ("holiday", (0, 1)), ("weekday", tuple(range(7))), ("workingday", (0, 1)), ("weathersit", (1, 2, 3, 4)),
    ("temp", (0, 1)), ("atemp", (0, 1)), ("hum", (0, 1)), ("windspeed", (0, 1)),
)  # fmt: skip
BIKE_NUMERIC = {"hr", "temp", "atemp", "hum", "windspeed"}
BIKE_COUNT_RANGE = (0, 1000)
"""Public range of cnt, rentals per hour (a-priori bound; the documentation gives none)."""


def schema(source: Any) -> PublicSchema:
    from marketplace.protocols.pfds import CategoricalAttribute, NumericAttribute, PublicSchema, RegressionLabels

    attributes = [
        NumericAttribute(c, *dom) if c in BIKE_NUMERIC else CategoricalAttribute(c, dom) for c, dom in BIKE_LAYOUT
    ]
    return PublicSchema(tuple(attributes), RegressionLabels(*BIKE_COUNT_RANGE, buckets=10))


def load(source: Any, schema: Any, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    reader = csv.reader(io.StringIO(text(DATASET, "hour.csv")))
    header = next(reader)
    rows = [r for r in reader if r]
    columns = {c: [r[header.index(c)] for r in rows] for c, _ in BIKE_LAYOUT}
    y = np.array([int(r[header.index("cnt")]) for r in rows], dtype=np.int64)
    return encode(schema, columns), np.clip(y, *BIKE_COUNT_RANGE)


TABLE = Table(name="bike", schema=schema, load=load, partition_attribute="temp", dataset=DATASET)
