"""Raw tables with built-in public schemas, for the pfds protocol (``data.source.kind: table``).

The summarize loaders one-hot encode and standardise, which uses the data's own statistics. A pfds
sharer instead needs every attribute as it is (numeric values, categorical codes) and a *public*
description of its domain, known before any row is read. Each table lives in its own module of
this package and declares itself once as ``TABLE = Table(...)`` (:class:`.base.Table`); the
package finds them, so adding a table is adding one file:

* ``synthetic``: a generated mixed table (no file needed), for classification or regression;
* ``adult`` (UCI Census Income), label income > 50K;
* ``bank`` (UCI Bank Marketing), label y = yes;
* ``diabetes`` (UCI Diabetic Retinopathy Debrecen), label class 1;
* ``bike`` (UCI Bike Sharing, hourly), regression on cnt (an integer count).

The domains come from each dataset's documentation (category lists, documented scales); where the
documentation gives no bound (counts, money, durations) a round a-priori bound is used and the
few values outside it are clipped onto it, a per-record map that costs no privacy. Rows with a
missing value are dropped. A :class:`Dataset` carries the rows in schema order (categorical
columns as codes) and the label as an integer (class index, or Bike's count).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np

from marketplace.protocols.pfds.tables.base import Table
from marketplace.protocols.pfds.tables.synthetic import SyntheticTable
from marketplace.schema import Range

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.data.dataset import Dataset
    from marketplace.protocols.pfds import PublicSchema


def _discover() -> dict[str, Table]:
    found: dict[str, Table] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base":
            continue
        table = getattr(importlib.import_module(f"{__name__}.{info.name}"), "TABLE", None)
        if isinstance(table, Table):
            if table.name in found:
                raise RuntimeError(f"two table modules declare {table.name!r}")
            found[table.name] = table
    return found


REGISTRY: dict[str, Table] = _discover()
TABLES = tuple(REGISTRY)
PARTITION_ATTRIBUTE = {name: table.partition_attribute for name, table in REGISTRY.items()}
"""The numeric attribute the agents' partition uses by default (docs/design.md §4)."""


@dataclass(frozen=True)
class TableSource:
    """A raw table with a built-in public schema (see :mod:`marketplace.protocols.pfds.tables`)."""

    dataset: Literal[TABLES] = "synthetic"  # type: ignore[valid-type]
    rows: Annotated[int, Range(min=0)] = 0
    """Keep a random subset of this many rows (0: all), for quick runs."""
    synthetic: SyntheticTable = field(default_factory=SyntheticTable)


def table(name: str) -> Table:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown table {name!r}: use one of {list(TABLES)}") from None


def public_schema(source: TableSource) -> PublicSchema:
    """The built-in public schema of ``source``: attribute domains and label domain, no data read."""
    return table(source.dataset).schema(source)


def datasets(source: TableSource) -> tuple[str, ...]:
    """The registered public dataset the table reads (none for ``synthetic``)."""
    name = table(source.dataset).dataset
    return (name,) if name else ()


def load_table(source: TableSource, rng: np.random.Generator) -> Dataset:
    """The table as a :class:`Dataset`: rows in schema order (categorical codes), integer labels,
    one group ("all"). Values outside a numeric public domain are clipped onto it."""
    from marketplace.data.dataset import Dataset

    chosen = table(source.dataset)
    schema = chosen.schema(source)
    X, y = chosen.load(source, schema, rng)
    if chosen.clip:
        X = np.clip(X, schema.lower, np.where(schema.is_categorical, schema.upper - 1, schema.upper))
    if source.rows and source.rows < len(y):
        keep = np.sort(rng.choice(len(y), size=source.rows, replace=False))
        X, y = X[keep], y[keep]
    schema.check_rows(X, "X", f"table {source.dataset!r}")
    return Dataset(
        X=X,
        y=y,
        group=np.zeros(len(y), dtype=np.int64),
        feature_names=schema.names,
        group_names=("all",),
        name=source.dataset,
    )


__all__ = [
    "PARTITION_ATTRIBUTE",
    "REGISTRY",
    "TABLES",
    "SyntheticTable",
    "Table",
    "TableSource",
    "datasets",
    "load_table",
    "public_schema",
    "table",
]
