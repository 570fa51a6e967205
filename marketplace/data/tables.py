"""Raw tables with a public schema, for protocols that work on attributes (``pfds``).

The other loaders one-hot encode and standardise, which uses the data's own statistics. A pfds
sharer instead needs every attribute as it is (numeric values, categorical codes) and a *public*
description of its domain, known before any row is read. This module provides both for five
tables (``data.source.kind: table``):

* ``synthetic``: a generated mixed table (no file needed), for classification or regression;
* ``adult`` (UCI Census Income, ``adult.data`` + ``adult.test``), label income > 50K;
* ``bank`` (UCI Bank Marketing, ``bank-full.csv.gz``, ``;``-separated), label y = yes;
* ``diabetes`` (UCI Diabetic Retinopathy Debrecen, ``messidor_features.arff``), label class 1;
* ``bike`` (UCI Bike Sharing, ``hour.csv``), regression on cnt (an integer count).

The domains come from each dataset's documentation (category lists, documented scales); where the
documentation gives no bound (counts, money, durations) a round a-priori bound is used and the
few values outside it are clipped onto it, a per-record map that costs no privacy. Rows with a
missing value (Adult's ``?``) are dropped. A :class:`Dataset` carries the rows in schema order
(categorical columns as codes) and the label as an integer (class index, or Bike's count).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np

from marketplace.schema import Range, SchemaError

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.data.dataset import Dataset
    from marketplace.protocols.pfds import PublicSchema

TABLES = ("synthetic", "adult", "bank", "diabetes", "bike")
FILES = {
    "adult": ("adult.data", "adult.test"),
    "bank": ("bank-full.csv.gz",),
    "diabetes": ("messidor_features.arff",),
    "bike": ("hour.csv",),
}


@dataclass(frozen=True)
class SyntheticTable:
    """A generated table: ``numeric`` attributes in [0, 1] and ``categorical`` ones with ``values``
    values each; the label comes from a random linear score (plus noise) of the attributes."""

    rows: Annotated[int, Range(min=10)] = 6000
    numeric: Annotated[int, Range(min=1, max=50)] = 4
    categorical: Annotated[int, Range(min=0, max=20)] = 2
    values: Annotated[int, Range(min=2, max=20)] = 3
    task: Literal["classification", "regression"] = "classification"
    noise: Annotated[float, Range(min=0.0)] = 0.3
    """Standard deviation of the noise added to the score before it becomes a label."""


@dataclass(frozen=True)
class TableSource:
    """A raw table with a built-in public schema (see :mod:`marketplace.data.tables`)."""

    dataset: Literal["synthetic", "adult", "bank", "diabetes", "bike"] = "synthetic"
    root: str = ""
    """Folder holding the dataset's file(s) (not needed for ``synthetic``)."""
    rows: Annotated[int, Range(min=0)] = 0
    """Keep a random subset of this many rows (0: all), for quick runs."""
    synthetic: SyntheticTable = field(default_factory=SyntheticTable)


# --------------------------------------------------------------------------- public schemas

ADULT_CATEGORIES = {
    "workclass": ("Private", "Self-emp-not-inc", "Self-emp-inc", "Federal-gov", "Local-gov", "State-gov",
                  "Without-pay", "Never-worked"),
    "education": ("Bachelors", "Some-college", "11th", "HS-grad", "Prof-school", "Assoc-acdm", "Assoc-voc", "9th",
                  "7th-8th", "12th", "Masters", "1st-4th", "10th", "Doctorate", "5th-6th", "Preschool"),
    "marital-status": ("Married-civ-spouse", "Divorced", "Never-married", "Separated", "Widowed",
                       "Married-spouse-absent", "Married-AF-spouse"),
    "occupation": ("Tech-support", "Craft-repair", "Other-service", "Sales", "Exec-managerial", "Prof-specialty",
                   "Handlers-cleaners", "Machine-op-inspct", "Adm-clerical", "Farming-fishing", "Transport-moving",
                   "Priv-house-serv", "Protective-serv", "Armed-Forces"),
    "relationship": ("Wife", "Own-child", "Husband", "Not-in-family", "Other-relative", "Unmarried"),
    "race": ("White", "Asian-Pac-Islander", "Amer-Indian-Eskimo", "Other", "Black"),
    "sex": ("Female", "Male"),
    "native-country": ("United-States", "Cambodia", "England", "Puerto-Rico", "Canada", "Germany",
                       "Outlying-US(Guam-USVI-etc)", "India", "Japan", "Greece", "South", "China", "Cuba", "Iran",
                       "Honduras", "Philippines", "Italy", "Poland", "Jamaica", "Vietnam", "Mexico", "Portugal",
                       "Ireland", "France", "Dominican-Republic", "Laos", "Ecuador", "Taiwan", "Haiti", "Columbia",
                       "Hungary", "Guatemala", "Nicaragua", "Scotland", "Thailand", "Yugoslavia", "El-Salvador",
                       "Trinadad&Tobago", "Peru", "Hong", "Holand-Netherlands"),
}  # fmt: skip  (the value lists of adult.names)
ADULT_LAYOUT = (  # (column of adult.data, public domain): numeric (lo, hi) or a category list
    ("age", (17, 90)), ("workclass", None), ("fnlwgt", (0, 1_500_000)), ("education", None),
    ("education-num", (1, 16)), ("marital-status", None), ("occupation", None), ("relationship", None),
    ("race", None), ("sex", None), ("capital-gain", (0, 100_000)), ("capital-loss", (0, 5_000)),
    ("hours-per-week", (1, 99)), ("native-country", None),
)  # fmt: skip

BANK_CATEGORIES = {
    "job": ("admin.", "unknown", "unemployed", "management", "housemaid", "entrepreneur", "student", "blue-collar",
            "self-employed", "retired", "technician", "services"),
    "marital": ("married", "divorced", "single"),
    "education": ("unknown", "secondary", "primary", "tertiary"),
    "default": ("yes", "no"), "housing": ("yes", "no"), "loan": ("yes", "no"),
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

DIABETES_LAYOUT = (  # messidor_features.arff, attribute i (UCI documentation)
    ("quality", (0, 1)), ("prescreen", (0, 1)),
    *((f"ma{alpha}", (0, 200)) for alpha in ("0.5", "0.6", "0.7", "0.8", "0.9", "1.0")),
    *((f"exudate{i}", (0, 500)) for i in range(1, 9)),
    ("macula_od_distance", (0, 1)), ("od_diameter", (0, 1)), ("am_fm", (0, 1)),
)  # fmt: skip
DIABETES_BINARY = {"quality", "prescreen", "am_fm"}

BIKE_LAYOUT = (  # hour.csv (Readme.txt): categorical codes as documented, normalised weather in [0, 1]
    ("season", (1, 2, 3, 4)), ("yr", (0, 1)), ("mnth", tuple(range(1, 13))), ("hr", (0, 23)),
    ("holiday", (0, 1)), ("weekday", tuple(range(7))), ("workingday", (0, 1)), ("weathersit", (1, 2, 3, 4)),
    ("temp", (0, 1)), ("atemp", (0, 1)), ("hum", (0, 1)), ("windspeed", (0, 1)),
)  # fmt: skip
BIKE_NUMERIC = {"hr", "temp", "atemp", "hum", "windspeed"}
BIKE_COUNT_RANGE = (0, 1000)
"""Public range of cnt, rentals per hour (a-priori bound; the documentation gives none)."""

PARTITION_ATTRIBUTE = {"synthetic": "x0", "adult": "age", "bank": "age", "diabetes": "macula_od_distance", "bike": "temp"}
"""The numeric attribute the agents' partition uses by default (DESIGN.md §4)."""


def public_schema(source: TableSource) -> "PublicSchema":
    """The built-in public schema of ``source``: attribute domains and label domain, no data read."""
    from marketplace.protocols.pfds import (CategoricalAttribute, ClassLabels, NumericAttribute, PublicSchema,
                                            RegressionLabels)

    name = source.dataset
    if name == "synthetic":
        s = source.synthetic
        attributes = [NumericAttribute(f"x{i}", 0.0, 1.0) for i in range(s.numeric)]
        attributes += [CategoricalAttribute(f"c{i}", tuple(range(s.values))) for i in range(s.categorical)]
        label = ClassLabels((0, 1)) if s.task == "classification" else RegressionLabels(0, 1000)
        return PublicSchema(tuple(attributes), label)
    if name == "adult":
        attributes = [CategoricalAttribute(c, ADULT_CATEGORIES[c]) if dom is None else NumericAttribute(c, *dom)
                      for c, dom in ADULT_LAYOUT]
        return PublicSchema(tuple(attributes), ClassLabels((0, 1)))
    if name == "bank":
        attributes = [CategoricalAttribute(c, BANK_CATEGORIES[c]) if dom is None else NumericAttribute(c, *dom)
                      for c, dom in BANK_LAYOUT]
        return PublicSchema(tuple(attributes), ClassLabels((0, 1)))
    if name == "diabetes":
        attributes = [CategoricalAttribute(c, (0, 1)) if c in DIABETES_BINARY else NumericAttribute(c, *dom)
                      for c, dom in DIABETES_LAYOUT]
        return PublicSchema(tuple(attributes), ClassLabels((0, 1)))
    if name == "bike":
        attributes = [NumericAttribute(c, *dom) if c in BIKE_NUMERIC else CategoricalAttribute(c, dom)
                      for c, dom in BIKE_LAYOUT]
        return PublicSchema(tuple(attributes), RegressionLabels(*BIKE_COUNT_RANGE, buckets=10))
    raise ValueError(f"unknown table {name!r}: use one of {list(TABLES)}")


# --------------------------------------------------------------------------- loading


def check_table_available(source: TableSource, path: str) -> None:
    """SchemaError naming ``path.root`` when the table's files are missing (no file is read)."""
    if source.dataset == "synthetic":
        return
    root = Path(source.root)
    missing = [n for n in FILES[source.dataset] if not (root / n).is_file()]
    if not source.root or missing:
        raise SchemaError(f"{path}.root", f"a folder holding {', '.join(FILES[source.dataset])}",
                          repr(source.root) + (f" (missing {missing[0]})" if source.root else ""))


def load_table(source: TableSource, rng: np.random.Generator) -> "Dataset":
    """The table as a :class:`Dataset`: rows in schema order (categorical codes), integer labels,
    one group ("all"). Values outside a numeric public domain are clipped onto it."""
    from marketplace.data.dataset import Dataset

    schema = public_schema(source)
    if source.dataset == "synthetic":
        X, y = _synthetic(source.synthetic, schema, rng)
    else:
        X, y = _LOADERS[source.dataset](Path(source.root), schema)
        X = np.clip(X, schema.lower, np.where(schema.is_categorical, schema.upper - 1, schema.upper))
    if source.rows and source.rows < len(y):
        keep = np.sort(rng.choice(len(y), size=source.rows, replace=False))
        X, y = X[keep], y[keep]
    schema.check_rows(X, "X", f"table {source.dataset!r}")
    return Dataset(X=X, y=y, group=np.zeros(len(y), dtype=np.int64), feature_names=schema.names,
                   group_names=("all",), name=source.dataset)


def _synthetic(s: SyntheticTable, schema: "PublicSchema", rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    numeric = rng.beta(2.0, 2.0, size=(s.rows, s.numeric))
    codes = rng.integers(0, s.values, size=(s.rows, s.categorical))
    weights = rng.normal(size=s.numeric)
    effects = rng.normal(size=(s.categorical, s.values))
    score = (numeric - 0.5) @ weights * 2.0 + sum(effects[j, codes[:, j]] for j in range(s.categorical))
    score = score + rng.normal(scale=s.noise, size=s.rows)
    X = np.hstack([numeric, codes.astype(np.float64)])
    if s.task == "classification":
        return X, (score > np.median(score)).astype(np.int64)
    scaled = (score - score.min()) / (score.max() - score.min() + 1e-12)
    return X, np.round(scaled * 900 + 50).astype(np.int64)


def _text(path: Path) -> str:
    from marketplace.data.sources import _decompress, read_verified

    return _decompress(path, read_verified(path)).decode("utf-8")


def _encode(schema: "PublicSchema", columns: dict[str, list[str]]) -> np.ndarray:
    """Rows from text columns: numeric parsed, categorical looked up in the public value list."""
    out = []
    for attribute in schema.attributes:
        values = columns[attribute.name]
        if attribute.kind == "numeric":
            out.append(np.array(values, dtype=np.float64))
        else:
            lookup = {str(v): code for code, v in enumerate(attribute.values)}
            try:
                out.append(np.array([lookup[v] for v in values], dtype=np.float64))
            except KeyError as err:
                raise ValueError(f"attribute {attribute.name!r}: value {err.args[0]!r} is not in its public domain "
                                 f"{list(attribute.values)}") from None
    return np.column_stack(out)


def _adult(root: Path, schema: "PublicSchema") -> tuple[np.ndarray, np.ndarray]:
    records = []
    for name in FILES["adult"]:
        for line in _text(root / name).splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) != 15 or "?" in fields:
                continue  # header line of adult.test, blank lines, rows with a missing value
            records.append(fields)
    columns = {c: [r[i] for r in records] for i, (c, _) in enumerate(ADULT_LAYOUT)}
    y = np.array([r[14].rstrip(".") == ">50K" for r in records], dtype=np.int64)
    return _encode(schema, columns), y


def _bank(root: Path, schema: "PublicSchema") -> tuple[np.ndarray, np.ndarray]:
    reader = csv.reader(io.StringIO(_text(root / FILES["bank"][0])), delimiter=";")
    header = next(reader)
    rows = [r for r in reader if r]
    columns = {c: [r[header.index(c)] for r in rows] for c, _ in BANK_LAYOUT}
    y = np.array([r[header.index("y")] == "yes" for r in rows], dtype=np.int64)
    return _encode(schema, columns), y


def _diabetes(root: Path, schema: "PublicSchema") -> tuple[np.ndarray, np.ndarray]:
    rows = [line.split(",") for line in _text(root / FILES["diabetes"][0]).splitlines()
            if line.strip() and line.strip()[0].isdigit()]
    table = np.array(rows, dtype=np.float64)
    columns = {c: [str(int(v)) for v in table[:, i]] if c in DIABETES_BINARY else table[:, i]
               for i, (c, _) in enumerate(DIABETES_LAYOUT)}
    return _encode(schema, columns), table[:, 19].astype(np.int64)


def _bike(root: Path, schema: "PublicSchema") -> tuple[np.ndarray, np.ndarray]:
    reader = csv.reader(io.StringIO(_text(root / FILES["bike"][0])))
    header = next(reader)
    rows = [r for r in reader if r]
    columns = {c: [r[header.index(c)] for r in rows] for c, _ in BIKE_LAYOUT}
    y = np.array([int(r[header.index("cnt")]) for r in rows], dtype=np.int64)
    return _encode(schema, columns), np.clip(y, *BIKE_COUNT_RANGE)


_LOADERS: dict[str, Any] = {"adult": _adult, "bank": _bank, "diabetes": _diabetes, "bike": _bike}
