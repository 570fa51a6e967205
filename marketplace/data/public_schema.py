"""A marketplace described by its public schema instead of a dataset: ``data.schema``.

In a deployment every party holds only its own rows. What all of them must agree on beforehand is
public, and is all a market file says about the data:

* the **features**: their names (the columns of every party's file), and the range each one lies in
  (``lower``, ``upper``). The ranges are the public bounds the protocols need (a sketch's box, the
  clipping of stc's scaling): they never come from anybody's rows;
* the **label**: the column holding the class, and the classes;
* optionally the **group** column and its values (what partitions and targets are stated in).

A row outside a feature's range is refused with its file, line and column (``outside: refuse``,
the default), or clipped into the range (``outside: clip``). A label or group value the schema
does not list is always refused.

>>> s = DataSchema(features=(Feature("x0", -1.0, 1.0),), label=Label(classes=("0", "1")))
>>> s.dim, s.feature_names, s.class_codes()
(1, ('x0',), {'0': 0, '1': 1})
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from marketplace.data.bounds import LARGEST
from marketplace.data.dataset import Dataset, SparseParts, World
from marketplace.data.textio import is_number
from marketplace.schema import Length

__all__ = ["DataSchema", "Feature", "Group", "Label", "empty_dataset", "schema_summary", "schema_world"]

Name = Annotated[str, Length(min=1, max=128)]


@dataclass(frozen=True)
class Feature:
    """One feature column: its ``name`` in every party's file and the public range it lies in."""

    name: Name
    lower: float
    upper: float

    def __post_init__(self) -> None:
        if not self.lower < self.upper:
            raise ValueError(f"feature {self.name!r}: lower must be below upper, got [{self.lower}, {self.upper}]")
        if max(abs(self.lower), abs(self.upper)) >= LARGEST:
            raise ValueError(
                f"feature {self.name!r}: bounds must lie within +-{LARGEST:.3g}, got [{self.lower}, {self.upper}]"
            )


def as_text(values: tuple[str | int, ...]) -> tuple[str, ...]:
    """Classes or group values as text: a file's YAML may give them as integers, which the schema
    holds as text from ``__post_init__`` on (so this returns them unchanged)."""
    return tuple(str(v) for v in values)


@dataclass(frozen=True)
class Label:
    """The label column and its classes (as they are written in the files)."""

    classes: Annotated[tuple[str | int, ...], Length(min=1, max=10_000)]
    name: Name = "label"

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", as_text(self.classes))
        if len(set(self.classes)) != len(self.classes):
            raise ValueError(f"label.classes: each class once, got {list(self.classes)}")


@dataclass(frozen=True)
class Group:
    """An optional group column and its values (the groups partitions and targets are stated in)."""

    name: Name
    values: Annotated[tuple[str | int, ...], Length(min=1, max=10_000)]

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", as_text(self.values))
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"group.values: each value once, got {list(self.values)}")


@dataclass(frozen=True)
class DataSchema:
    """The public schema of a marketplace's data (module docstring)."""

    features: Annotated[tuple[Feature, ...], Length(min=1, max=100_000)]
    label: Label
    group: Group | None = None
    outside: Literal["refuse", "clip"] = "refuse"
    """What a party's file may hold outside a feature's range: ``refuse`` the file (naming the line
    and column), or ``clip`` the value into the range."""

    def __post_init__(self) -> None:
        names = [f.name for f in self.features]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"features: each name once, got {repeated} more than once")
        others = [self.label.name, *([self.group.name] if self.group is not None else [])]
        clash = sorted(set(names) & set(others))
        if clash or len(set(others)) != len(others):
            raise ValueError(f"the label, group and feature columns need distinct names, got {clash or others}")

    @property
    def dim(self) -> int:
        return len(self.features)

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    @property
    def lower(self) -> np.ndarray:
        return np.array([f.lower for f in self.features], dtype=np.float64)

    @property
    def upper(self) -> np.ndarray:
        return np.array([f.upper for f in self.features], dtype=np.float64)

    @property
    def group_names(self) -> tuple[str, ...]:
        """The group names every part of the world uses: the group values, else the classes."""
        return as_text(self.group.values if self.group is not None else self.label.classes)

    def class_codes(self) -> dict[str, int]:
        """Class text -> the integer label the protocols see: the class itself when every class is an
        integer (labels keep their meaning), else its position in ``classes``."""
        classes = as_text(self.label.classes)
        if all(is_number(c) and float(c) == int(float(c)) for c in classes):
            return {c: int(float(c)) for c in classes}
        return {c: i for i, c in enumerate(classes)}

    def group_codes(self) -> dict[str, int]:
        """Group text -> group id (its position in ``group_names``)."""
        return {g: i for i, g in enumerate(self.group_names)}


def empty_dataset(schema: DataSchema, name: str) -> Dataset:
    """A dataset of no rows with the schema's columns and groups."""
    return Dataset(
        X=np.zeros((0, schema.dim)),
        y=np.zeros(0, dtype=np.int64),
        group=np.zeros(0, dtype=np.int64),
        feature_names=schema.feature_names,
        group_names=schema.group_names,
        name=name,
    )


def schema_world(schema: DataSchema, n_owners: int) -> World:
    """The world a party of a schema-only marketplace starts from: every part empty, the columns and
    groups of the schema. Each party then fills in only its own part from its own files; nobody,
    the server included, ever holds a world of everyone's rows (``central`` is False)."""
    empty = empty_dataset(schema, "no rows (a schema-only marketplace: each party holds its own)")
    return World(owners=SparseParts(n_owners, {}, empty), validation=empty, test=empty, seed_set=empty, central=False)


def schema_summary(schema: DataSchema) -> dict:
    """The public schema as plain data for a report: what a schema-only marketplace knows of its
    data (feature names and ranges, the label's classes, the groups), and nothing about any rows."""
    return {
        "dim": schema.dim,
        "group_names": list(schema.group_names),
        "features": [{"name": f.name, "lower": float(f.lower), "upper": float(f.upper)} for f in schema.features],
        "label": {"name": schema.label.name, "classes": list(schema.label.classes)},
        "group": None if schema.group is None else {"name": schema.group.name, "values": list(schema.group.values)},
    }
