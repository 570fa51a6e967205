"""The protocol registry: entry points in, ProtocolSpec out; a broken plug-in is left out and named
with its reason (the other protocols and every command work), and a scenario naming it is refused with
that reason; the runtime resolves a run's exchange once and passes it along."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import ROOT

from marketplace import plugins
from marketplace.cli import main
from marketplace.cli.common import EXIT_OK, EXIT_USAGE
from marketplace.plugins import GROUP, PluginError, ProtocolSpec
from marketplace.runner.run import run_scenario
from marketplace.scenario import ScenarioError, load_scenario


@dataclass(frozen=True)
class _Section:
    rounds: int = 3


@dataclass(frozen=True)
class _NeedsValue:
    rounds: int


GOOD = ProtocolSpec(name="toy", config=_Section, exchange="marketplace.protocols.stc.exchange:StcExchange")
SHIPPED = ("pfds", "sketch", "stc", "summarize")
INSTALLED = tuple(importlib.metadata.entry_points(group=GROUP))
"""The entry points of this installation: the shipped protocols'."""
MISSING = (
    "entry point toy = 'missing_mod:PROTOCOL' (marketplace.protocols): could not be loaded "
    "(ModuleNotFoundError: No module named 'missing_mod')"
)
"""Why plug-in ``toy`` of :func:`_missing_module` cannot be used."""


def _registry(monkeypatch, *real: importlib.metadata.EntryPoint, shipped: bool = False, **specs) -> None:
    """Pretend the installed entry points are ``specs`` (name -> object its entry point loads, or an
    exception its load raises), the entry points ``real`` (loaded for real) and, with ``shipped``,
    the shipped protocols' own."""
    fake = [importlib.metadata.EntryPoint(name=name, value=f"fake.{name}:PROTOCOL", group=GROUP) for name in specs]
    points = [*(INSTALLED if shipped else ()), *real, *fake]
    load = importlib.metadata.EntryPoint.load

    def pretend(point: importlib.metadata.EntryPoint):
        if not point.value.startswith("fake."):
            return load(point)
        if isinstance(specs[point.name], BaseException):
            raise specs[point.name]
        return specs[point.name]

    monkeypatch.setattr(importlib.metadata.EntryPoint, "load", pretend)
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [p for p in points if p.group == group])
    plugins._registry.cache_clear()
    plugins.exchange.cache_clear()
    plugins.scenario_rules.cache_clear()


def _missing_module(monkeypatch) -> None:
    """The shipped protocols, and plug-in ``toy`` whose module is not installed."""
    _registry(
        monkeypatch, importlib.metadata.EntryPoint(name="toy", value="missing_mod:PROTOCOL", group=GROUP), shipped=True
    )


@pytest.fixture(autouse=True)
def _fresh_registry():
    yield
    plugins._registry.cache_clear()
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
    ],
    ids=["not-a-spec", "name-mismatch", "bad-name", "reserved-name", "section-without-defaults"],
)
def test_a_broken_plugin_is_left_out_naming_its_entry_point(monkeypatch, specs, message):
    _registry(monkeypatch, shipped=True, **specs)
    assert plugins.names() == SHIPPED
    [(name, reason)] = plugins.broken().items()
    assert name == next(iter(specs))
    assert re.search(message, reason), reason


def test_a_lone_broken_plugin_is_refused_as_before(monkeypatch):
    _registry(monkeypatch, toy=object())
    with pytest.raises(
        PluginError,
        match=r"^entry point toy = 'fake.toy:PROTOCOL' \(marketplace.protocols\): expected a "
        r"marketplace.plugins.ProtocolSpec, got object$",
    ):
        plugins.protocols()


def test_no_registered_protocol_is_refused_saying_to_install_the_package(monkeypatch):
    _registry(monkeypatch)
    with pytest.raises(
        PluginError,
        match=r"no protocol is registered under the entry-point group 'marketplace.protocols': install the package",
    ):
        plugins.protocols()
    assert plugins.broken() == {}


def test_an_exchange_that_is_not_module_attribute_is_refused_with_the_spec(monkeypatch):
    _registry(
        monkeypatch,
        shipped=True,
        toy=ProtocolSpec(name="toy", config=_Section, exchange="marketplace.protocols.stc.exchange"),
    )
    assert "toy" not in plugins.names()
    assert re.search(
        r"entry point toy = 'fake.toy:PROTOCOL' .*: exchange must be "
        r"'module:attribute' naming a marketplace.plugins.Exchange subclass or instance, got "
        r"'marketplace.protocols.stc.exchange'",
        plugins.broken()["toy"],
    )


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


def test_a_plugin_that_fails_to_load_is_named_beside_the_protocols_that_load(monkeypatch):
    _missing_module(monkeypatch)
    assert plugins.names() == SHIPPED
    assert plugins.broken() == {"toy": MISSING}


def test_a_broken_plugins_reason_is_one_line(monkeypatch):
    _registry(monkeypatch, shipped=True, toy=ImportError("cannot import name 'X'\n  from 'toy.core'\n"))
    assert plugins.broken() == {
        "toy": "entry point toy = 'fake.toy:PROTOCOL' (marketplace.protocols): could not be loaded "
        "(ImportError: cannot import name 'X' from 'toy.core')"
    }


def test_a_name_registered_twice_keeps_the_first_and_names_the_second(monkeypatch):
    monkeypatch.setitem(sys.modules, "other_dist", types.SimpleNamespace(PROTOCOL=GOOD))
    _registry(
        monkeypatch, importlib.metadata.EntryPoint(name="toy", value="other_dist:PROTOCOL", group=GROUP), toy=GOOD
    )
    assert plugins.spec("toy") is GOOD
    assert plugins.broken() == {
        "toy": "entry point toy = 'other_dist:PROTOCOL' (marketplace.protocols): protocol 'toy' is registered "
        "twice ('fake.toy:PROTOCOL' too)"
    }


def test_the_spec_of_a_broken_plugin_says_why_it_cannot_be_loaded(monkeypatch):
    _missing_module(monkeypatch)
    with pytest.raises(PluginError, match=rf"^protocol 'toy' is installed but cannot be loaded: {re.escape(MISSING)}$"):
        plugins.spec("toy")
    with pytest.raises(PluginError, match="protocol 'toy' is installed but cannot be loaded"):
        plugins.exchange("toy")


def test_an_unknown_protocol_names_the_registered_ones_and_the_broken_ones(monkeypatch):
    _missing_module(monkeypatch)
    with pytest.raises(
        ValueError,
        match=r"^unknown protocol 'nosuch': use one of \['pfds', 'sketch', 'stc', 'summarize'\] "
        r"\(installed but cannot be loaded: \['toy'\]\)$",
    ):
        plugins.spec("nosuch")


def test_every_command_names_a_broken_plugin_in_one_line_and_goes_on(monkeypatch, capsys):
    _missing_module(monkeypatch)
    monkeypatch.chdir(ROOT)
    assert main(["validate", "scenarios/quickstart.yaml"]) == EXIT_OK
    out, err = capsys.readouterr()
    assert out.startswith("name: quickstart") and "Traceback" not in err
    assert [line for line in err.splitlines() if "toy" in line] == [
        f"marketplace: plug-in 'toy' left out: {MISSING}; commands that use it will fail"
    ]


def test_marketplace_protocols_lists_a_broken_plugin_with_its_reason(monkeypatch, capsys):
    _missing_module(monkeypatch)
    assert main(["protocols"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [*SHIPPED, "toy"]
    assert lines[-1] == f"toy        BROKEN: {MISSING}"
    assert main(["protocols", "--json"]) == EXIT_OK
    out, err = capsys.readouterr()
    rows = json.loads(out)  # the one-line notice is on stderr, out of the JSON's way
    assert rows[-1] == {"name": "toy", "broken": MISSING} and [row["name"] for row in rows[:-1]] == list(SHIPPED)
    assert err.count("plug-in 'toy'") == 1


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_scenario_naming_a_broken_plugin_is_refused_with_its_reason(monkeypatch, capsys, tmp_path, command):
    _missing_module(monkeypatch)
    scenario = tmp_path / "toy.yaml"
    scenario.write_text("name: toy-run\nprotocol: toy\n")
    extra = ["--driver", "inprocess", "--out", str(tmp_path / "run")] if command == "run" else []
    assert main([command, str(scenario), *extra]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"{scenario}: protocol: protocol 'toy' is installed but cannot be loaded: {MISSING}" in err
    assert "Traceback" not in err


def test_a_scenario_naming_an_unknown_protocol_names_the_broken_ones_too(monkeypatch):
    _missing_module(monkeypatch)
    with pytest.raises(ScenarioError, match=r"got 'nosuch' \(installed but cannot be loaded: \['toy'\];"):
        load_scenario(ROOT / "scenarios" / "quickstart.yaml", ["protocol=nosuch"])


def test_an_installed_plugin_without_its_module_breaks_no_command(tmp_path):
    """For real, in a new process: a distribution whose entry point names a module that is not there."""
    dist = tmp_path / "toy_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[marketplace.protocols]\ntoy = missing_module_xyz:PROTOCOL\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}

    def marketplace(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "marketplace", *args]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)

    reason = (
        "entry point toy = 'missing_module_xyz:PROTOCOL' (marketplace.protocols): could not be loaded "
        "(ModuleNotFoundError: No module named 'missing_module_xyz')"
    )
    validate = marketplace("validate", "scenarios/quickstart.yaml")
    assert validate.returncode == 0, validate.stderr
    assert "Traceback" not in validate.stderr
    assert [line for line in validate.stderr.splitlines() if "toy" in line] == [
        f"marketplace: plug-in 'toy' left out: {reason}; commands that use it will fail"
    ]
    listed = marketplace("protocols", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {"name": "toy", "broken": reason} in json.loads(listed.stdout)


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


ROLE_MODULES = re.compile(r"^marketplace\.protocols\.\w+\.(exchange|curator|private_curator|owner|consumer|agent)$")
"""The shipped protocols' exchanges and role modules (pfds's agent is its owners' and consumer's base)."""


def test_reading_a_scenario_imports_no_exchange_and_no_role_of_any_protocol():
    """What reading a scenario asks of a protocol (its checks, release plans, public defaults) comes from its
    ScenarioRules, which import neither its exchange nor its roles: every shipped scenario of each shipped
    protocol is read in a fresh process, which then holds none of those modules."""
    code = (
        "import json, sys, yaml\n"
        "from pathlib import Path\n"
        "from marketplace.datasets import DatasetMissing\n"
        "from marketplace.scenario import load_scenario\n"
        "read = []\n"
        "for path in sorted(Path('scenarios').glob('*.yaml')):\n"
        "    protocol = (yaml.safe_load(path.read_text()) or {}).get('protocol')\n"
        "    if protocol is None:\n"
        "        continue  # a market file, not a scenario\n"
        "    try:\n"
        "        load_scenario(path)\n"
        "    except DatasetMissing:\n"
        "        continue  # its dataset is not in this data cache\n"
        "    read.append(protocol)\n"
        "print(json.dumps({'read': sorted(set(read)), 'modules': sorted(sys.modules)}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["read"] == list(SHIPPED), out["read"]  # a scenario of every protocol was read
    assert "marketplace.protocols.summarize.private_schedule" in out["modules"]  # its plans were checked
    assert [m for m in out["modules"] if ROLE_MODULES.match(m)] == []


def test_the_shipped_protocols_name_their_scenario_rules():
    for name in SHIPPED:
        rules = plugins.scenario_rules(name)
        assert isinstance(rules, plugins.ScenarioRules) and not isinstance(rules, plugins.Exchange)
        assert plugins.spec(name).scenario == f"marketplace.protocols.{name}.rules:{name.capitalize()}Rules"


def test_a_spec_without_scenario_rules_has_its_exchange_answer_for_them(monkeypatch):
    """The plug-in contract before ScenarioRules: a spec that names none still works, its exchange
    (a ScenarioRules too) answering what reading a scenario asks."""
    _registry(monkeypatch, toy=GOOD)
    assert GOOD.scenario is None
    assert plugins.scenario_rules("toy") is plugins.exchange("toy")


class _ToyRules(plugins.ScenarioRules):
    def public_defaults(self, section, schema):
        return {"rounds": 9}


def test_a_spec_naming_scenario_rules_gets_them_without_its_exchange(monkeypatch):
    module = types.ModuleType("fake_rules")
    module.__dict__.update(Rules=_ToyRules, NotRules=object)
    monkeypatch.setitem(sys.modules, "fake_rules", module)
    spec = ProtocolSpec(name="toy", config=_Section, exchange="missing_mod:Toy", scenario="fake_rules:Rules")
    _registry(monkeypatch, toy=spec)
    rules = plugins.scenario_rules("toy")  # the exchange's module is missing: never imported here
    assert isinstance(rules, _ToyRules) and rules.public_defaults(None, None) == {"rounds": 9}
    assert rules.release_plan(None, "owner-1") is None and rules.check_plan(None) is None  # the defaults
    _registry(monkeypatch, toy=dataclasses.replace(spec, scenario="fake_rules:NotRules"))
    with pytest.raises(PluginError, match=r"scenario 'fake_rules:NotRules': expected a subclass or instance of "):
        plugins.scenario_rules("toy")


def test_a_scenario_rules_reference_that_is_not_module_attribute_leaves_the_plugin_out(monkeypatch):
    _registry(monkeypatch, shipped=True, toy=dataclasses.replace(GOOD, scenario="no_colon"))
    assert "toy" not in plugins.names()
    assert "scenario must be 'module:attribute'" in plugins.broken()["toy"]
