"""pfds's total budget per sharer is its existing knob ``pfds.epsilon``: eps/2 for the tree
(eps/(2 h_max) per level), eps/2 for optPrivateGen's node counts. The ledger states at most it,
exactly it less the levels that read no data; a sweep shows the eps actually spent."""

from __future__ import annotations

import csv

import pytest
from rich.console import Console

from marketplace.protocols.pfds import exchange
from marketplace.runner.sweep import plan_sweep, run_sweep, summarize_rows
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import pfds_raw, run_raw


@pytest.fixture
def pfds_budget() -> dict:
    return pfds_raw("pfds-budget", owners=2, rows=600, baselines=[])


@pytest.mark.parametrize("epsilon", [0.5, 4.0])
def test_each_sharers_ledger_is_epsilon_less_the_levels_that_read_no_data(pfds_budget, epsilon, tmp_path):
    pfds_budget["pfds"]["epsilon"] = epsilon
    h_max = pfds_budget["pfds"]["h_max"]
    report = run_raw(pfds_budget, tmp_path)
    for sharer in ("owner-1", "owner-2"):
        ledger = report["privacy"][sharer]
        tree_levels = sum(step["count"] for step in ledger["steps"] if step["mechanism"].startswith("pfds.tree."))
        free_levels = h_max - tree_levels  # levels that branched on categorical attributes only, or were never grown
        assert 0 <= free_levels < h_max
        assert ledger["eps"] + free_levels * epsilon / (2 * h_max) == pytest.approx(epsilon, rel=1e-12)
        assert ledger["eps"] <= epsilon * (1 + 1e-12)
    row = exchange.sweep_row(report)
    assert row["eps_spent"] == max(report["privacy"][s]["eps"] for s in ("owner-1", "owner-2"))


@pytest.mark.parametrize("value", [0, -1.0])
def test_a_bad_budget_is_refused_naming_the_key(pfds_budget, value, tmp_path):
    pfds_budget["pfds"]["epsilon"] = value
    with pytest.raises(ScenarioError, match=r"pfds.epsilon: expected"):
        parse_scenario(pfds_budget, source="t", base_dir=tmp_path)


def test_a_sweep_over_the_budget_shows_the_eps_spent(pfds_budget, tmp_path):
    scenario = parse_scenario(pfds_budget, source="t", base_dir=tmp_path)
    rows = run_sweep(plan_sweep(scenario, {"pfds.epsilon": [0.5, 2.0]}, repeats=1), tmp_path / "out")
    assert all(r["status"] == "completed" and 0 < r["eps_spent"] <= r["pfds.epsilon"] for r in rows)
    with open(tmp_path / "out" / "runs.csv", newline="") as f:
        assert [float(r["eps_spent"]) for r in csv.DictReader(f)] == [r["eps_spent"] for r in rows]
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 10_000
    console = Console(width=250, record=True)
    console.print(exchange.sweep_table(summarize_rows(rows, ["pfds.epsilon"]), ["pfds.epsilon"], "t"))
    text = " ".join(console.export_text().split())
    assert "eps spent" in text and f"│ 2 │ 1/1 │ {rows[1]['eps_spent']:.4g} │" in text


def test_a_privacy_sweep_is_plotted_against_the_eps_spent(monkeypatch, tmp_path):
    from marketplace.reporting import plots

    seen = []
    monkeypatch.setattr(plots, "sweep_figure", lambda *a, x_column=None, **k: seen.append(x_column))
    for key in ("pfds.epsilon", "pfds.sharers"):
        exchange.plot_sweep([], [key], tmp_path / "p.png", title="t")
    assert seen == ["eps_spent", None]
