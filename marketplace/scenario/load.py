"""Reading a scenario file: YAML, ``--set`` overrides, path resolution, then full validation.

Everything is checked before anything starts, and every problem is reported as a
:class:`ScenarioError` that names the file, the key path and what was expected (exit status 2).
"""

from __future__ import annotations

import copy
import re
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

import yaml

from marketplace import plugins
from marketplace.data.sources import check_source_available, path_keys
from marketplace.datasets import DatasetMissing
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError, build, closest_keys, describe_value, dotted_keys, key_is_known, to_plain

PATH_KEYS = (*path_keys(), ("transport", "curve_keys"), ("noise", "keys"), ("lifetime", "ledgers"))
"""Keys holding file paths, resolved relative to the scenario file."""


class ScenarioLoader(yaml.SafeLoader):
    """PyYAML's safe loader, plus the YAML 1.2 reading of numbers in scientific notation: ``1e-5``
    and ``2E+3`` are floats (YAML 1.1, which PyYAML follows, wants a dot: ``1.0e-5``)."""


class FastScenarioLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """:class:`ScenarioLoader` on libyaml's C parser (when PyYAML was built with it): ten times as
    fast, which a served marketplace feels on every request. Its errors point less precisely, so
    text it refuses is parsed again by :class:`ScenarioLoader` for the message."""


for _loader in (ScenarioLoader, FastScenarioLoader):
    _loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."),
    )


def read_yaml(text: str) -> Any:
    """Parse YAML text with :class:`FastScenarioLoader`, and text it refuses again with
    :class:`ScenarioLoader`, whose error names the place more precisely (safe: plain data only)."""
    try:
        return yaml.load(text, Loader=FastScenarioLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError:
        return yaml.load(text, Loader=ScenarioLoader)  # noqa: S506 - a SafeLoader subclass


class ScenarioError(ValueError):
    """A scenario that cannot run; the message names the file and the key path."""

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        super().__init__(f"{source}: {path}: {message}" if path else f"{source}: {message}")


class ScenarioDataMissing(ScenarioError, DatasetMissing):
    """A scenario whose dataset is not in the data cache: a :class:`ScenarioError` (the command
    line's "bad scenario", naming the file and ``data.source``) and a
    :class:`~marketplace.datasets.DatasetMissing` (``name``, ``missing``, ``fetch_command``)."""

    def __init__(self, source: str, path: str, missing: DatasetMissing) -> None:
        ScenarioError.__init__(self, source, path, str(missing))
        self.name, self.missing, self.home = missing.name, missing.missing, missing.home

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: the typed config, its plain form (for reports) and where it came from."""

    config: ScenarioConfig
    raw: dict[str, Any]
    source: str

    @classmethod
    def from_file(
        cls,
        path: str | Path,
        overrides: Mapping[str, Any] | None = None,
        /,
        *,
        sets: list[str] | tuple[str, ...] = (),
        **fields: Any,
    ) -> Scenario:
        """Read and validate the scenario file at ``path``. Relative paths in it are read from the
        file's folder. ``overrides``, ``sets`` and ``fields`` as in :meth:`with_overrides`, except
        that ``sets`` are the command line's ``key.path=value`` texts (parsed as YAML)."""
        scenario = load_scenario(path, sets)
        return scenario.with_overrides(overrides, **fields) if overrides or fields else scenario

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        overrides: Mapping[str, Any] | None = None,
        /,
        *,
        source: str = "<dict>",
        base_dir: str | Path | None = None,
        **fields: Any,
    ) -> Scenario:
        """Validate a scenario given as a mapping (what a scenario file holds). Relative paths in it
        are read from ``base_dir`` (default: the working folder); ``source`` names it in errors."""
        if not isinstance(data, Mapping):
            raise ScenarioError(source, "", f"expected a mapping of scenario keys, got {describe_value(data)}")
        return parse_scenario(
            _plain_value(data), source=source, base_dir=Path(base_dir or Path.cwd()), values=_values(overrides, fields)
        )

    @classmethod
    def from_yaml(
        cls,
        text: str,
        overrides: Mapping[str, Any] | None = None,
        /,
        *,
        source: str = "<yaml>",
        base_dir: str | Path | None = None,
        **fields: Any,
    ) -> Scenario:
        """Validate a scenario given as YAML text (what a scenario file holds)."""
        return parse_scenario(
            read_scenario_text(text, source),
            source=source,
            base_dir=Path(base_dir or Path.cwd()),
            values=_values(overrides, fields),
        )

    def with_overrides(self, overrides: Mapping[str, Any] | None = None, /, **fields: Any) -> Scenario:
        """A new validated scenario with some values changed (this one is left as it is).

        ``overrides`` maps dotted key paths to values: ``{"summarize.rounds": 20, "parties.owners": 8}``.
        ``fields`` are top-level keys: ``seed=3``, ``summarize={"rounds": 20}``. A mapping value
        updates the mapping at its key, key by key (``summarize={"rounds": 20}`` keeps every other
        ``summarize`` setting); any other value replaces. Raises :class:`ScenarioError` naming the
        override, with the closest valid keys for a key no scenario has.
        """
        return parse_scenario(self.raw, source=self.source, base_dir=Path.cwd(), values=_values(overrides, fields))

    def dump_yaml(self, *, protocol_only: bool = False) -> str:
        """The resolved scenario as YAML; ``protocol_only`` leaves out the sections of the other
        protocols and of the data sources not chosen, and keeps every other key at its value or
        default, ``lifetime`` whole (what ``marketplace validate`` prints; reading it back gives the
        same config)."""
        if not protocol_only:
            return yaml.safe_dump(self.raw, sort_keys=False)
        out = protocol_sections(self.raw)
        out["lifetime"] = to_plain(self.config.lifetime)  # its terms too, left out of raw when none are set
        return yaml.safe_dump(out, sort_keys=False)


def _values(overrides: Mapping[str, Any] | None, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted-path overrides, then keyword ones (``seed=3``), as one ordered mapping."""
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ScenarioError(
            "overrides",
            "",
            f"expected a mapping of key paths to values such as "
            f"{{'summarize.rounds': 20}}, got {describe_value(overrides)}",
        )
    return {**(overrides or {}), **fields}


def protocol_sections(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` without the other protocols' sections and the unchosen data sources' options: every
    key that matters to this scenario (each generic section, the protocol's own)."""
    protocol = raw.get("protocol")
    sections = plugins.names()
    out = {k: copy.deepcopy(v) for k, v in raw.items() if k not in sections or k == protocol}
    source = (out.get("data") or {}).get("source")
    if isinstance(source, dict) and "kind" in source:
        out["data"]["source"] = {k: v for k, v in source.items() if k in ("kind", source["kind"])}
    return out


def without_unused_settings(raw: dict[str, Any]) -> dict[str, Any]:
    """:func:`protocol_sections`, without an empty sweep and lifetime settings without ledgers (a
    file written for others to read, such as ``marketplace shares``' ``market.yaml``). Every key left
    out holds its default."""
    out = protocol_sections(raw)
    sweep = out.get("sweep")
    if isinstance(sweep, dict) and not sweep.get("vary"):
        out.pop("sweep")
    life = out.get("lifetime")
    if isinstance(life, dict) and life.get("ledgers") is None:
        out.pop("lifetime")
    return out


def apply_override(raw: dict[str, Any], assignment: str, source: str = "--set") -> None:
    """Apply one ``key.path=value`` override in place; the value is parsed as a YAML scalar/list.
    An error names the option and the assignment given (``--set nosuch.key=1``) and, for a key the
    scenario schema does not have, the closest valid keys."""
    key, sep, text = assignment.partition("=")
    given = f"{source} {assignment}"
    if not sep or not key.strip():
        raise ScenarioError(given, "", "expected key.path=value (e.g. --set summarize.rounds=20)")
    key = key.strip()
    if not key_is_known(ScenarioConfig, key):
        raise ScenarioError(given, "", unknown_key_message(key))
    set_path(raw, key, parse_value(text, key, given), given)


def apply_value(raw: dict[str, Any], key: str, value: Any, source: str) -> None:
    """Set the Python ``value`` at the dotted ``key`` of ``raw`` in place (the Python API's
    overrides). A mapping updates the mapping already there key by key, at any depth; any other
    value replaces what was there. A key no scenario has is refused as ``--set`` refuses it, with
    the closest valid keys."""
    key = key.strip() if isinstance(key, str) else key
    if not isinstance(key, str) or not key:
        raise ScenarioError(source, "", f"expected a key path such as 'summarize.rounds', got {key!r}")
    for path in (key, *_nested_keys(key, value)):
        if not key_is_known(ScenarioConfig, path):
            raise ScenarioError(source, "", unknown_key_message(path))
    current: Any = raw
    for part in key.split("."):
        current = current.get(part) if isinstance(current, dict) else None
    value = _plain_value(value)
    set_path(
        raw, key, _merged(current, value) if isinstance(current, dict) and isinstance(value, dict) else value, source
    )


def _nested_keys(key: str, value: Any) -> list[str]:
    """The dotted keys a mapping ``value`` at ``key`` sets (``summarize={"rounds": 3}`` sets
    ``summarize.rounds``), down to a key that holds a dot itself (a free mapping's, as
    ``sweep.vary``'s ``summarize.rounds``: it is checked as the file would be)."""
    if not isinstance(value, Mapping):
        return []
    out = []
    for k, v in value.items():
        if isinstance(k, str) and "." not in k:
            out += [f"{key}.{k}", *_nested_keys(f"{key}.{k}", v)]
    return out


def _plain_value(value: Any) -> Any:
    """``value`` as YAML would give it: mappings as dicts, tuples as lists, paths as text (a copy)."""
    if isinstance(value, Mapping):
        return {k: _plain_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_value(v) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    return copy.deepcopy(value)


def _merged(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(old)
    for k, v in new.items():
        out[k] = _merged(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def unknown_key_message(key: str) -> str:
    """Why ``key`` is refused: no scenario has it, and the closest keys it may have meant."""
    close = closest_keys(ScenarioConfig, key)
    if close:
        hint = f"did you mean {' or '.join(close)}?"
    else:
        hint = f"the top-level keys are {', '.join(k for k in dotted_keys(ScenarioConfig) if '.' not in k)}"
    return f"no scenario key {key!r}; {hint}"


def override_for(path: str, overrides: list[str] | tuple[str, ...]) -> str | None:
    """The last ``--set`` assignment in ``overrides`` that set the value at ``path`` (or a mapping
    holding it), if any: a value refused there is reported against that assignment."""
    for assignment in reversed(overrides):
        key = assignment.partition("=")[0].strip()
        if key and (path == key or path.startswith((key + ".", key + "["))):
            return assignment
    return None


def parse_value(text: str, key: str = "", source: str = "--set") -> Any:
    """A command-line value parsed as YAML (scientific notation such as ``1e-3`` is a number, as in
    scenario files); any other text that reads as a finite float (``1_000.5``) becomes one too."""
    try:
        value = read_yaml(text) if text.strip() else ""
    except yaml.YAMLError as err:
        raise ScenarioError(source, key, f"value {text!r} is not valid YAML ({err})") from None
    if isinstance(value, str):
        try:
            return float(value) if value.strip().lower() not in ("nan", "inf", "-inf", "+inf", "infinity") else value
        except ValueError:
            return value
    return value


def set_path(raw: dict[str, Any], key: str, value: Any, source: str = "--set") -> None:
    """Set ``raw[a][b][c] = value`` for ``key = "a.b.c"``, creating mappings on the way."""
    parts = key.strip().split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        nxt = node.get(part)
        if nxt is None:
            nxt = node[part] = {}
        if not isinstance(nxt, dict):
            raise ScenarioError(
                source,
                ".".join(parts[: i + 1]),
                f"cannot set {key}: this key holds {type(nxt).__name__}, not a mapping",
            )
        node = nxt
    node[parts[-1]] = value


def _resolve_paths(raw: dict[str, Any], base: Path) -> None:
    for keys in PATH_KEYS:
        node: Any = raw
        for k in keys[:-1]:
            node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(keys[-1]), str):
            p = Path(node[keys[-1]]).expanduser()
            node[keys[-1]] = str(p if p.is_absolute() else (base / p).resolve())


def _refuse_folder_paths(raw: dict[str, Any], source: str) -> None:
    """A clear message for the data folder paths (``root:``) that scenarios used to carry: public
    datasets are now found by name in the data cache."""
    section = ((raw.get("data") or {}).get("source") or {}) if isinstance(raw.get("data"), dict) else {}
    if not isinstance(section, dict):
        return
    for kind, options in section.items():
        if isinstance(options, dict) and "root" in options:
            raise ScenarioError(
                source,
                f"data.source.{kind}.root",
                "datasets are found by name in the data cache "
                "(`marketplace data path`), not in a folder given here: remove `root:` and fetch the "
                "data once with `marketplace data fetch NAME` (`marketplace data list` names them)",
            )


def check_privacy_plan(config: ScenarioConfig) -> None:
    """Refuse a run whose settings cannot work, or whose release plan passes a configured budget,
    before anything starts: the protocol's own checks, then each party's plan (once per distinct
    plan: the owners of a run usually share one). The protocol answers from its
    :class:`~marketplace.plugins.ScenarioRules` (:func:`marketplace.plugins.scenario_rules`), which import no role."""
    rules = plugins.scenario_rules(config.protocol)
    rules.check_plan(config)
    checked: set[tuple[Any, ...]] = set()
    for party in [*(f"owner-{i}" for i in range(1, config.parties.owners + 1)), "consumer"]:
        plan = rules.release_plan(config, party)
        if plan is None:
            continue
        shape = (tuple((a.name, a.theorem, a.delta, a.budget, a.gaussian) for a in plan.accounts), plan.releases)
        if shape not in checked:  # the owners of a run usually share one plan but for their names
            plan.check()
            checked.add(shape)


def parse_scenario(
    raw: Any,
    *,
    source: str,
    base_dir: Path,
    overrides: list[str] | tuple[str, ...] = (),
    values: Mapping[str, Any] | None = None,
    public_schema: Mapping[str, Any] | None = None,
) -> Scenario:
    """Validate an already-parsed mapping (from YAML or Python) into a :class:`Scenario`.

    ``overrides`` are ``key.path=value`` texts (the command line's ``--set``), applied first;
    ``values`` maps key paths to Python values (see :func:`apply_value`), applied next. An error in
    a value either set names the override, as ``--set`` does. ``public_schema`` (raw, as in a
    marketplace's ``data.schema``) is the schema of the marketplace a request is sent to: the
    protocol's public bounds the request leaves out come from it, as from a scenario's own schema."""
    if raw is None:
        raise ScenarioError(
            source,
            "",
            "the file is empty; a scenario is a mapping with at least `name:` and "
            "`protocol:` (see scenarios/quickstart.yaml)",
        )
    if not isinstance(raw, dict):
        raise ScenarioError(
            source, "", f"expected a mapping (key: value lines) at the top level, got {describe_value(raw)}"
        )
    raw = copy.deepcopy(raw)
    for assignment in overrides:
        apply_override(raw, assignment)
    given = [f"{key}={reprlib.repr(value)}" for key, value in (values or {}).items()]
    for (key, value), assignment in zip((values or {}).items(), given):
        apply_value(raw, key, value, f"override {assignment}")
    _refuse_folder_paths(raw, source)
    _resolve_paths(raw, base_dir)
    try:
        _public_defaults(raw, public_schema)
        config = build(ScenarioConfig, raw)
        if not config.data.schema_only:
            check_source_available(config.data.source, "data.source")
        check_privacy_plan(config)
    except SchemaError as err:
        value_set = override_for(err.path, given)  # a value given in Python (values), else a --set
        if value_set is not None:
            where = f"override {value_set}"
        else:
            flag_set = override_for(err.path, overrides)
            where = f"--set {flag_set}" if flag_set is not None else source
        raise ScenarioError(where, err.path, _refusal(err, raw)) from None
    except DatasetMissing as err:
        raise ScenarioDataMissing(source, "data.source", err) from None
    plain = to_plain(config)
    if config.data.schema_only:  # the defaults of a simulation's sections do not apply: leave them out
        for key in ("source", "partition"):
            plain["data"].pop(key, None)
    else:
        plain["data"].pop("schema", None)
    for key in ("terms", "owner_terms"):  # a run that sells under no terms reports its settings as before they existed
        if not plain["lifetime"][key]:
            plain["lifetime"].pop(key)
    return Scenario(config=config, raw=plain, source=source)


def _refusal(err: SchemaError, raw: dict[str, Any]) -> str:
    """What the error of a refused value says: expected and found, except for a ``protocol:`` that names
    an installed plug-in that cannot be loaded, which says why (:func:`marketplace.plugins.broken`); an
    unknown protocol's error names the broken plug-ins too, when there are some."""
    message = f"expected {err.expected}, got {err.got}"
    if err.path != "protocol" or not plugins.broken():
        return message
    protocol = raw.get("protocol")
    if isinstance(protocol, str) and protocol in plugins.broken():
        try:
            plugins.spec(protocol)
        except plugins.PluginError as why:
            return str(why)
    return f"{message} (installed but cannot be loaded: {list(plugins.broken())}; `marketplace protocols` says why)"


def _public_defaults(raw: dict[str, Any], public_schema: Mapping[str, Any] | None = None) -> None:
    """In a marketplace described by its public schema (``data.schema``, or ``public_schema``: the
    schema of the marketplace a request is sent to), the protocol's public bounds that the scenario
    leaves out (a sketch's box, stc's domain) come from the schema's ranges: the protocol's
    ``public_defaults(section, schema)`` (:func:`marketplace.plugins.scenario_rules`; None: the
    section stays), which may refuse bounds that disagree with the schema (a
    :class:`~marketplace.schema.SchemaError`). A schema that does not build is left for the
    scenario's own validation to name."""
    from marketplace.data.public_schema import DataSchema

    data, protocol = raw.get("data"), raw.get("protocol")
    given = public_schema if public_schema is not None else (data.get("schema") if isinstance(data, dict) else None)
    if not isinstance(given, Mapping) or protocol not in plugins.names():
        return
    try:
        schema = build(DataSchema, dict(given), "data.schema")
    except SchemaError:
        return
    section = raw.get(protocol)
    filled = plugins.scenario_rules(protocol).public_defaults(
        dict(section) if isinstance(section, dict) else None, schema
    )
    if filled is not None:
        raw[protocol] = filled


def read_scenario_text(text: str, source: str) -> Any:
    """The YAML ``text`` of a scenario, parsed; :class:`ScenarioError` with the line and column
    when it is not valid YAML."""
    try:
        return read_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ScenarioError(source, "", f"not valid YAML{where}: {getattr(err, 'problem', err)}") from None


def load_scenario(
    path: str | Path, overrides: list[str] | tuple[str, ...] = (), *, public_schema: Mapping[str, Any] | None = None
) -> Scenario:
    """Read and validate the scenario file at ``path``, applying ``key.path=value`` overrides
    (``public_schema``: as for :func:`parse_scenario`)."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(str(p), "", "scenario file not found" if not p.exists() else "not a regular file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(str(p), "", f"not UTF-8 text ({err})") from None
    return parse_scenario(
        read_scenario_text(text, str(p)),
        source=str(p),
        base_dir=p.resolve().parent,
        overrides=overrides,
        public_schema=public_schema,
    )
