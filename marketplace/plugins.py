"""Where the runtime finds its protocols: the ``marketplace.protocols`` entry-point group.

A protocol is a package of its own (the four shipped ones live in ``marketplace/protocols/<name>/``;
a user's can live in any installed distribution). It registers one :class:`ProtocolSpec` under
the entry-point group ``marketplace.protocols``, in its ``pyproject.toml``::

    [project.entry-points."marketplace.protocols"]
    stc = "marketplace.protocols.stc.plugin:PROTOCOL"

The spec is light on purpose: its name, its scenario section (a frozen dataclass that the
scenario schema takes as the section named after the protocol) and where its *exchange* module
is. The exchange, which builds the roles and the report, is imported only when a run of that
protocol needs it (:func:`exchange`); loading every spec to build the scenario schema stays cheap.

Nothing in the runtime names a protocol: the runner, the drivers, the wire and the scenario loader
ask this module. ``docs/extending.md`` describes what an exchange module provides.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import re
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

GROUP = "marketplace.protocols"
"""The entry-point group every protocol registers under."""

NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
RESERVED = frozenset({"name", "protocol", "seed", "description", "parties", "data", "transport", "noise", "sweep", "lifetime"})
"""Top-level scenario keys: a protocol's section cannot take one of these names."""


class PluginError(RuntimeError):
    """A registered protocol that cannot be used: names the entry point and what is wrong."""


@dataclass(frozen=True)
class ProtocolSpec:
    """What a protocol registers: enough to build the scenario schema without importing its roles."""

    name: str
    """The scenario's ``protocol:`` value and the name of its section (lower case, ``[a-z0-9_]``)."""
    config: type
    """The scenario section: a frozen dataclass whose every field has a default, with the
    project's constraint markers (:mod:`marketplace.schema`) on its hints."""
    exchange: str
    """Dotted path of the exchange module (:func:`exchange` imports it on first use)."""
    messages: str | None = None
    """Dotted path of the module declaring the protocol's message kinds (:func:`marketplace.messages.kinds.kind`);
    imported with the exchange, so every kind a run uses is known before its first frame is decoded."""
    summary: str = ""
    """One line that ``marketplace protocols`` shows."""
    report_schema: str | None = None
    """Where the JSON-schema fragment of the protocol's own report keys is, as ``package:file``
    (a package resource, e.g. ``"my_protocol:report.schema.json"``): an object with ``properties``
    and ``required``, checked for a report of this protocol. None: the report's own keys go unchecked."""
    commands: str | None = None
    """``module:function`` that adds the protocol's own ``marketplace`` subcommands: it is called
    with argparse's subparsers and each subcommand it adds sets ``func(args) -> exit status``."""
    data_sources: tuple[str, ...] = field(default=())
    """Dotted paths of modules that declare a data source (a module-level ``SOURCE``) of this
    protocol's own; they join ``data.source.kind`` for every scenario."""


def _check(spec: Any, where: str) -> ProtocolSpec:
    if not isinstance(spec, ProtocolSpec):
        raise PluginError(f"{where}: expected a marketplace.plugins.ProtocolSpec, got {type(spec).__name__}")
    if not NAME.match(spec.name) or spec.name in RESERVED:
        raise PluginError(f"{where}: protocol name {spec.name!r} must match {NAME.pattern} and not be one of "
                          f"{sorted(RESERVED)}")
    if not isinstance(spec.config, type):
        raise PluginError(f"{where}: config must be a dataclass type, got {spec.config!r}")
    try:
        spec.config()
    except Exception as err:  # noqa: BLE001 - any failure means the section has no valid default
        raise PluginError(f"{where}: the section {spec.config.__name__} must build with every field at its "
                          f"default ({type(err).__name__}: {err})") from None
    return spec


@functools.cache
def protocols() -> dict[str, ProtocolSpec]:
    """Every registered protocol, by name, in name order (loaded once per process)."""
    found: dict[str, ProtocolSpec] = {}
    seen: dict[str, str] = {}
    for point in sorted(importlib.metadata.entry_points(group=GROUP), key=lambda p: (p.name, p.value)):
        where = f"entry point {point.name} = {point.value!r} ({GROUP})"
        if point.name in seen and seen[point.name] == point.value:
            continue  # the same distribution seen twice on sys.path
        try:
            spec = _check(point.load(), where)
        except PluginError:
            raise
        except Exception as err:  # noqa: BLE001 - a broken plug-in is reported with its entry point
            raise PluginError(f"{where}: could not be loaded ({type(err).__name__}: {err})") from err
        if spec.name != point.name:
            raise PluginError(f"{where}: the entry point is named {point.name!r} but its spec says {spec.name!r}")
        if spec.name in found:
            raise PluginError(f"{where}: protocol {spec.name!r} is registered twice ({seen[spec.name]!r} too)")
        found[spec.name] = spec
        seen[spec.name] = point.value
    if not found:
        raise PluginError(f"no protocol is registered under the entry-point group {GROUP!r}: install the "
                          "package (python3 -m pip install -e .) so that its entry points are visible")
    return dict(sorted(found.items()))


def names() -> tuple[str, ...]:
    """The registered protocol names, sorted."""
    return tuple(protocols())


def spec(name: str) -> ProtocolSpec:
    """The spec of protocol ``name``; ValueError naming the registered ones otherwise."""
    try:
        return protocols()[name]
    except KeyError:
        raise ValueError(f"unknown protocol {name!r}: use one of {list(protocols())}") from None


@functools.cache
def exchange(name: str) -> ModuleType:
    """The exchange module of protocol ``name``, imported on first use (its roles and message kinds
    with it)."""
    chosen = spec(name)
    if chosen.messages is not None:
        importlib.import_module(chosen.messages)
    return importlib.import_module(chosen.exchange)


def load_all() -> dict[str, ModuleType]:
    """Every protocol's exchange, imported: after this every message kind of every protocol is
    registered (what a tool that decodes any kind, such as the fuzzer, needs)."""
    return {name: exchange(name) for name in protocols()}


def add_commands(subparsers: Any) -> list[str]:
    """Let every registered protocol add its own subcommands; returns their names."""
    before = set(subparsers.choices)
    for chosen in protocols().values():
        if chosen.commands is None:
            continue
        module, sep, function = chosen.commands.partition(":")
        if not sep:
            raise PluginError(f"protocol {chosen.name!r}: commands must be 'module:function', got {chosen.commands!r}")
        getattr(importlib.import_module(module), function)(subparsers)
    return sorted(set(subparsers.choices) - before)


def report_fragment(name: str) -> dict[str, Any] | None:
    """The JSON-schema fragment of protocol ``name``'s own report keys, or None."""
    import json
    from importlib import resources

    where = spec(name).report_schema
    if where is None:
        return None
    package, sep, file = where.partition(":")
    if not sep or not package or not file:
        raise PluginError(f"protocol {name!r}: report_schema must be 'package:file', got {where!r}")
    try:
        fragment = json.loads(resources.files(package).joinpath(file).read_text(encoding="utf-8"))
    except (OSError, ModuleNotFoundError, ValueError) as err:
        raise PluginError(f"protocol {name!r}: cannot read its report schema {where!r} ({err})") from None
    if not isinstance(fragment, dict) or not isinstance(fragment.get("properties"), dict):
        raise PluginError(f"protocol {name!r}: its report schema {where!r} must be an object with 'properties'")
    return fragment
