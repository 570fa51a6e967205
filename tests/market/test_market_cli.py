"""`marketplace run` and `marketplace validate` on a market file."""

from __future__ import annotations

import json

import yaml
from conftest import ROOT, run_cli
from market_files import HAND_STREAM, market


def test_validate_describes_the_shipped_market():
    result = run_cli("validate", "scenarios/market.yaml")
    assert result.returncode == 0, result.stderr
    assert "valid market (24 requests" in result.stdout and "rules fcfs, dpf" in result.stdout


def test_run_plays_a_market_file_and_writes_its_report(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(market(HAND_STREAM, rules=["fcfs"])))
    result = run_cli("run", str(path), "--driver", "inprocess", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "fcfs req-0003 c sketch: declined" in result.stdout and "requests served" in result.stdout
    raw = json.loads((tmp_path / "out" / "market.json").read_text())
    assert [r["status"] for r in raw["plays"]["fcfs"]["requests"]] == ["served", "served", "declined", "declined"]


def test_a_bad_market_file_exits_2_naming_the_key(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(market(HAND_STREAM, rules=["lottery"])))
    result = run_cli("run", str(path), "--driver", "inprocess", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert (
        "bad market file" in result.stderr
        and "market.rules[0]: expected one of fcfs, dpf, got 'lottery'" in result.stderr
    )
    assert not (tmp_path / "out").exists()


def test_scenario_options_are_refused_for_a_market_file():
    result = run_cli("run", str(ROOT / "scenarios" / "market.yaml"), "--set", "seed=3")
    assert result.returncode == 2 and "is a market file: --set applies to scenarios" in result.stderr
