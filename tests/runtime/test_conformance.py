"""The protocol conformance suite (:mod:`marketplace.testing`) passes for the four shipped protocols and
the example plug-in of docs/extending.md, and fails, naming the check, for a protocol that breaks the
contract: an exchange missing a method, a sweep row without ``eps_spent``, an owner cost of None for an
owner that released, an owner cost that reads the data.

The checks that start OS processes (``drivers`` holding ``processes``) are marked slow.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import marketplace
from conftest import ROOT
from marketplace import plugins
from marketplace.protocols.stc.exchange import StcExchange
from marketplace.testing import Check, check_protocol, protocol_checks
from test_extending import SCENARIO, example  # noqa: F401 - the example installed once, for the subprocess test

SMALL: dict[str, tuple[str, list[str]]] = {
    "summarize": ("quickstart.yaml", ["summarize.rounds=6", "summarize.baselines=[]"]),
    "stc": ("stc-synthetic.yaml", ["parties.owners=3"]),
    "sketch": ("sketch-uniform.yaml", ["sketch.samples=2000", "parties.owners=3"]),
    "pfds": ("pfds-synthetic.yaml", ["parties.owners=4", "data.source.table.synthetic.rows=2000"]),
}
"""Per shipped protocol, a shipped scenario made a run of seconds."""

NAMES = ["contract", "bad_config", "owner_cost_from_settings", "runs_inprocess", "sweep_row_spent",
         "owner_cost_covers_releases", "runs_processes", "report_schema", "history_same_under_both_drivers"]


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


@pytest.mark.slow
def test_the_example_plugin_conforms(example):  # noqa: F811 - the fixture imported above
    """In a process that sees the example installed (the test process does not): every check, with
    the example's own scenario."""
    result = example.python(f"""
        import json
        from marketplace.testing import protocol_checks

        failed = {{}}
        for check in protocol_checks("noisy_count", {str(SCENARIO)!r}):
            try:
                check()
            except AssertionError as err:
                failed[check.name] = str(err)
        print(json.dumps(failed))
    """, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.splitlines()[-1]) == {}


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
    assert "spent privacy, so sweep_row must record eps_spent (a number), got None" in _failure("sweep_row_spent", scenario)


def test_an_owner_cost_of_none_for_an_owner_that_released_fails(monkeypatch):
    scenario = _small("stc")
    _serve(monkeypatch, _ReleasesNothing())
    assert "the report shows owner-1 released something" in _failure("owner_cost_covers_releases", scenario)


def test_an_owner_cost_that_reads_the_data_fails(monkeypatch):
    class ReadsData(StcExchange):
        def owner_cost(self, config: Any, party: str) -> Any:
            from marketplace.parties import make_world

            make_world(config)
            return super().owner_cost(config, party)

    scenario = _small("stc")
    _serve(monkeypatch, ReadsData())
    assert "it built the run's data" in _failure("owner_cost_from_settings", scenario)

