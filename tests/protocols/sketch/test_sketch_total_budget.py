"""sketch's total budget per owner is its existing knob ``sketch.epsilon`` (with ``sketch.delta``
under the Gaussian mechanism), spent in the owner's one release and split by
``numerator_share``. The ledger states it exactly; a sweep shows the eps actually spent."""

from __future__ import annotations

import csv

import pytest
from rich.console import Console

from marketplace.protocols.sketch import sweeps
from marketplace.runner.sweep import plan_sweep, run_sweep, summarize_rows
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import run_raw, sketch_raw


@pytest.fixture
def sketch_budget() -> dict:
    return sketch_raw(
        "sketch-budget",
        owners=2,
        dim=2,
        components=3,
        validation_size=40,
        test_size=20,
        features=20,
        samples=500,
        queries={"moments": 1, "random_counts": 2, "rank_owners": False},
    )


@pytest.mark.parametrize(
    "mechanism, epsilon, share", [("laplace", 0.3, 0.98), ("laplace", 5.0, 0.5), ("gaussian", 1.5, 0.9)]
)
def test_each_owners_ledger_states_exactly_sketch_epsilon(sketch_budget, mechanism, epsilon, share, tmp_path):
    sketch_budget["sketch"].update(mechanism=mechanism, epsilon=epsilon, numerator_share=share, delta=1e-6)
    report = run_raw(sketch_budget, tmp_path)
    for owner in ("owner-1", "owner-2"):
        ledger = report["privacy"][owner]
        assert ledger["eps"] == pytest.approx(epsilon, rel=1e-12) and ledger["eps"] <= epsilon * (1 + 1e-15)
        assert ledger["delta"] == (1e-6 if mechanism == "gaussian" else 0.0)
    row = sweeps.sweep_row(report)
    assert (
        row["eps_spent"] == report["privacy"]["owner-1"]["eps"]
        and row["delta_spent"] == report["privacy"]["owner-1"]["delta"]
    )


@pytest.mark.parametrize("value", [0, -0.5, "x"])
def test_a_bad_budget_is_refused_naming_the_key(sketch_budget, value, tmp_path):
    sketch_budget["sketch"]["epsilon"] = value
    with pytest.raises(ScenarioError, match=r"sketch.epsilon: expected"):
        parse_scenario(sketch_budget, source="t", base_dir=tmp_path)


def test_a_sweep_over_the_budget_shows_the_eps_spent(sketch_budget, tmp_path):
    scenario = parse_scenario(sketch_budget, source="t", base_dir=tmp_path)
    rows = run_sweep(plan_sweep(scenario, {"sketch.epsilon": [0.5, 2.0]}, repeats=1), tmp_path / "out")
    assert [r["eps_spent"] for r in rows] == pytest.approx([0.5, 2.0], rel=1e-12)
    with open(tmp_path / "out" / "runs.csv", newline="") as f:
        assert [float(r["eps_spent"]) for r in csv.DictReader(f)] == pytest.approx([0.5, 2.0], rel=1e-12)
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 10_000
    console = Console(width=250, record=True)
    console.print(sweeps.sweep_table(summarize_rows(rows, ["sketch.epsilon"]), ["sketch.epsilon"], "t"))
    text = " ".join(console.export_text().split())
    assert "eps spent" in text and "│ 0.5 │ 1/1 │ 0.5 │" in text


def test_a_privacy_sweep_is_plotted_against_the_eps_spent(monkeypatch, tmp_path):
    import matplotlib.axes

    labels = []
    monkeypatch.setattr(matplotlib.axes.Axes, "set_xlabel", lambda self, text, *a, **k: labels.append(text))
    summary = [
        {"sketch.epsilon": e, "runs": 1, "completed": 1, "eps_spent_mean": e, "moment1_mre_mean": 1 / e}
        for e in (0.5, 2.0)
    ]
    sweeps.plot_sweep(summary, ["sketch.epsilon"], tmp_path / "a.png", title="t")
    assert labels and all(label.startswith("eps an owner gave up") for label in labels)
    labels.clear()
    summary = [
        {"sketch.samples": n, "runs": 1, "completed": 1, "eps_spent_mean": 2.0, "moment1_mre_mean": 1 / n}
        for n in (500, 900)
    ]
    sweeps.plot_sweep(summary, ["sketch.samples"], tmp_path / "b.png", title="t")
    assert labels == ["sketch.samples"]
