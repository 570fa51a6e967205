"""The one interface every pfds table implements (see :mod:`marketplace.protocols.pfds.tables`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PublicSchema
    from marketplace.protocols.pfds.schema import Labels


@dataclass(frozen=True)
class Table:
    """A raw table with a public schema.

    * ``schema(source) -> PublicSchema``: attribute domains and label domain, known before any row
      is read (``source`` is the scenario's ``data.source.table`` section);
    * ``load(source, schema, rng) -> (X, y)``: rows in schema order (categorical columns as codes)
      and integer labels;
    * ``partition_attribute``: the numeric attribute the agents' split uses by default;
    * ``dataset``: the registered public dataset it reads, if any;
    * ``clip``: values outside a numeric public domain are clipped onto it (a per-record map).
    """

    name: str
    schema: Callable[[Any], PublicSchema]
    load: Callable[[Any, PublicSchema, np.random.Generator], tuple[np.ndarray, np.ndarray]]
    partition_attribute: str
    dataset: str | None = None
    clip: bool = True


def schema_from_layout(layout: tuple, categories: dict[str, tuple], label: Labels) -> PublicSchema:
    """A schema from (column, numeric (lo, hi) or None) pairs, None columns taking ``categories``."""
    from marketplace.protocols.pfds import CategoricalAttribute, NumericAttribute, PublicSchema

    attributes = [
        CategoricalAttribute(c, categories[c]) if dom is None else NumericAttribute(c, *dom) for c, dom in layout
    ]
    return PublicSchema(tuple(attributes), label)


def encode(schema: PublicSchema, columns: Mapping[str, Sequence[Any] | np.ndarray]) -> np.ndarray:
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
                raise ValueError(
                    f"attribute {attribute.name!r}: value {err.args[0]!r} is not in its public domain "
                    f"{list(attribute.values)}"
                ) from None
    return np.column_stack(out)


def text(dataset: str, name: str) -> str:
    """One file of a registered dataset as text (checked against the registry, decompressed)."""
    from marketplace.data.textio import decompress
    from marketplace.datasets import read_bytes

    return decompress(name, read_bytes(dataset, name)).decode("utf-8")
