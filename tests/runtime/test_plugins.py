"""The protocol registry: entry points in, ProtocolSpec out, with clear errors for a broken plug-in;
the runtime resolves a run's exchange once and passes it along."""

from __future__ import annotations

import importlib.metadata
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

from marketplace import plugins
from marketplace.plugins import GROUP, PluginError, ProtocolSpec
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario


@dataclass(frozen=True)
class _Section:
    rounds: int = 3


@dataclass(frozen=True)
class _NeedsValue:
    rounds: int


GOOD = ProtocolSpec(name="toy", config=_Section, exchange="marketplace.protocols.stc.exchange:StcExchange")


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
        assert spec.exchange == f"marketplace.protocols.{name}.exchange:{name.capitalize()}Exchange"
        assert isinstance(plugins.exchange(name), plugins.Exchange)
        assert spec.messages == f"marketplace.protocols.{name}.messages"
        assert plugins.report_fragment(name)["properties"]
    assert '[project.entry-points."marketplace.protocols"]' in (ROOT / "pyproject.toml").read_text()


def test_an_unknown_protocol_names_the_registered_ones():
    with pytest.raises(
        ValueError, match=r"unknown protocol 'nosuch': use one of \['pfds', 'sketch', 'stc', 'summarize'\]"
    ):
        plugins.spec("nosuch")


def test_a_good_spec_is_taken(monkeypatch):
    _registry(monkeypatch, toy=GOOD)
    assert plugins.names() == ("toy",)


@pytest.mark.parametrize(
    "specs, message",
    [
        (
            {"toy": object()},
            r"entry point toy = 'fake.toy:PROTOCOL' \(marketplace.protocols\): expected a "
            r"marketplace.plugins.ProtocolSpec, got object",
        ),
        (
            {"toy": ProtocolSpec(name="other", config=_Section, exchange="x:X")},
            r"the entry point is named 'toy' but its spec says 'other'",
        ),
        (
            {"Bad-Name": ProtocolSpec(name="Bad-Name", config=_Section, exchange="x:X")},
            r"protocol name 'Bad-Name' must match",
        ),
        (
            {"data": ProtocolSpec(name="data", config=_Section, exchange="x:X")},
            r"protocol name 'data' must match .* and not be one of",
        ),
        (
            {"toy": ProtocolSpec(name="toy", config=_NeedsValue, exchange="x:X")},
            r"the section _NeedsValue must build with every field at its default",
        ),
        ({}, r"no protocol is registered under the entry-point group 'marketplace.protocols': install the package"),
    ],
    ids=["not-a-spec", "name-mismatch", "bad-name", "reserved-name", "section-without-defaults", "none"],
)
def test_a_broken_plugin_is_refused_naming_its_entry_point(monkeypatch, specs, message):
    _registry(monkeypatch, **specs)
    with pytest.raises(PluginError, match=message):
        plugins.protocols()


def test_an_exchange_that_is_not_module_attribute_is_refused_with_the_spec(monkeypatch):
    _registry(monkeypatch, toy=ProtocolSpec(name="toy", config=_Section, exchange="marketplace.protocols.stc.exchange"))
    with pytest.raises(
        PluginError,
        match=r"entry point toy = 'fake.toy:PROTOCOL' .*: exchange must be "
        r"'module:attribute' naming a marketplace.plugins.Exchange subclass or instance, got "
        r"'marketplace.protocols.stc.exchange'",
    ):
        plugins.protocols()


def _fake_exchange(monkeypatch, **attributes) -> None:
    """A module ``fake_exchange`` holding ``attributes``, and protocol ``toy`` whose spec names
    ``fake_exchange:Toy``."""
    module = types.ModuleType("fake_exchange")
    module.__dict__.update(attributes)
    monkeypatch.setitem(sys.modules, "fake_exchange", module)
    _registry(monkeypatch, toy=ProtocolSpec(name="toy", config=_Section, exchange="fake_exchange:Toy"))


def _complete_except(*left_out: str) -> type:
    """An Exchange subclass implementing every required method (each doing nothing) but ``left_out``."""
    body = {
        name: staticmethod(lambda *args, **kwargs: None)
        for name in plugins.Exchange.__abstractmethods__
        if name not in left_out
    }
    return type("Toy", (plugins.Exchange,), body)


def test_an_exchange_lacking_a_required_method_is_refused_at_load_naming_it(monkeypatch):
    _fake_exchange(monkeypatch, Toy=_complete_except("report"))
    plugins.protocols()  # the spec alone is fine: the exchange is imported when a run needs it
    with pytest.raises(
        PluginError,
        match=r"^entry point toy = 'fake.toy:PROTOCOL' \(marketplace.protocols\): exchange "
        r"'fake_exchange:Toy': Toy leaves the required method report unimplemented$",
    ):
        plugins.exchange("toy")


def test_every_missing_method_is_named(monkeypatch):
    _fake_exchange(monkeypatch, Toy=_complete_except("report", "sweep_row", "tables"))
    with pytest.raises(PluginError, match=r"Toy leaves the required methods report, sweep_row, tables unimplemented"):
        plugins.exchange("toy")


def test_an_object_that_is_not_an_exchange_is_refused(monkeypatch):
    class Toy:  # every method, but not an Exchange: the contract is the class, not the names
        pass

    _fake_exchange(monkeypatch, Toy=Toy)
    with pytest.raises(
        PluginError,
        match=r"exchange 'fake_exchange:Toy': expected a subclass or instance of "
        r"marketplace.plugins.Exchange, got class .*Toy",
    ):
        plugins.exchange("toy")


def test_a_missing_attribute_is_named(monkeypatch):
    _fake_exchange(monkeypatch)
    with pytest.raises(PluginError, match=r"exchange 'fake_exchange:Toy' could not be loaded \(AttributeError"):
        plugins.exchange("toy")


def test_a_complete_exchange_class_or_instance_is_taken(monkeypatch):
    cls = _complete_except()
    _fake_exchange(monkeypatch, Toy=cls)
    assert isinstance(plugins.exchange("toy"), cls)
    instance = cls()
    _fake_exchange(monkeypatch, Toy=instance)
    assert plugins.exchange("toy") is instance


def test_the_optional_hooks_change_nothing_by_default():
    exchange = _complete_except()()
    config = load_scenario(ROOT / "scenarios" / "quickstart.yaml").config
    assert exchange.sweep_headline == () and exchange.make_world(config) is None
    assert exchange.check_world(config, None) is None and exchange.nothing_released(config, {}) is None
    assert exchange.owner_exposure(config, {}) is None and exchange.public_defaults({"a": 1}, None) is None
    declared = exchange.owner_cost(config, "owner-1")  # no declaration: an unbounded release, never "nothing"
    assert declared is not None and declared.cost is None
    assert "declares no lifetime cost for its owners" in declared.unbounded
    assert exchange.consumer_cost(config).cost is None


def test_a_plugin_that_fails_to_load_is_named(monkeypatch):
    point = importlib.metadata.EntryPoint(name="toy", value="no_such_module_anywhere:PROTOCOL", group=GROUP)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [point])
    plugins.protocols.cache_clear()
    with pytest.raises(
        PluginError,
        match=r"entry point toy = 'no_such_module_anywhere:PROTOCOL' .* could not be loaded \(ModuleNotFoundError",
    ):
        plugins.protocols()


def test_a_bad_report_fragment_path_is_named(monkeypatch):
    _registry(monkeypatch, toy=ProtocolSpec(name="toy", config=_Section, exchange="x:X", report_schema="no-colon"))
    with pytest.raises(PluginError, match=r"report_schema must be 'package:file', got 'no-colon'"):
        plugins.report_fragment("toy")


def test_a_run_resolves_its_exchange_once(monkeypatch, tmp_path: Path):
    scenario = load_scenario(ROOT / "scenarios" / "quickstart.yaml", ["summarize.rounds=3", "summarize.baselines=[]"])
    calls: list[str] = []
    real = plugins.exchange

    def counting(name: str):
        calls.append(name)
        return real(name)

    monkeypatch.setattr(plugins, "exchange", counting)  # every module asks through plugins.exchange
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")
    assert report["status"] == "completed"
    assert calls == ["summarize"]


def test_marketplace_protocols_lists_every_registered_protocol():
    import json
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "marketplace", "protocols", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [row["name"] for row in rows] == ["pfds", "sketch", "stc", "summarize"]
    assert all(
        row["summary"] and row["exchange"].startswith(f"marketplace.protocols.{row['name']}.exchange:") for row in rows
    )
    text = subprocess.run(
        [sys.executable, "-m", "marketplace", "protocols"], capture_output=True, text=True, timeout=120, cwd=ROOT
    ).stdout
    assert text.splitlines()[0].startswith("pfds ") and "marketplace.protocols.summarize.exchange" in text


def test_reading_a_scenario_loads_the_protocol_specs_not_their_libraries():
    """Every process that reads a scenario (each party, each command) loads every protocol's spec: a
    spec that pulled its protocol's cores would cost each of them scikit-learn's and SciPy's imports."""
    import subprocess
    import sys

    code = (
        "import sys; from marketplace.scenario import load_scenario; load_scenario('scenarios/quickstart.yaml'); "
        "print(sorted(m for m in ('sklearn', 'scipy.stats', 'scipy.optimize', 'matplotlib') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
