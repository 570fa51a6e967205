"""``diabetes``: UCI Diabetic Retinopathy Debrecen (messidor_features.arff), label class 1. Bounds
from the UCI documentation. Reads the registered dataset ``diabetic_retinopathy_debrecen``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from marketplace.protocols.pfds.tables.base import Table, encode, text

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PublicSchema

DATASET = "diabetic_retinopathy_debrecen"
DIABETES_LAYOUT = (  # messidor_features.arff, attribute i (UCI documentation)
    ("quality", (0, 1)), ("prescreen", (0, 1)),
    *((f"ma{alpha}", (0, 200)) for alpha in ("0.5", "0.6", "0.7", "0.8", "0.9", "1.0")),
    *((f"exudate{i}", (0, 500)) for i in range(1, 9)),
    ("macula_od_distance", (0, 1)), ("od_diameter", (0, 1)), ("am_fm", (0, 1)),
)  # fmt: skip
DIABETES_BINARY = {"quality", "prescreen", "am_fm"}


def schema(source: Any) -> PublicSchema:
    from marketplace.protocols.pfds import CategoricalAttribute, ClassLabels, NumericAttribute, PublicSchema

    attributes = [
        CategoricalAttribute(c, (0, 1)) if c in DIABETES_BINARY else NumericAttribute(c, *dom)
        for c, dom in DIABETES_LAYOUT
    ]
    return PublicSchema(tuple(attributes), ClassLabels((0, 1)))


def load(source: Any, schema: Any, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    rows = [
        line.split(",")
        for line in text(DATASET, "messidor_features.arff").splitlines()
        if line.strip() and line.strip()[0].isdigit()
    ]
    table = np.array(rows, dtype=np.float64)
    columns = {
        c: [str(int(v)) for v in table[:, i]] if c in DIABETES_BINARY else table[:, i]
        for i, (c, _) in enumerate(DIABETES_LAYOUT)
    }
    return encode(schema, columns), table[:, 19].astype(np.int64)


TABLE = Table(name="diabetes", schema=schema, load=load, partition_attribute="macula_od_distance", dataset=DATASET)
