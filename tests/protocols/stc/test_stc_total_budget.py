"""stc's total budget per owner is its existing knob: ``stc.privacy.epsilon`` (notion dp) or
``stc.privacy.rho`` (notion zcdp), spent in the owner's one release. The ledger states it exactly;
a sweep over it reports, tabulates and plots the eps actually spent."""

from __future__ import annotations

import csv

import pytest
from rich.console import Console

from marketplace.privacy.gdp import gaussian_eps
from marketplace.protocols.stc import sweeps
from marketplace.runner.sweep import plan_sweep, run_sweep, summarize_rows
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import run_raw, stc_raw


@pytest.fixture
def stc_budget() -> dict:
    return stc_raw("stc-budget", n_source=300, n_target=200, validation_size=180, k=4)


@pytest.mark.parametrize("epsilon", [0.5, 7.0])
def test_each_owners_ledger_states_exactly_stc_privacy_epsilon(stc_budget, epsilon, tmp_path):
    stc_budget["stc"]["privacy"] = {"epsilon": epsilon}
    report = run_raw(stc_budget, tmp_path)
    for owner in ("owner-1", "owner-2"):
        assert report["privacy"][owner]["eps"] == epsilon and report["privacy"][owner]["delta"] == 0.0
    row = sweeps.sweep_row(report)
    assert row["eps_spent"] == epsilon and row["delta_spent"] == 0.0


def test_under_zcdp_the_ledger_states_rho_and_its_exact_eps(stc_budget, tmp_path):
    stc_budget["stc"].update(release="nas", t=20, privacy={"notion": "zcdp", "rho": 0.5})
    report = run_raw(stc_budget, tmp_path)
    ledger = report["privacy"]["owner-1"]
    assert sum(step["rho"] * step["count"] for step in ledger["steps"]) == 0.5
    row = sweeps.sweep_row(report)
    assert row["eps_spent"] == ledger["eps"] == pytest.approx(gaussian_eps(mu=1.0, delta=ledger["delta"]))
    assert row["delta_spent"] == ledger["delta"] > 0


@pytest.mark.parametrize("key, value", [("epsilon", 0), ("epsilon", -1), ("rho", 0)])
def test_a_bad_budget_is_refused_naming_the_key(stc_budget, key, value, tmp_path):
    stc_budget["stc"]["privacy"] = {key: value}
    with pytest.raises(ScenarioError, match=rf"stc.privacy.{key}: expected"):
        parse_scenario(stc_budget, source="t", base_dir=tmp_path)


def test_a_sweep_over_the_budget_shows_the_eps_spent(stc_budget, tmp_path):
    scenario = parse_scenario(stc_budget, source="t", base_dir=tmp_path)
    rows = run_sweep(plan_sweep(scenario, {"stc.privacy.epsilon": [1.0, 4.0]}, repeats=1), tmp_path / "out")
    assert [r["eps_spent"] for r in rows] == [1.0, 4.0]
    with open(tmp_path / "out" / "runs.csv", newline="") as f:
        assert [float(r["eps_spent"]) for r in csv.DictReader(f)] == [1.0, 4.0]
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 10_000
    console = Console(width=250, record=True)
    console.print(sweeps.sweep_table(summarize_rows(rows, ["stc.privacy.epsilon"]), ["stc.privacy.epsilon"], "t"))
    text = " ".join(console.export_text().split())
    assert "eps spent" in text and "│ 4 │ 1/1 │ 4 │" in text


def test_a_privacy_sweep_is_plotted_against_the_eps_spent(monkeypatch, tmp_path):
    from marketplace.reporting import plots

    seen = []
    monkeypatch.setattr(plots, "sweep_figure", lambda *a, x_column=None, **k: seen.append(x_column))
    for key in ("stc.privacy.epsilon", "stc.privacy.rho", "stc.k"):
        sweeps.plot_sweep([], [key], tmp_path / "p.png", title="t")
    assert seen == ["eps_spent", "eps_spent", None]
