"""A market played several times (``market.repeats``): other noise per repeat, fresh ledgers per
repeat, and each figure's spread (mean, sample sd with ddof = 1, n, each repeat's value) beside it."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
import yaml
from conftest import run_cli
from market_files import HAND_STREAM, market, sketch_request

from marketplace.market import MarketError, play
from marketplace.market.spec import parse_market, read_market
from marketplace.market.tables import markdown, print_tables, tables
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

REPEATS = 3


@pytest.fixture(scope="module")
def played(tmp_path_factory):
    """HAND_STREAM (costs 0.6, 0.3, 0.2, 0.5 against budgets of 1) played three times, seeds 5, 6, 7."""
    folder = tmp_path_factory.mktemp("repeats") / "m"
    return play(market(HAND_STREAM, repeats=REPEATS), folder, driver="inprocess"), folder


@pytest.fixture(scope="module")
def played_once_with_seed_6(tmp_path_factory):
    """The same market played once with seed 6: what the repeat with seed 5 + 1 must be."""
    folder = tmp_path_factory.mktemp("once") / "m"
    return play(market(HAND_STREAM), folder, driver="inprocess", seed=6), folder


def _without_spread(value):
    """A report part without the spread keys and the run folders (which name the repeat)."""
    if isinstance(value, dict):
        return {k: _without_spread(v) for k, v in value.items() if k not in ("spread", "folder", "text")}
    if isinstance(value, list):
        return [_without_spread(v) for v in value]
    return value


def _check(figure: dict, values: list) -> None:
    """``figure`` is the spread of ``values``: numpy's mean and std with ddof = 1 over the values
    that are not None, their count, and the values themselves."""
    present = np.array([v for v in values if v is not None], dtype=float)
    assert figure["values"] == values and figure["n"] == len(present)
    assert figure["mean"] == pytest.approx(present.mean()) if len(present) else figure["mean"] is None
    if len(present) > 1:
        assert figure["sd"] == pytest.approx(present.std(ddof=1))
    else:
        assert figure["sd"] is None


def test_each_repeat_plays_the_whole_stream_in_its_own_folder_with_its_own_seed(played):
    report, folder = played
    assert report.repeats == REPEATS and report.raw["seeds"] == [5, 6, 7]
    assert [(r["repeat"], r["seed"], r["folder"]) for r in report.raw["repeat_plays"]] == [
        (0, 5, "repeat-0"),
        (1, 6, "repeat-1"),
        (2, 7, "repeat-2"),
    ]
    assert not (folder / "fcfs").exists()
    for i in range(REPEATS):
        for rule in ("fcfs", "dpf"):
            assert (folder / f"repeat-{i}" / rule / "ledgers").is_dir()
        rows = report.repeat(i)["fcfs"]["requests"]
        assert rows[0]["folder"] == f"repeat-{i}/fcfs/req-0001"
        assert (folder / rows[0]["folder"] / "report.json").is_file()
    # the first repeat is what `plays` shows, its figures each with the spread beside them
    assert _without_spread(report.raw["plays"]) == _without_spread(report.repeat(0))


def test_the_repeats_draw_other_noise_for_the_same_request(played):
    report, _ = played
    for rule, request in (("fcfs", 0), ("fcfs", 1), ("dpf", 1), ("dpf", 3)):
        qualities = [report.repeat(i)[rule]["requests"][request]["quality"] for i in range(REPEATS)]
        assert None not in qualities and len(set(qualities)) == REPEATS, (rule, request, qualities)


def test_a_repeat_is_the_market_played_once_with_its_seed(played, played_once_with_seed_6):
    report, _ = played
    once, _ = played_once_with_seed_6
    assert _without_spread(report.repeat(1)) == _without_spread(once.raw["plays"])


def test_every_repeat_starts_from_fresh_ledgers(played):
    report, folder = played
    for i in range(REPEATS):
        assert report.statuses("fcfs") == {r["id"]: r["status"] for r in report.repeat(i)["fcfs"]["requests"]}
        for owner in ("owner-1", "owner-2"):
            with LifetimeLedger.read(ledger_file(folder / f"repeat-{i}" / "fcfs" / "ledgers", owner)) as ledger:
                # 0.6 and 0.3 fit a budget of 1 in every repeat: nothing carried over from the repeat before
                assert ledger.spent().eps == pytest.approx(0.9)
                assert [r.state for r in ledger.history()] == ["committed", "committed", "declined", "declined"]
            assert report.repeat(i)["fcfs"]["owners"][owner]["spent"]["eps"] == pytest.approx(0.9)
    spent = report.play("fcfs")["owners"]["owner-1"]["spread"]["spent"]["eps"]
    assert spent["values"] == pytest.approx([0.9] * REPEATS) and spent["sd"] == pytest.approx(0.0)
    assert report.spread("fcfs")["spent"]["eps"]["mean"] == pytest.approx(1.8)  # two owners, 0.9 each


def test_the_spread_is_numpys_mean_and_sample_sd_of_each_repeats_figure(played):
    report, _ = played
    for rule in ("fcfs", "dpf"):
        each = [report.repeat(i)[rule] for i in range(REPEATS)]
        spread = report.spread(rule)
        for key in ("served_total", "served", "partial", "declined", "failed", "not_granted"):
            _check(spread[key], [p["summary"][key] for p in each])
        _check(spread["owners_exhausted"], [len(p["summary"]["owners_exhausted"]) for p in each])
        _check(spread["spent"]["eps"], [sum(e["spent"]["eps"] for e in p["owners"].values()) for p in each])
        quality = spread["mean_quality"]["sketch"]
        assert quality["metric"] == "moment1_mre"
        for key in ("mean", "requests", "collapsed"):
            _check(quality[key], [p["summary"]["mean_quality"]["sketch"][key] for p in each])
        for owner, entry in report.play(rule)["owners"].items():
            _check(entry["spread"]["spent"]["eps"], [p["owners"][owner]["spent"]["eps"] for p in each])
            _check(entry["spread"]["served"], [p["owners"][owner]["served"] for p in each])
            _check(entry["spread"]["declined"], [p["owners"][owner]["declined"] for p in each])
        for k, row in enumerate(report.play(rule)["requests"]):
            rows = [p["requests"][k] for p in each]
            _check(row["spread"]["quality"], [r["quality"] for r in rows])
            assert row["spread"]["collapsed"] == sum(r["collapsed"] for r in rows)
            assert sum(row["spread"]["statuses"].values()) == REPEATS
    # the request no rule could serve has no quality in any repeat
    assert report.play("dpf")["requests"][0]["spread"]["quality"] == {
        "mean": None,
        "sd": None,
        "n": 0,
        "values": [None] * REPEATS,
    }


def test_a_market_played_once_keeps_its_report_and_adds_spreads_of_one_value(tmp_path):
    report = play(market(HAND_STREAM[:2], rules=["fcfs"]), tmp_path / "m", driver="inprocess")
    raw = report.raw
    assert raw["repeats"] == 1 and raw["seeds"] == [5] and "repeat_plays" not in raw
    assert (tmp_path / "m" / "fcfs" / "ledgers").is_dir() and not (tmp_path / "m" / "repeat-0").exists()
    section = raw["plays"]["fcfs"]
    assert set(section) == {"requests", "owners", "consumers", "summary"}
    summary = section["summary"]
    assert set(summary) == {
        "requests",
        "served",
        "partial",
        "declined",
        "failed",
        "not_granted",
        "refused",
        "served_total",
        "owners_exhausted",
        "mean_quality",
        "paid",
        "points_sold",
        "text",
        "spread",
    }
    assert summary["served_total"] == 2 and summary["spread"]["served_total"] == {
        "mean": 2.0,
        "sd": None,
        "n": 1,
        "values": [2],
    }
    quality = summary["mean_quality"]["sketch"]
    assert set(quality) == {"metric", "mean", "requests", "collapsed"}
    assert summary["spread"]["mean_quality"]["sketch"]["mean"]["values"] == [quality["mean"]]
    first = section["requests"][0]
    assert first["folder"] == "fcfs/req-0001" and first["spread"]["quality"]["values"] == [first["quality"]]
    assert report.repeat(0) is raw["plays"]
    assert "±" not in markdown(raw)


def test_tables_and_figures_show_mean_and_sd_over_the_repeats(played):
    report, folder = played
    rule_table, request_table, owner_table = tables(report.raw)
    assert "mean±sd over 3 repeats (seeds 5 to 7" in rule_table[0]
    served = next(row for row in rule_table[2] if row[0] == "requests served")
    assert served == ["requests served", "2±0", "3±0"]
    quality = next(row for row in rule_table[2] if row[0].startswith("mean sketch"))
    assert all("±" in cell and "(n=3/3;" in cell for cell in quality[1:])
    assert request_table[2][1][5] == "served" and "(3 of 3" in request_table[2][1][7]
    assert owner_table[2][0][2].startswith("eps=0.9±0 (exhausted in 3 of 3)")
    text = (folder / "market.md").read_text()
    assert "Played 3 times, seeds 5 to 7" in text and "over 3 repeats: 2±0 of 4 requests served" in text
    for name in ("budget.png", "quality.png"):
        assert (folder / name).stat().st_size > 0
    from rich.console import Console

    out = io.StringIO()
    print_tables(Console(file=out, width=300), report.raw)
    assert "fcfs: over 3 repeats: 2±0 of 4 requests served" in out.getvalue()


@pytest.mark.parametrize("value", [0, -1, 101, 2.5, True, "3", None])
def test_a_bad_repeats_is_refused_naming_the_key(value):
    with pytest.raises(MarketError) as caught:
        parse_market(market(HAND_STREAM, repeats=value), source="m.yaml")
    assert "m.yaml: market.repeats: expected a whole number from 1 to 100, got" in str(caught.value)


def test_repeats_from_the_command_line_replace_the_files_and_are_checked_as_such():
    assert read_market(market(HAND_STREAM, repeats=2), repeats=5).repeats == 5
    with pytest.raises(MarketError, match=r"--repeats: expected a whole number from 1 to 100, got 0"):
        read_market(market(HAND_STREAM), repeats=0)
    with pytest.raises(MarketError, match=r"market\.repeats: repeat 1 would play with seed .* past the largest seed"):
        parse_market(market(HAND_STREAM, repeats=2, seed=2**63 - 1))
    with pytest.raises(ValueError, match="'repeats' parameter of play must be a whole number from 1 to 100"):
        play(read_market(market(HAND_STREAM)), repeats=0, driver="inprocess")


def test_marketplace_run_repeats_a_market_and_validate_says_how_often(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(market([sketch_request("a", 0.2)], rules=["fcfs"], repeats=3)))
    result = run_cli("validate", str(path))
    assert result.returncode == 0 and "3 repeats, seeds 5 to 7" in result.stdout, result.stderr
    result = run_cli("run", str(path), "--driver", "inprocess", "--out", str(tmp_path / "out"), "--repeats", "2")
    assert result.returncode == 0, result.stderr
    assert "repeat-1/fcfs req-0001 a sketch: served" in result.stdout and "(2 repeats" in result.stdout
    raw = json.loads((tmp_path / "out" / "market.json").read_text())
    assert raw["repeats"] == 2 and [r["seed"] for r in raw["repeat_plays"]] == [5, 6]
    result = run_cli("run", str(path), "--driver", "inprocess", "--out", str(tmp_path / "bad"), "--repeats", "101")
    assert result.returncode == 2 and "--repeats: expected a whole number from 1 to 100, got 101" in result.stderr
    assert not (tmp_path / "bad").exists()
