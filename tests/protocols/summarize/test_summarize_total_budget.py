"""summarize.privacy.total_epsilon: the eps the owners' points in D_s get over a whole run, as the
D_s ledger states it, for every release and accountant; refused where it cannot mean that; and a
sweep over it that reports, tabulates and plots the eps actually spent."""

from __future__ import annotations

import csv
import dataclasses

import pytest
from conftest import run_cli, tiny_raw

from marketplace.protocols.summarize.config import SummarizePrivacy
from marketplace.protocols.summarize.private_curator import PrivateSchedule
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import run_raw, write_scenario

KEY = "summarize.privacy.total_epsilon"


def private_raw(seed_set: int = 4, **privacy) -> dict:
    raw = tiny_raw(privacy={"enabled": True, "t_init": 20, **privacy})
    raw["data"]["seed_set"]["size"] = seed_set
    return raw


@pytest.mark.parametrize(
    "privacy, seed_set",
    [
        ({"release": "gaussian"}, 4),
        ({"release": "gaussian", "gaussian_accountant": "zcdp"}, 4),
        ({"release": "gaussian", "secure": True}, 4),
        ({"release": "gaussian"}, 0),
        ({"release": "mwem_last", "theorem": "advanced"}, 4),
        ({"release": "mwem_paper", "theorem": "basic"}, 4),
        ({"release": "mwem_call_average", "theorem": "zcdp"}, 4),
        ({"release": "mwem_last", "theorem": "advanced"}, 0),  # round 2's first private release runs T_init
    ],
    ids=[
        "gaussian-exact",
        "gaussian-zcdp",
        "gaussian-secure",
        "gaussian-no-seed-set",
        "mwem-advanced",
        "mwem-basic",
        "mwem-zcdp",
        "mwem-no-seed-set",
    ],
)
@pytest.mark.parametrize("total", [0.3, 4.0])
def test_the_ds_ledger_states_exactly_the_total_budget(privacy, seed_set, total, tmp_path):
    report = run_raw(private_raw(seed_set, total_epsilon=total, **privacy), tmp_path)
    assert report["status"] == "completed" and len(report["selection"]) == 6  # every round released
    ledger = report["privacy"]["D_s"]
    assert ledger["eps"] == pytest.approx(total, rel=1e-9)
    assert ledger["eps"] <= total * (1 + 1e-12)  # never above the knob (calibration rounds down)
    assert ledger["delta"] <= 1e-4  # at delta_summary (0 when pure DP composes basically)


def test_the_auction_and_dv_ledgers_do_not_move_with_the_total(tmp_path):
    a = run_raw(private_raw(total_epsilon=0.5), tmp_path, "a")["privacy"]
    b = run_raw(private_raw(total_epsilon=5.0), tmp_path, "b")["privacy"]
    assert a["auction"]["eps"] == b["auction"]["eps"] == pytest.approx(6 * 0.1)
    assert a["consumer:D_v"]["eps"] == b["consumer:D_v"]["eps"]
    assert a["D_s"]["eps"] == pytest.approx(0.5) and b["D_s"]["eps"] == pytest.approx(5.0)


def test_mwem_scaling_keeps_the_ratio_of_first_to_later_iterations():
    privacy = SummarizePrivacy(enabled=True, release="mwem_last", t_init=20)
    today = PrivateSchedule.resolve(privacy, features=30, rounds=6)
    scaled = PrivateSchedule.resolve(
        dataclasses.replace(privacy, total_epsilon=2.0), features=30, rounds=6, seed_set_size=0
    )
    assert scaled.eps_first_round / scaled.eps_later_rounds == pytest.approx(
        today.eps_first_round / today.eps_later_rounds
    )
    assert scaled.summary_total(6, seed_set_size=0).eps == pytest.approx(2.0, rel=1e-9)
    assert scaled.eps_later_rounds > today.eps_later_rounds  # more budget than today's default schedule spends


def test_without_the_knob_the_schedule_is_todays():
    privacy = SummarizePrivacy(enabled=True)
    assert privacy.total_epsilon is None
    schedule = PrivateSchedule.resolve(privacy, features=30, rounds=6)
    _, mwem_total = schedule.mwem_totals(6)
    assert schedule.rho_per_round == pytest.approx(schedule.calibrate_rho(mwem_total.eps, 1e-4) / 5)


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"total_epsilon": 0}, "summarize.privacy.total_epsilon: expected"),
        ({"total_epsilon": -1.0}, "summarize.privacy.total_epsilon: expected"),
        ({"total_epsilon": "lots"}, "summarize.privacy.total_epsilon: expected"),
        (
            {"total_epsilon": 1.0, "eps_later_rounds": 0.01},
            "summarize.privacy.total_epsilon: expected either total_epsilon or eps_later_rounds",
        ),
        ({"total_epsilon": 1.0, "enabled": False}, "summarize.privacy.total_epsilon: expected a private run"),
    ],
)
def test_a_bad_total_is_refused_naming_the_key(change, expected, tmp_path):
    raw = private_raw()
    raw["summarize"]["privacy"].update(change)
    with pytest.raises(ScenarioError, match=expected.replace("(", r"\(")):
        parse_scenario(raw, source="t", base_dir=tmp_path)


def test_a_one_round_run_cannot_spend_a_total_and_is_refused(tmp_path):
    raw = private_raw(total_epsilon=1.0)
    raw["summarize"]["rounds"] = 1
    with pytest.raises(ScenarioError, match=r"summarize.privacy.total_epsilon: expected summarize.rounds >= 2"):
        parse_scenario(raw, source="t", base_dir=tmp_path)


@pytest.mark.parametrize("release, seed_set", [("gaussian", 4), ("mwem_last", 4), ("mwem_last", 0)])
def test_a_total_above_budget_summary_is_refused_before_start(release, seed_set, tmp_path):
    with pytest.raises(ScenarioError, match="summarize.privacy.budget_summary"):
        parse_scenario(
            private_raw(seed_set, release=release, total_epsilon=2.0, budget_summary=1.9), source="t", base_dir=tmp_path
        )
    parse_scenario(
        private_raw(seed_set, release=release, total_epsilon=2.0, budget_summary=2.0), source="t", base_dir=tmp_path
    )


def test_the_plan_counts_the_first_private_mwem_release_when_the_seed_set_is_empty():
    """With no seed set, round 2's release is the first on D_s and runs T_init iterations at eps_1:
    the budget check must plan exactly what the run's D_s ledger will state."""
    schedule = PrivateSchedule.resolve(
        SummarizePrivacy(enabled=True, release="mwem_last", t_init=20), features=30, rounds=6
    )
    ledgers = schedule.ledgers()
    schedule.plan(ledgers, 6, seed_set_size=0)
    assert ledgers["D_s"].total().eps == pytest.approx(schedule.summary_total(6, seed_set_size=0).eps, rel=1e-12)
    assert ledgers["D_s"].total().eps > schedule.summary_total(6, seed_set_size=4).eps


def test_the_cli_refuses_a_bad_total_with_exit_2(tmp_path):
    path = write_scenario(tmp_path, private_raw(), "s.yaml")
    result = run_cli("run", str(path), "--driver", "inprocess", "--set", f"{KEY}=-2", "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and KEY in result.stderr and "Traceback" not in result.stderr


def test_a_sweep_over_the_total_reports_tabulates_and_plots_the_eps_spent(tmp_path):
    path = write_scenario(tmp_path, private_raw(), "s.yaml")
    out = tmp_path / "out"
    result = run_cli("run", str(path), "--driver", "inprocess", "--sweep", f"{KEY}=1,2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    with open(out / "runs.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    assert [float(r["eps[D_s]"]) for r in runs] == pytest.approx([1.0, 2.0], rel=1e-9)  # the knob, on its ledger
    # what an owner gave up: D_s and the auction (0.1 per round, 6 rounds), composed
    assert [float(r["eps_spent"]) for r in runs] == pytest.approx([1.6, 2.6], rel=1e-9)
    assert [float(r["delta_spent"]) for r in runs] == [1e-4, 1e-4]
    with open(out / "summary.csv", newline="") as f:
        assert [float(r["eps_spent_mean"]) for r in csv.DictReader(f)] == pytest.approx([1.6, 2.6], rel=1e-9)
    text = " ".join(result.stdout.split())
    assert "owner eps (D_s + auction)" in text and "1.6 = 1 + 0.6" in text and "2.6 = 2 + 0.6" in text
    assert (out / "sweep.png").stat().st_size > 10_000


def test_a_sweep_over_the_total_tabulates_and_plots_what_an_owner_gave_up(monkeypatch, tmp_path):
    """The knob covers D_s alone; an owner also gave up the auction's eps. The table shows the
    composed total and each ledger, labelled; the plot's x axis is the composed total, and says so."""
    import io

    from rich.console import Console

    from marketplace.api import sweep
    from marketplace.protocols.summarize import sweeps
    from marketplace.reporting import plots

    drawn = []
    monkeypatch.setattr(plots, "sweep_figure", lambda summary, keys, path, **kw: drawn.append((summary, kw)))
    raw = private_raw()
    raw["summarize"]["rounds"] = 3
    result = sweep(raw, {KEY: [0.5, 4.0]}, driver="inprocess", out=tmp_path / "sweep")
    for row in result.rows:
        assert row["eps_spent"] == pytest.approx(row["eps[D_s]"] + row["eps[auction]"], rel=1e-12)
        assert row["eps[auction]"] == pytest.approx(0.3) and row["eps_spent"] > row[KEY]
    ((summary, kw),) = drawn
    assert kw["x_column"] == "eps_spent" and "D_s + auction" in kw["x_label"]
    assert [r["eps_spent_mean"] for r in summary] == pytest.approx([0.8, 4.3], rel=1e-9)
    console = Console(file=io.StringIO(), width=400)
    console.print(sweeps.sweep_table(result.summary, result.keys, "t"))
    text = console.file.getvalue()
    assert "owner eps (D_s + auction)" in text and "0.8 = 0.5 + 0.3" in text and "4.3 = 4 + 0.3" in text


def test_a_privacy_sweep_is_plotted_against_the_eps_spent_and_others_against_the_key(monkeypatch, tmp_path):
    from marketplace.protocols.summarize import sweeps
    from marketplace.reporting import plots

    seen = []
    monkeypatch.setattr(plots, "sweep_figure", lambda *a, x_column=None, **k: seen.append(x_column))
    sweeps.plot_sweep([], [KEY], tmp_path / "a.png", title="t")
    sweeps.plot_sweep([], ["summarize.privacy.eps_auction"], tmp_path / "b.png", title="t")
    sweeps.plot_sweep([], ["summarize.rounds"], tmp_path / "c.png", title="t")
    assert seen == ["eps_spent", "eps_spent", None]
