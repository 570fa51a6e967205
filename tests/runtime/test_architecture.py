"""The package's architecture rules (import-linter contracts in pyproject.toml) hold, and can fail.

The rules: no import cycles between sibling packages or modules; the stack is layered (each layer
of docs/design.md imports only the layers below it, and every top-level module has its layer); the
runtime (runner, runtime, service, transport, wire, scenario, roles, data, privacy, reporting, CLI)
names no protocol; a served marketplace and a market import nothing of the runner (they run parties
through marketplace.runtime); protocol packages are independent of each other; a protocol's pure
cores import no transport, wire, roles, runner, runtime or scenario.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

LINT = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
ROLE_MODULES = {
    "__init__",
    "plugin",
    "config",
    "messages",
    "wire",
    "publication",
    "curator",
    "private_curator",
    "owner",
    "owner_cohort",
    "consumer",
    "agent",
    "exchange",
    "plan",
    "rules",
    "evaluate",
    "public",
    "commands",
    "source",
    "world",
    "report",
    "display",
    "sweeps",
}
"""A protocol package's modules that are not pure cores: its registration, section, wire, what its
roles publish, roles, exchange, release plan and view and what reading a scenario asks of it (rules; both
read from the scenario's settings), data source, world, report, terminal display and sweeps. Every other
module of the package is a core, and must be in the contract."""


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LINT],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin", "HOME": str(root), "COLUMNS": "200", "NO_COLOR": "1"},
    )


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return {contract["id"]: contract for contract in config["contracts"]}


def test_the_architecture_contracts_are_kept():
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "7 kept, 0 broken" in result.stdout


def test_the_contracts_are_the_seven_rules():
    contracts = _contracts()
    assert set(contracts) == {"acyclic", "layers", "commands", "runtime", "services", "independent", "cores"}
    assert contracts["acyclic"]["type"] == "acyclic_siblings" and contracts["acyclic"]["ancestors"] == ["marketplace"]
    runtime = set(contracts["runtime"]["source_modules"])
    assert {
        "marketplace.runner",
        "marketplace.runtime",
        "marketplace.transport",
        "marketplace.messages",
        "marketplace.scenario",
    } <= runtime
    assert contracts["runtime"]["forbidden_modules"] == ["marketplace.protocols"]
    services = contracts["services"]
    assert set(services["source_modules"]) == {"marketplace.service", "marketplace.market"}
    assert services["forbidden_modules"] == ["marketplace.runner"]


def test_the_layers_put_every_top_level_module_in_the_stack_below_the_service():
    layers = _contracts()["layers"]
    assert layers["type"] == "layers" and layers["containers"] == ["marketplace"] and layers["exhaustive"] is True
    rows = [{name.strip() for name in row.split("|")} for row in layers["layers"]]
    row_of = {name: i for i, row in enumerate(rows) for name in row}
    assert row_of["service"] < row_of["api"] < row_of["runner"] < row_of["runtime"] < row_of["protocols"]
    assert row_of["protocols"] < row_of["reporting"]
    assert row_of["market"] < row_of["runner"] and row_of["reporting"] < row_of["roles"] < row_of["privacy"]
    top_level = {
        path.stem if path.is_file() else path.name
        for path in (ROOT / "marketplace").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert top_level == set(row_of), "every top-level module or package of marketplace has exactly one layer"


def test_nothing_but_the_entry_point_imports_the_command_line():
    """The commands contract names every top-level module of marketplace as a source, but the command
    line itself and ``__main__``: a new module is under it as soon as it is added."""
    commands = _contracts()["commands"]
    assert commands["type"] == "forbidden" and commands["forbidden_modules"] == ["marketplace.cli"]
    top_level = {
        path.stem if path.is_file() else path.name
        for path in (ROOT / "marketplace").iterdir()
        if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
    }
    assert set(commands["source_modules"]) == {f"marketplace.{name}" for name in top_level - {"cli", "__main__"}}


def test_every_core_module_of_a_shipped_protocol_is_under_the_cores_contract():
    cores = set(_contracts()["cores"]["source_modules"])
    independent = set(_contracts()["independent"]["modules"])
    for package in sorted((ROOT / "marketplace" / "protocols").iterdir()):
        if not (package / "plugin.py").is_file():
            continue
        assert f"marketplace.protocols.{package.name}" in independent, package.name
        for module in sorted(package.glob("*.py")):
            dotted = f"marketplace.protocols.{package.name}.{module.stem}"
            if module.stem not in ROLE_MODULES:
                assert dotted in cores, (
                    f"{dotted} is a pure core (not a role, wire or plug-in module) but the cores contract does not "
                    f"list it"
                )


def _broken_copy(tmp_path: Path, module: str, line: str) -> Path:
    """A copy of the package and its contracts with one import added to ``module``."""
    shutil.copytree(ROOT / "marketplace", tmp_path / "marketplace", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{line}\n")
    return tmp_path


@pytest.mark.parametrize(
    "module, line, broken",
    [
        (
            "marketplace/runtime/report.py",
            "import marketplace.protocols.stc.exchange  # noqa",
            "The runtime names no protocol",
        ),
        (
            "marketplace/protocols/stc/exchange.py",
            "import marketplace.protocols.pfds.tree  # noqa",
            "independent of each other",
        ),
        (
            "marketplace/protocols/sketch/m2m.py",
            "import marketplace.transport.node  # noqa",
            "Pure cores import no transport",
        ),
        ("marketplace/transport/counters.py", "import marketplace.runtime.report  # noqa", "No import cycles"),
        ("marketplace/protocols/stc/exchange.py", "import marketplace.runner.blame  # noqa", "The stack is layered"),
        ("marketplace/protocols/stc/exchange.py", "import marketplace.runtime.report  # noqa", "The stack is layered"),
        ("marketplace/privacy/rng.py", "import marketplace.scenario.fingerprint  # noqa", "The stack is layered"),
        ("marketplace/service/server.py", "import marketplace.cli.serve  # noqa", "The command line is the top"),
        ("marketplace/market/player.py", "import marketplace.runner.blame  # noqa", "A served marketplace"),
    ],
    ids=[
        "runtime-imports-a-protocol",
        "protocols-import-each-other",
        "core-imports-transport",
        "cycle",
        "protocol-imports-the-runner",
        "protocol-imports-the-runtime",
        "privacy-imports-the-scenario",
        "service-imports-the-command-line",
        "market-imports-the-runner",
    ],
)
def test_a_broken_rule_fails_the_check(tmp_path, module, line, broken):
    result = _lint(_broken_copy(tmp_path, module, line))
    assert result.returncode != 0
    broken_section = result.stdout.split("Broken contracts", 1)[-1]
    assert broken in broken_section, result.stdout[-3000:]
