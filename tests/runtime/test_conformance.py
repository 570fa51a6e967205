"""The protocol conformance suite (:mod:`marketplace.testing`) passes for the four shipped protocols and
the example plug-in of docs/extending.md, and fails, naming the check, for a protocol that breaks the
contract: an exchange missing a method, a sweep row without ``eps_spent``, an owner cost of None for an
owner that released, an owner cost that reads the data.

The checks that start OS processes (``drivers`` holding ``processes``) are marked slow.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from typing import Any

import pytest
from conftest import ROOT
from test_extending import EXAMPLE, SCENARIO, example  # noqa: F401 - the example installed once for this file

import marketplace
from marketplace import plugins
from marketplace.protocols.stc.exchange import StcExchange
from marketplace.testing import Check, check_protocol, protocol_checks

SMALL: dict[str, tuple[str, list[str]]] = {
    "summarize": ("quickstart.yaml", ["summarize.rounds=6", "summarize.baselines=[]"]),
    "stc": ("stc-synthetic.yaml", ["parties.owners=3"]),
    "sketch": ("sketch-uniform.yaml", ["sketch.samples=2000", "parties.owners=3"]),
    "pfds": ("pfds-synthetic.yaml", ["parties.owners=4", "data.source.table.synthetic.rows=2000"]),
}
"""Per shipped protocol, a shipped scenario made a run of seconds."""

NAMES = [
    "contract",
    "bad_config",
    "owner_cost_from_settings",
    "runs_inprocess",
    "sweep_row_spent",
    "owner_cost_covers_releases",
    "declared_cost_covers_spending",
    "coupled_differential",
    "runs_processes",
    "report_schema",
    "history_same_under_both_drivers",
]


def _small(name: str) -> Any:
    file, sets = SMALL[name]
    return marketplace.load(ROOT / "scenarios" / file, sets=sets)


def _cases() -> list:
    cases = []
    for name in SMALL:
        for check in protocol_checks(name, _small(name)):
            marks = [pytest.mark.slow] if "processes" in check.drivers else []
            cases.append(pytest.param(check, marks=marks, id=str(check)))
    return cases


def test_the_shipped_protocols_are_all_checked():
    assert sorted(SMALL) == list(plugins.names())
    assert [check.name for check in protocol_checks("stc")] == NAMES


@pytest.mark.parametrize("check", _cases())
def test_a_shipped_protocol_conforms(check: Check):
    check()


def _doc_block(first_line: str) -> str:
    """The python block of docs/extending.md that starts with the comment ``first_line``, without it."""
    blocks = re.findall(r"^```python\n(.*?)^```$", (ROOT / "docs" / "extending.md").read_text(), flags=re.M | re.S)
    found = [block.split("\n", 1)[1] for block in blocks if block.split("\n", 1)[0] == first_line]
    assert len(found) == 1, f"docs/extending.md has {len(found)} python blocks starting {first_line!r}"
    return found[0]


def test_the_docs_show_the_example_exchange_word_for_word():
    """The complete exchange of docs/extending.md is the example's file, which the example's runs
    and the conformance checks below import and run."""
    example_file = EXAMPLE / "marketplace_example" / "exchange.py"
    assert _doc_block("# marketplace_example/exchange.py") == example_file.read_text()


@pytest.mark.slow
def test_the_example_plugin_passes_the_docs_conformance_test(example):  # noqa: F811 - the fixture imported above
    """The docs' pytest file for the example, run by pytest in a folder of its own beside the
    installed example (in processes that see it; the test process does not)."""
    folder = example.folder("docs-conformance")
    (folder / "tests").mkdir(parents=True)
    (folder / "tests" / "test_noisy_count.py").write_text(_doc_block("# tests/test_noisy_count.py"))
    shutil.copy(SCENARIO, folder / "scenario.yaml")
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "tests/test_noisy_count.py"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=folder, env=example.env)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    passed = re.findall(r"test_noisy_count_conforms\[noisy_count-(\w+)\] PASSED", result.stdout)
    assert passed == NAMES, result.stdout[-4000:]


# --- the suite fails for a protocol that breaks the contract ----------------------------------------


def _serve(monkeypatch, exchange: Any) -> None:
    """Every caller of plugins.exchange (the runner, the checks) gets ``exchange`` for stc."""
    real = plugins.exchange
    monkeypatch.setattr(plugins, "exchange", lambda name: exchange if name == "stc" else real(name))


def _failure(name: str, scenario: Any) -> str:
    """The message of the stc check ``name`` against ``scenario`` (it must fail)."""
    (check,) = [c for c in protocol_checks("stc", scenario) if c.name == name]
    with pytest.raises(AssertionError) as failed:
        check()
    return str(failed.value)


def test_an_exchange_missing_a_method_fails_the_contract_check(monkeypatch):
    scenario = _small("stc")
    body = {k: v for k, v in vars(StcExchange).items() if k != "report"}
    no_report = type("NoReport", (plugins.Exchange,), body)
    monkeypatch.setattr(plugins, "exchange", lambda name: plugins.checked_exchange(no_report, f"protocol {name!r}"))
    assert _failure("contract", scenario) == "protocol 'stc': NoReport leaves the required method report unimplemented"
    with pytest.raises(AssertionError, match=r"^conformance check stc-contract failed: .*method report unimplemented"):
        check_protocol("stc", scenario)


class _NoSpent(StcExchange):
    def sweep_row(self, report: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in super().sweep_row(report).items() if k != "eps_spent"}


class _ReleasesNothing(StcExchange):
    def owner_cost(self, config: Any, party: str) -> None:
        return None


def test_a_sweep_row_without_eps_spent_fails(monkeypatch):
    scenario = _small("stc")
    _serve(monkeypatch, _NoSpent())
    failure = _failure("sweep_row_spent", scenario)
    assert "spent privacy, so sweep_row must record eps_spent (a number), got None" in failure


def test_an_owner_cost_of_none_for_an_owner_that_released_fails(monkeypatch):
    scenario = _small("stc")
    _serve(monkeypatch, _ReleasesNothing())
    assert "the report shows owner-1 released something" in _failure("owner_cost_covers_releases", scenario)


class _UnderDeclares(StcExchange):
    """Declares a tenth of the eps its owners' releases spend."""

    def owner_cost(self, config: Any, party: str) -> Any:
        import dataclasses

        declared = super().owner_cost(config, party)
        return dataclasses.replace(declared, cost=dataclasses.replace(declared.cost, eps=declared.cost.eps / 10))


def test_an_owner_cost_below_what_the_ledgers_spend_fails_naming_both_figures(monkeypatch):
    scenario = _small("stc")
    _serve(monkeypatch, _UnderDeclares())
    failure = _failure("declared_cost_covers_spending", scenario)
    spent = scenario.config.stc.epsilon if hasattr(scenario.config.stc, "epsilon") else None
    assert "owner-1's ledger in the report spent" in failure and "but owner_cost declares" in failure, failure
    assert re.search(r'spent \{"eps": ([0-9.]+)', failure) and "eps=" in failure, failure
    eps_spent = float(re.search(r'spent \{"eps": ([0-9.]+)', failure).group(1))
    eps_declared = float(re.search(r"Cost\(eps=([0-9.e-]+)", failure).group(1))
    assert eps_declared == pytest.approx(eps_spent / 10), (spent, failure)


@pytest.mark.slow  # every check runs, the processes run included
def test_the_command_line_fails_a_plugin_that_under_declares(monkeypatch, capsys):
    from marketplace.cli import main

    _serve(monkeypatch, _UnderDeclares())
    file, sets = SMALL["stc"]
    code = main(
        ["protocols", "--check", "stc", "--scenario", str(ROOT / "scenarios" / file), *(f"--set={s}" for s in sets)]
    )
    out = capsys.readouterr().out
    assert code == 3, out
    (line,) = [line for line in out.splitlines() if line.startswith("FAIL")]
    assert line.split()[1] == "declared_cost_covers_spending:" and "but owner_cost declares" in line, out


def test_protocol_checks_is_a_list_pytest_can_parametrize_with():
    assert isinstance(protocol_checks("stc"), list)


def test_an_owner_cost_that_reads_the_data_fails(monkeypatch):
    class ReadsData(StcExchange):
        def owner_cost(self, config: Any, party: str) -> Any:
            from marketplace.parties import make_world

            make_world(config, plugins.exchange(config.protocol))
            return super().owner_cost(config, party)

    scenario = _small("stc")
    _serve(monkeypatch, ReadsData())
    assert "it built the run's data" in _failure("owner_cost_from_settings", scenario)


# --- the command line ------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "marketplace", "protocols", *args], capture_output=True, text=True, timeout=600, cwd=ROOT
    )


@pytest.mark.slow
def test_the_command_line_runs_every_check_and_exits_0_when_all_pass():
    file, sets = SMALL["stc"]
    result = _cli("--check", "stc", "--scenario", f"scenarios/{file}", *(f"--set={s}" for s in sets))
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split()[1] for line in result.stdout.splitlines()[:-1]] == NAMES
    assert all(line.startswith("ok ") for line in result.stdout.splitlines()[:-1])
    assert result.stdout.splitlines()[-1] == "stc: every check passed"


def test_the_command_line_exits_3_naming_each_failed_check():
    result = _cli("--check", "stc", "--scenario", "scenarios/sketch-uniform.yaml")
    assert result.returncode == 3, result.stdout + result.stderr
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAIL")]
    assert failed and all("the conformance scenario is of protocol 'sketch', expected 'stc'" in f for f in failed)
    assert result.stdout.splitlines()[-1] == f"stc: {len(failed)} check(s) failed"


@pytest.mark.parametrize(
    "args, says",
    [
        (["--check", "nope"], "got 'nope'"),
        (["--scenario", "scenarios/quickstart.yaml"], "--scenario and --set go with --check NAME"),
        (["--check", "stc", "--scenario", "scenarios/stc-synthetic.yaml", "--set", "stc.k=0"], "--scenario: "),
    ],
)
def test_the_command_line_refuses_what_it_cannot_check_with_exit_2(args, says):
    result = _cli(*args)
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in result.stderr and result.stdout == ""
