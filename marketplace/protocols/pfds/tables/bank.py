"""``bank``: UCI Bank Marketing (bank-full.csv.gz, ``;``-separated), label y = yes. Category lists
from bank-names.txt; numeric bounds are round a-priori bounds (values outside are clipped). Reads
the registered dataset ``bank_marketing``."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any

import numpy as np

from marketplace.protocols.pfds.tables.base import Table, encode, schema_from_layout, text

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PublicSchema

DATASET = "bank_marketing"
BANK_CATEGORIES = {
    "job": (
        "admin.",
        "unknown",
        "unemployed",
        "management",
        "housemaid",
        "entrepreneur",
        "student",
        "blue-collar",
        "self-employed",
        "retired",
        "technician",
        "services",
    ),
    "marital": ("married", "divorced", "single"),
    "education": ("unknown", "secondary", "primary", "tertiary"),
    "default": ("yes", "no"),
    "housing": ("yes", "no"),
    "loan": ("yes", "no"),
    "contact": ("unknown", "telephone", "cellular"),
    "month": ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"),
    "poutcome": ("unknown", "other", "failure", "success"),
}  # fmt: skip  (the value lists of bank-names.txt)
BANK_LAYOUT = (
    ("age", (18, 100)), ("job", None), ("marital", None), ("education", None), ("default", None),
    ("balance", (-10_000, 100_000)), ("housing", None), ("loan", None), ("contact", None), ("day", (1, 31)),
    ("month", None), ("duration", (0, 5_000)), ("campaign", (1, 100)), ("pdays", (-1, 1_000)),
    ("previous", (0, 300)), ("poutcome", None),
)  # fmt: skip


def schema(source: Any) -> PublicSchema:
    from marketplace.protocols.pfds import ClassLabels

    return schema_from_layout(BANK_LAYOUT, BANK_CATEGORIES, ClassLabels((0, 1)))


def load(source: Any, schema: Any, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    reader = csv.reader(io.StringIO(text(DATASET, "bank-full.csv.gz")), delimiter=";")
    header = next(reader)
    rows = [r for r in reader if r]
    columns = {c: [r[header.index(c)] for r in rows] for c, _ in BANK_LAYOUT}
    y = np.array([r[header.index("y")] == "yes" for r in rows], dtype=np.int64)
    return encode(schema, columns), y


TABLE = Table(name="bank", schema=schema, load=load, partition_attribute="age", dataset=DATASET)
