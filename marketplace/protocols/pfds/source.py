"""``table``: a raw table with a built-in public schema, for pfds (see :mod:`marketplace.protocols.pfds.tables`)."""

from __future__ import annotations

from marketplace.data.sources.base import Source
from marketplace.protocols.pfds import tables

SOURCE = Source(
    kind="table",
    options=tables.TableSource,
    load=tables.load_table,
    datasets=tables.datasets,
    summary="a raw table with a public schema (pfds): " + ", ".join(tables.TABLES),
)
