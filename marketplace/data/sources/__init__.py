"""Data sources: where the rows of a run come from (``data.source`` in a scenario).

Each kind lives in its own module of this package and declares itself once, as a module-level
``SOURCE = Source(...)`` (:class:`~marketplace.data.sources.base.Source`: its options, ``check``
and ``load``); a protocol may declare sources of its own the same way, in its package. The
package finds every such module when it is imported, and the scenario schema
(:class:`marketplace.data.config.SourceConfig`) is built from what it found, so adding a source
is adding one file here. Sources that read a public dataset name it; its files come from the data
cache (:mod:`marketplace.datasets`), checked against the registry before use.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.schema import SchemaError

DEFAULT_KIND = "covariate_shift"


def _discover() -> dict[str, Source]:
    """The sources of this package's modules and those the registered protocols declare
    (:attr:`marketplace.plugins.ProtocolSpec.data_sources`), each kind once, in kind order (so
    where a source lives does not change the scenario schema or the resolved scenario)."""
    from marketplace import plugins

    modules = [
        f"{__name__}.{info.name}"
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
        if not info.name.startswith("_") and info.name != "base"
    ]
    modules += [path for spec in plugins.protocols().values() for path in spec.data_sources]
    found: dict[str, Source] = {}
    for path in modules:
        source = getattr(importlib.import_module(path), "SOURCE", None)
        if not isinstance(source, Source):
            continue
        if source.kind in found:
            raise RuntimeError(f"two data source modules declare kind {source.kind!r}")
        found[source.kind] = source
    return dict(sorted(found.items()))


SOURCES: dict[str, Source] = _discover()
"""Every source kind, by name."""


def source(kind: str) -> Source:
    """The source of ``kind``; ValueError listing the kinds otherwise."""
    try:
        return SOURCES[kind]
    except KeyError:
        raise ValueError(f"unknown data source kind {kind!r}: use one of {sorted(SOURCES)}") from None


def options_of(cfg: Any, path: str = "data.source") -> Any:
    """The options section of the chosen kind; SchemaError when a required section is missing."""
    options = getattr(cfg, cfg.kind, None)
    if options is None:
        raise SchemaError(f"{path}.{cfg.kind}", f"a {cfg.kind} section (data.source.kind is {cfg.kind!r})", "nothing")
    return options


def datasets_of(cfg: Any) -> tuple[str, ...]:
    """The registered public datasets the chosen source reads."""
    return tuple(source(cfg.kind).datasets(options_of(cfg)))


def check_source_available(cfg: Any, path: str = "data.source") -> None:
    """Refuse, before anything starts, a source whose options cannot work or whose dataset is not
    in the cache. Cheap: no file is read.

    Raises :class:`SchemaError` for a bad option, and
    :class:`~marketplace.datasets.DatasetMissing` (whose message gives the fetch command) for a
    dataset that is not (completely) in the cache.
    """
    from marketplace.datasets import require

    chosen = source(cfg.kind)
    options = options_of(cfg, path)
    chosen.check(options, f"{path}.{cfg.kind}")
    for name in chosen.datasets(options):
        require(name)


def load_source(cfg: Any, rng: np.random.Generator) -> Dataset:
    """Build the dataset ``cfg`` describes; ``rng`` drives every random choice of the source."""
    check_source_available(cfg)
    return source(cfg.kind).load(options_of(cfg), rng)


def path_keys() -> tuple[tuple[str, ...], ...]:
    """Scenario key paths holding file paths (relative to the scenario file)."""
    return tuple(("data", "source", kind, field) for kind, s in SOURCES.items() for field in s.paths)


__all__ = [
    "DEFAULT_KIND",
    "SOURCES",
    "Source",
    "check_source_available",
    "datasets_of",
    "load_source",
    "options_of",
    "path_keys",
    "source",
]
