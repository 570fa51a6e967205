"""``adult``: UCI Census Income (adult.data + adult.test), label income > 50K; rows with a missing
value ('?') are dropped. The category lists are those of adult.names; numeric bounds are round
a-priori bounds (values outside are clipped). Reads the registered dataset ``adult``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from marketplace.protocols.pfds.tables.base import Table, encode, schema_from_layout, text

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PublicSchema

DATASET = "adult"
ADULT_CATEGORIES = {
    "workclass": (
        "Private",
        "Self-emp-not-inc",
        "Self-emp-inc",
        "Federal-gov",
        "Local-gov",
        "State-gov",
        "Without-pay",
        "Never-worked",
    ),
    "education": (
        "Bachelors",
        "Some-college",
        "11th",
        "HS-grad",
        "Prof-school",
        "Assoc-acdm",
        "Assoc-voc",
        "9th",
        "7th-8th",
        "12th",
        "Masters",
        "1st-4th",
        "10th",
        "Doctorate",
        "5th-6th",
        "Preschool",
    ),
    "marital-status": (
        "Married-civ-spouse",
        "Divorced",
        "Never-married",
        "Separated",
        "Widowed",
        "Married-spouse-absent",
        "Married-AF-spouse",
    ),
    "occupation": (
        "Tech-support",
        "Craft-repair",
        "Other-service",
        "Sales",
        "Exec-managerial",
        "Prof-specialty",
        "Handlers-cleaners",
        "Machine-op-inspct",
        "Adm-clerical",
        "Farming-fishing",
        "Transport-moving",
        "Priv-house-serv",
        "Protective-serv",
        "Armed-Forces",
    ),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native-country": (
        "United-States",
        "Cambodia",
        "England",
        "Puerto-Rico",
        "Canada",
        "Germany",
        "Outlying-US(Guam-USVI-etc)",
        "India",
        "Japan",
        "Greece",
        "South",
        "China",
        "Cuba",
        "Iran",
        "Honduras",
        "Philippines",
        "Italy",
        "Poland",
        "Jamaica",
        "Vietnam",
        "Mexico",
        "Portugal",
        "Ireland",
        "France",
        "Dominican-Republic",
        "Laos",
        "Ecuador",
        "Taiwan",
        "Haiti",
        "Columbia",
        "Hungary",
        "Guatemala",
        "Nicaragua",
        "Scotland",
        "Thailand",
        "Yugoslavia",
        "El-Salvador",
        "Trinadad&Tobago",
        "Peru",
        "Hong",
        "Holand-Netherlands",
    ),
}  # fmt: skip  (the value lists of adult.names)
ADULT_LAYOUT = (  # (column of adult.data, public domain): numeric (lo, hi) or a category list
    ("age", (17, 90)), ("workclass", None), ("fnlwgt", (0, 1_500_000)), ("education", None),
    ("education-num", (1, 16)), ("marital-status", None), ("occupation", None), ("relationship", None),
    ("race", None), ("sex", None), ("capital-gain", (0, 100_000)), ("capital-loss", (0, 5_000)),
    ("hours-per-week", (1, 99)), ("native-country", None),
)  # fmt: skip


def schema(source: Any) -> PublicSchema:
    from marketplace.protocols.pfds import ClassLabels

    return schema_from_layout(ADULT_LAYOUT, ADULT_CATEGORIES, ClassLabels((0, 1)))


def load(source: Any, schema: Any, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    records = []
    for name in ("adult.data", "adult.test"):
        for line in text(DATASET, name).splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) != 15 or "?" in fields:
                continue  # header line of adult.test, blank lines, rows with a missing value
            records.append(fields)
    columns = {c: [r[i] for r in records] for i, (c, _) in enumerate(ADULT_LAYOUT)}
    y = np.array([r[14].rstrip(".") == ">50K" for r in records], dtype=np.int64)
    return encode(schema, columns), y


TABLE = Table(name="adult", schema=schema, load=load, partition_attribute="age", dataset=DATASET)
