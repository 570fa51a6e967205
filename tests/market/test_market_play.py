"""Playing a market end to end: the owners' ledgers decide, the rules order, one seed fixes the report."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT
from market_files import HAND_STREAM, market, sketch_request

from marketplace.market import MarketReport, play
from marketplace.market.player import noise_key
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file


def test_fcfs_and_dpf_admit_what_the_definitions_give_on_a_hand_worked_stream(tmp_path):
    # budget 1 per owner, costs 0.6, 0.3, 0.2, 0.5 (tests/market/test_market_rules.py works DPF by hand):
    # fcfs: 0.6 and 0.3 fit, then 0.2 and 0.5 are declined by every owner's ledger;
    # dpf (N = 4): 0.3, 0.2, 0.5 run in that order and 0.6 is never granted.
    report = play(market(HAND_STREAM), tmp_path / "m", driver="inprocess")
    assert report.statuses("fcfs") == {
        "req-0001": "served",
        "req-0002": "served",
        "req-0003": "declined",
        "req-0004": "declined",
    }
    assert report.statuses("dpf") == {
        "req-0001": "not granted",
        "req-0002": "served",
        "req-0003": "served",
        "req-0004": "served",
    }
    assert [r["order"] for r in report.play("dpf")["requests"]] == [None, 1, 2, 3]
    assert report.summary("fcfs")["served_total"] == 2 and report.summary("dpf")["served_total"] == 3


def test_the_ledgers_hold_what_the_report_says_each_owner_spent(tmp_path):
    report = play(market(HAND_STREAM, rules=["fcfs"]), tmp_path / "m", driver="inprocess")
    for owner, entry in report.play("fcfs")["owners"].items():
        with LifetimeLedger.read(ledger_file(tmp_path / "m" / "fcfs" / "ledgers", owner)) as ledger:
            assert entry["spent"]["eps"] == pytest.approx(ledger.spent().eps) == pytest.approx(0.9)
            assert [r.state for r in ledger.history()] == ["committed", "committed", "declined", "declined"]
        assert entry["spent_after"] == pytest.approx([0.6, 0.9, 0.9, 0.9])
        assert entry["served"] == 2 and entry["declined"] == 2 and entry["exhausted"]


def test_an_owner_with_a_small_budget_declines_and_the_request_is_served_by_the_others(tmp_path):
    raw = market(
        [sketch_request("a", 0.4, repeat=2)], owners=3, rules=["fcfs"], owner_budgets={"owner-2": {"epsilon": 0.5}}
    )
    report = play(raw, tmp_path / "m", driver="inprocess")
    first, second = report.play("fcfs")["requests"]
    assert first["status"] == "served" and second["status"] == "partial"
    assert second["declined"] == ["owner-2"] and set(second["charged"]) == {"owner-1", "owner-3"}
    assert second["quality"] is not None


def test_every_request_draws_its_own_noise(tmp_path):
    report = play(market([sketch_request("a", 0.4, repeat=2)], rules=["fcfs"]), tmp_path / "m", driver="inprocess")
    first, second = report.play("fcfs")["requests"]
    assert first["status"] == second["status"] == "served"
    assert first["quality"] != second["quality"]  # the same request, fresh noise: a different release


def test_each_requests_report_says_its_noise_keys_come_from_the_market_seed(tmp_path):
    """A request's own report must not say that only a key file's reader can strip its noise: every
    key of a market play is derived from the market seed, which the report must say."""
    play(market([sketch_request("a", 0.1)], rules=["fcfs"]), tmp_path / "m", driver="inprocess")
    run = json.loads((tmp_path / "m" / "fcfs" / "req-0001" / "report.json").read_text())
    assert "derived by the market runner from (market seed" in run["noise"]["summary"]
    assert "only whoever can read a party's key file" not in run["noise"]["summary"]
    assert all("market seed" in p["who_can_strip"] for p in run["noise"]["parties"].values())


def test_noise_keys_depend_on_seed_rule_request_and_party_and_nothing_else():
    key = noise_key(5, "fcfs", "req-0001", "owner-1")
    assert key == noise_key(5, "fcfs", "req-0001", "owner-1") and len(key) == 32
    others = {
        noise_key(6, "fcfs", "req-0001", "owner-1"),
        noise_key(5, "dpf", "req-0001", "owner-1"),
        noise_key(5, "fcfs", "req-0002", "owner-1"),
        noise_key(5, "fcfs", "req-0001", "owner-2"),
    }
    assert key not in others and len(others) == 4


def test_the_same_seed_gives_the_same_market_report(tmp_path):
    raw = market(HAND_STREAM)
    one = play(raw, tmp_path / "one", driver="inprocess")
    two = play(raw, tmp_path / "two", driver="inprocess")
    assert one.comparable() == two.comparable()
    assert MarketReport.load(tmp_path / "one").comparable() == json.loads(json.dumps(one.comparable()))


def test_another_seed_gives_other_noise(tmp_path):
    one = play(market(HAND_STREAM[:1], rules=["fcfs"]), tmp_path / "one", driver="inprocess")
    two = play(market(HAND_STREAM[:1], rules=["fcfs"]), tmp_path / "two", driver="inprocess", seed=6)
    assert one.play("fcfs")["requests"][0]["quality"] != two.play("fcfs")["requests"][0]["quality"]


@pytest.mark.slow
def test_the_processes_driver_gives_the_same_market_report_as_inprocess(tmp_path):
    raw = market(HAND_STREAM)
    inprocess = play(raw, tmp_path / "in", driver="inprocess")
    processes = play(raw, tmp_path / "proc", driver="processes")
    assert processes.comparable() == inprocess.comparable()


def test_the_market_folder_holds_the_report_the_tables_the_figures_and_one_run_per_request(tmp_path):
    report = play(market(HAND_STREAM), tmp_path / "m", driver="inprocess")
    folder = tmp_path / "m"
    for name in ("market.json", "market.md", "budget.png", "quality.png"):
        assert (folder / name).stat().st_size > 0, name
    assert (folder / "dpf" / "req-0002" / "report.json").is_file() and not (folder / "dpf" / "req-0001").exists()
    text = (folder / "market.md").read_text()
    assert "| req-0004 |" in text and "held them all" in text
    assert report.raw["noise"].startswith("The market runner derived every party's noise key")


def test_the_shipped_market_runs_and_shows_an_owner_that_declines(tmp_path):
    report = play(ROOT / "scenarios" / "market.yaml", tmp_path / "m", driver="inprocess")
    for rule in ("fcfs", "dpf"):
        summary = report.summary(rule)
        assert summary["requests"] >= 20 and summary["served_total"] > 0 and summary["failed"] == 0
    owners = report.play("fcfs")["owners"]
    assert owners["owner-3"]["declined"] > 0 and owners["owner-3"]["exhausted"]
    assert any(row["status"] == "partial" and "owner-3" in row["declined"] for row in report.play("fcfs")["requests"])


def test_ledgers_under_replace_one_charge_the_restated_cost_and_the_scheduler_counts_it(tmp_path):
    # eps 0.2 under add/remove-one is eps 0.4 under replace-one: a budget of 1 pays twice, not five times
    report = play(
        market([sketch_request("a", 0.2, repeat=3)], relation="replace-one"), tmp_path / "m", driver="inprocess"
    )
    for rule in ("fcfs", "dpf"):
        rows = report.play(rule)["requests"]
        served = [row for row in rows if row["status"] == "served"]
        assert len(served) == 2 and all(row["charged"]["owner-1"]["eps"] == pytest.approx(0.4) for row in served)
    assert report.statuses("fcfs")["req-0003"] == "declined" and report.statuses("dpf")["req-0003"] == "not granted"
