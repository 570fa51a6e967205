"""The protocol registry: entry points in, ProtocolSpec out, with clear errors for a broken plug-in;
the runtime resolves a run's exchange once and passes it along."""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT
from marketplace import plugins
from marketplace.plugins import GROUP, PluginError, ProtocolSpec
from marketplace.runner import run as run_module
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario


@dataclass(frozen=True)
class _Section:
    rounds: int = 3


@dataclass(frozen=True)
class _NeedsValue:
    rounds: int


GOOD = ProtocolSpec(name="toy", config=_Section, exchange="marketplace.protocols.stc.exchange")


def _registry(monkeypatch, **specs) -> None:
    """Pretend the installed entry points are ``specs`` (name -> object the entry point loads)."""
    points = [importlib.metadata.EntryPoint(name=name, value=f"fake.{name}:PROTOCOL", group=GROUP) for name in specs]
    monkeypatch.setattr(importlib.metadata.EntryPoint, "load", lambda self: specs[self.name])
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [p for p in points if p.group == group])
    plugins.protocols.cache_clear()
    plugins.exchange.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_registry():
    yield
    plugins.protocols.cache_clear()
    plugins.exchange.cache_clear()


def test_the_shipped_protocols_are_registered_by_entry_point():
    assert plugins.names() == ("pfds", "sketch", "stc", "summarize")
    for name in plugins.names():
        spec = plugins.spec(name)
        assert spec.exchange == f"marketplace.protocols.{name}.exchange"
        assert spec.messages == f"marketplace.protocols.{name}.messages"
        assert plugins.report_fragment(name)["properties"]
    assert '[project.entry-points."marketplace.protocols"]' in (ROOT / "pyproject.toml").read_text()


def test_an_unknown_protocol_names_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown protocol 'nosuch': use one of \['pfds', 'sketch', 'stc', 'summarize'\]"):
        plugins.spec("nosuch")


def test_a_good_spec_is_taken(monkeypatch):
    _registry(monkeypatch, toy=GOOD)
    assert plugins.names() == ("toy",)


@pytest.mark.parametrize("specs, message", [
    ({"toy": object()}, r"entry point toy = 'fake.toy:PROTOCOL' \(marketplace.protocols\): expected a marketplace.plugins.ProtocolSpec, got object"),
    ({"toy": ProtocolSpec(name="other", config=_Section, exchange="x")}, r"the entry point is named 'toy' but its spec says 'other'"),
    ({"Bad-Name": ProtocolSpec(name="Bad-Name", config=_Section, exchange="x")}, r"protocol name 'Bad-Name' must match"),
    ({"data": ProtocolSpec(name="data", config=_Section, exchange="x")}, r"protocol name 'data' must match .* and not be one of"),
    ({"toy": ProtocolSpec(name="toy", config=_NeedsValue, exchange="x")}, r"the section _NeedsValue must build with every field at its default"),
    ({}, r"no protocol is registered under the entry-point group 'marketplace.protocols': install the package"),
], ids=["not-a-spec", "name-mismatch", "bad-name", "reserved-name", "section-without-defaults", "none"])
def test_a_broken_plugin_is_refused_naming_its_entry_point(monkeypatch, specs, message):
    _registry(monkeypatch, **specs)
    with pytest.raises(PluginError, match=message):
        plugins.protocols()


def test_a_plugin_that_fails_to_load_is_named(monkeypatch):
    point = importlib.metadata.EntryPoint(name="toy", value="no_such_module_anywhere:PROTOCOL", group=GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [point])
    plugins.protocols.cache_clear()
    with pytest.raises(PluginError, match=r"entry point toy = 'no_such_module_anywhere:PROTOCOL' .* could not be loaded \(ModuleNotFoundError"):
        plugins.protocols()


def test_a_bad_report_fragment_path_is_named(monkeypatch):
    _registry(monkeypatch, toy=ProtocolSpec(name="toy", config=_Section, exchange="x", report_schema="no-colon"))
    with pytest.raises(PluginError, match=r"report_schema must be 'package:file', got 'no-colon'"):
        plugins.report_fragment("toy")


def test_a_run_resolves_its_exchange_once(monkeypatch, tmp_path: Path):
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml", ["summarize.rounds=3", "summarize.baselines=[]"])
    calls: list[str] = []
    real = plugins.exchange

    def counting(name: str):
        calls.append(name)
        return real(name)

    monkeypatch.setattr(plugins, "exchange", counting)  # every other module asks through plugins.exchange
    monkeypatch.setattr(run_module, "exchange", counting)
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")
    assert report["status"] == "completed"
    assert calls == ["summarize"]


def test_marketplace_protocols_lists_every_registered_protocol():
    import json
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "marketplace", "protocols", "--json"], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["name"] for row in rows] == ["pfds", "sketch", "stc", "summarize"]
    assert all(row["summary"] and row["exchange"] == f"marketplace.protocols.{row['name']}.exchange" for row in rows)
    text = subprocess.run([sys.executable, "-m", "marketplace", "protocols"], capture_output=True, text=True, timeout=120,
                          cwd=ROOT).stdout
    assert text.splitlines()[0].startswith("pfds ") and "marketplace.protocols.summarize.exchange" in text


def test_reading_a_scenario_loads_the_protocol_specs_not_their_libraries():
    """Every process that reads a scenario (each party, each command) loads every protocol's spec: a
    spec that pulled its protocol's cores would cost each of them scikit-learn's and SciPy's imports."""
    import subprocess
    import sys

    code = ("import sys; from marketplace.scenario import load_scenario; load_scenario('scenarios/quickstart.yaml'); "
            "print(sorted(m for m in ('sklearn', 'scipy.stats', 'scipy.optimize', 'matplotlib') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
