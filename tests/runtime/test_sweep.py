"""Sweeps: the grid of runs, their seeds, the CSV files and the plot, from the CLI and from YAML."""

from __future__ import annotations

import copy
import csv

import pytest
from conftest import run_cli

from marketplace.runner.sweep import parse_axis, plan_sweep, summarize_rows
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import write_scenario


def test_an_axis_is_a_key_and_its_values_parsed_as_yaml():
    assert parse_axis("summarize.rounds=10, 20,40") == ("summarize.rounds", [10, 20, 40])
    assert parse_axis("summarize.privacy.release=gaussian,mwem_last") == (
        "summarize.privacy.release",
        ["gaussian", "mwem_last"],
    )
    assert parse_axis("summarize.privacy.eps_validation=1e-3,0.1") == ("summarize.privacy.eps_validation", [0.001, 0.1])


@pytest.mark.parametrize("text", ["summarize.rounds", "=1,2", "summarize.rounds="])
def test_a_malformed_axis_is_refused(text):
    with pytest.raises(ScenarioError, match="key.path=value1,value2"):
        parse_axis(text)


def test_a_sweep_runs_every_combination_with_consecutive_seeds(tiny_scenario, tmp_path):
    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    points = plan_sweep(scenario, {"summarize.rounds": [2, 3], "summarize.gamma": [0.5, 1.0]}, repeats=2)
    assert len(points) == 8
    assert [(p.values["summarize.rounds"], p.values["summarize.gamma"], p.seed) for p in points[:4]] == [
        (2, 0.5, 11),
        (2, 0.5, 12),
        (2, 1.0, 11),
        (2, 1.0, 12),
    ]
    assert all(p.scenario.config.summarize.rounds == p.values["summarize.rounds"] for p in points)
    assert all(p.scenario.config.seed == p.seed for p in points)


def test_a_bad_sweep_value_is_refused_before_any_run_naming_the_key(tiny_scenario, tmp_path):
    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    with pytest.raises(ScenarioError, match=r"summarize.rounds=0.*summarize.rounds: expected"):
        plan_sweep(scenario, {"summarize.rounds": [3, 0]}, repeats=1)
    with pytest.raises(ScenarioError, match="sweep.repeats"):
        plan_sweep(scenario, {"summarize.rounds": [3]}, repeats=0)


def test_summary_rows_average_the_repeats():
    rows = [
        {"k": 1, "status": "completed", "mmd2": 1.0, "accuracy": 0.5},
        {"k": 1, "status": "completed", "mmd2": 3.0, "accuracy": 0.7},
        {"k": 2, "status": "failed", "mmd2": None, "accuracy": None},
    ]
    summary = summarize_rows(rows, ["k"])
    assert summary[0]["mmd2_mean"] == 2.0 and summary[0]["mmd2_sd"] == pytest.approx(2**0.5)
    assert summary[0]["completed"] == 2 and summary[1]["completed"] == 0 and summary[1]["mmd2_mean"] is None


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_the_cli_sweep_writes_runs_summary_and_plot(tiny_scenario, tmp_path):
    out = tmp_path / "out"
    result = run_cli(
        "run",
        str(write_scenario(tmp_path, tiny_scenario)),
        "--driver",
        "inprocess",
        "--sweep",
        "summarize.rounds=2,4",
        "--repeats",
        "2",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    runs, summary = read_csv(out / "runs.csv"), read_csv(out / "summary.csv")
    assert [(r["summarize.rounds"], r["seed"], r["status"], r["rounds"]) for r in runs] == [
        ("2", "11", "completed", "2"),
        ("2", "12", "completed", "2"),
        ("4", "11", "completed", "4"),
        ("4", "12", "completed", "4"),
    ]
    assert [(s["summarize.rounds"], s["runs"], s["completed"]) for s in summary] == [("2", "2", "2"), ("4", "2", "2")]
    assert (out / "sweep.png").stat().st_size > 10_000
    assert len(list((out / "runs").glob("*/report.json"))) == 4
    assert "rounds=4" in result.stdout and "runs.csv" in result.stdout


def test_a_yaml_sweep_section_runs_the_sweep(tiny_scenario, tmp_path):
    raw = copy.deepcopy(tiny_scenario)
    raw["sweep"] = {"vary": {"summarize.rounds": [2, 3]}, "repeats": 1}
    out = tmp_path / "out"
    result = run_cli("run", str(write_scenario(tmp_path, raw)), "--driver", "inprocess", "--quiet", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert [r["summarize.rounds"] for r in read_csv(out / "runs.csv")] == ["2", "3"]


def test_a_bad_cli_sweep_exits_2_and_runs_nothing(tiny_scenario, tmp_path):
    out = tmp_path / "out"
    result = run_cli(
        "run",
        str(write_scenario(tmp_path, tiny_scenario)),
        "--driver",
        "inprocess",
        "--sweep",
        "summarize.rounds=3,-1",
        "--out",
        str(out),
    )
    assert result.returncode == 2
    assert "summarize.rounds" in result.stderr and not out.exists()


def test_a_point_whose_world_cannot_be_built_ends_the_sweep_with_a_clear_error_and_keeps_the_runs_before(
    tiny_scenario, tmp_path
):
    out = tmp_path / "out"
    size = tiny_scenario["data"]["consumer"]["validation_size"]
    result = run_cli(
        "run",
        str(write_scenario(tmp_path, tiny_scenario)),
        "--driver",
        "inprocess",
        "--quiet",
        "--sweep",
        f"data.consumer.validation_size={size},10000000",
        "--out",
        str(out),
    )
    assert result.returncode == 2
    assert "bad scenario" in result.stderr and "validation_size" in result.stderr and "Traceback" not in result.stderr
    assert [r["status"] for r in read_csv(out / "runs.csv")] == ["completed"]


def test_a_percentage_against_greedy_compares_like_with_like_and_its_label_says_so():
    """Greedy minimizes MMD^2 of seed set + summary; its summary alone can be worse than a method
    that ignores the seed set. The headline % compares seed set + summary on both sides."""
    from rich.console import Console

    from marketplace.protocols.summarize.sweeps import sweep_row, sweep_table

    report = {
        "selection": [[0, 1]],
        "metrics": {
            "mmd2": 0.036,
            "mmd2_with_seed_set": 0.030,
            "accuracy": 0.8,
            "baselines": {
                "non_private_greedy": {"mmd2": 0.100, "mmd2_with_seed_set": 0.020, "accuracy": 0.85},
                "uniform": {"mmd2": 0.050, "mmd2_with_seed_set": 0.040, "accuracy": 0.7},
            },
        },
    }
    row = sweep_row(report)
    assert row["mmd2_with_seed_set_increase_over_greedy_pct"] == pytest.approx(50.0)  # 0.030 against 0.020
    assert row["mmd2_alone_increase_over_greedy_pct"] == pytest.approx(-64.0)  # 0.036 against 0.100: not "beats greedy"
    assert row["uniform_mmd2_with_seed_set_increase_over_greedy_pct"] == pytest.approx(100.0)
    assert "mmd2_increase_over_greedy_pct" not in row
    summary = [{"summarize.rounds": 25, "runs": 1, "completed": 1, **{f"{k}_mean": v for k, v in row.items()}}]
    console = Console(width=250, record=True)
    console.print(sweep_table(summary, ["summarize.rounds"], "t"))
    text = " ".join(console.export_text().split())
    assert "% = increase in MMD^2 of seed set + summary over greedy's seed set + summary" in text
    assert "│ 25 │ 1/1 │ 50 │" in text and "-64" not in text
