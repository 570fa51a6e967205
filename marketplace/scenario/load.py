"""Reading a scenario file: YAML, ``--set`` overrides, path resolution, then full validation.

Everything is checked before anything starts, and every problem is reported as a
:class:`ScenarioError` that names the file, the key path and what was expected (exit status 2).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from marketplace.data.sources import check_source_available
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError, build, to_plain

PATH_KEYS = (("data", "source", "csv", "path"), ("data", "source", "adult", "root"), ("data", "source", "mnist", "root"),
             ("data", "source", "lifesci", "root"), ("data", "source", "occupancy", "root"),
             ("data", "source", "table", "root"), ("data", "source", "office_caltech", "root"),
             ("data", "source", "superconductivity", "root"), ("transport", "curve_keys"))


class ScenarioError(ValueError):
    """A scenario that cannot run; the message names the file and the key path."""

    def __init__(self, source: str, path: str, message: str) -> None:
        self.source = source
        self.path = path
        super().__init__(f"{source}: {path}: {message}" if path else f"{source}: {message}")


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: the typed config, its plain form (for reports) and where it came from."""

    config: ScenarioConfig
    raw: dict[str, Any]
    source: str

    def dump_yaml(self) -> str:
        return yaml.safe_dump(self.raw, sort_keys=False)


def apply_override(raw: dict[str, Any], assignment: str, source: str = "--set") -> None:
    """Apply one ``key.path=value`` override in place; the value is parsed as a YAML scalar/list."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(source, "", f"override {assignment!r} must look like key.path=value")
    set_path(raw, key, parse_value(text, key, source), source)


def parse_value(text: str, key: str = "", source: str = "--set") -> Any:
    """A command-line value parsed as YAML; numbers YAML 1.1 leaves as strings (``1e-3``) become floats."""
    try:
        value = yaml.safe_load(text) if text.strip() else ""
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
            raise ScenarioError(source, ".".join(parts[: i + 1]), f"cannot set {key}: this key holds {type(nxt).__name__}, not a mapping")
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


def check_privacy_plan(config: ScenarioConfig) -> None:
    """Refuse a run whose planned privacy spend exceeds a configured budget, before anything starts."""
    from marketplace.exchanges import exchange

    exchange(config.protocol).check_plan(config)


def parse_scenario(raw: Any, *, source: str, base_dir: Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Validate an already-parsed mapping (from YAML or Python) into a :class:`Scenario`."""
    if not isinstance(raw, dict):
        raise ScenarioError(source, "", f"expected a mapping at the top level, got {type(raw).__name__}")
    raw = copy.deepcopy(raw)
    for assignment in overrides:
        apply_override(raw, assignment)
    _resolve_paths(raw, base_dir)
    try:
        config = build(ScenarioConfig, raw)
        check_source_available(config.data.source, "data.source")
        check_privacy_plan(config)
    except SchemaError as err:
        raise ScenarioError(source, err.path, f"expected {err.expected}, got {err.got}") from None
    return Scenario(config=config, raw=to_plain(config), source=source)


def load_scenario(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Scenario:
    """Read and validate the scenario file at ``path``, applying ``key.path=value`` overrides."""
    p = Path(path)
    if not p.is_file():
        raise ScenarioError(str(p), "", "scenario file not found" if not p.exists() else "not a regular file")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ScenarioError(str(p), "", f"not valid YAML{where}: {getattr(err, 'problem', err)}") from None
    except UnicodeDecodeError as err:
        raise ScenarioError(str(p), "", f"not UTF-8 text ({err})") from None
    return parse_scenario(raw, source=str(p), base_dir=p.resolve().parent, overrides=overrides)
