"""The one interface every data source implements (see :mod:`marketplace.data.sources`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset


def _no_check(options: Any, path: str) -> None:
    """Options that need no check beyond their types."""


def _no_datasets(options: Any) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True)
class Source:
    """A kind of ``data.source``: its options section and how to check and load it.

    * ``kind``: the name a scenario gives (``data.source.kind``); the options live under
      ``data.source.<kind>``.
    * ``options``: a frozen dataclass, the schema of that section. When every field has a default
      the section may be left out; otherwise the scenario must give it.
    * ``load(options, rng) -> Dataset``: every random choice drawn from ``rng``.
    * ``check(options, path)``: cheap checks no type can express (no file is read); raises
      :class:`~marketplace.schema.SchemaError` at ``path.<field>``.
    * ``datasets(options)``: the registered public datasets it reads (see :mod:`marketplace.datasets`);
      a scenario naming a dataset that is not in the cache is refused with the fetch command.
    * ``paths``: option fields holding file paths, resolved relative to the scenario file.
    """

    kind: str
    options: type
    load: Callable[[Any, np.random.Generator], Dataset]
    summary: str
    check: Callable[[Any, str], None] = _no_check
    datasets: Callable[[Any], tuple[str, ...]] = _no_datasets
    paths: tuple[str, ...] = ()
