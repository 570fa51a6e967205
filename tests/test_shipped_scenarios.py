"""Every scenario we ship validates, and the ones that need no download run."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import ROOT, SHARED_DATA
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario

SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))
NEEDS_SHARED_DATA = {"sketch-lifesci.yaml", "sketch-occupancy.yaml", "adult.yaml", "mnist.yaml", "paper-adult.yaml", "stc-mnist.yaml", "stc-office.yaml", "stc-superconductivity.yaml", "pfds-adult.yaml", "pfds-bank.yaml", "pfds-diabetes.yaml", "pfds-bike.yaml"}


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_scenario_validates(path: Path):
    if path.name in NEEDS_SHARED_DATA and not SHARED_DATA.is_dir():
        pytest.skip(f"{path.name} needs {SHARED_DATA}")
    scenario = load_scenario(path)
    assert scenario.config.name == path.stem


def test_digits_scenario_runs_and_beats_uniform_sampling(tmp_path):
    report = run_scenario(load_scenario(ROOT / "scenarios" / "digits.yaml", ["summarize.rounds=30"]), tmp_path, driver="inprocess")
    assert report["status"] == "completed"
    assert report["metrics"]["mmd2"] < report["metrics"]["baselines"]["uniform"]["mmd2"]


@pytest.mark.data
@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="needs ../shared/data")
def test_mnist_scenario_runs_on_real_data(tmp_path):
    report = run_scenario(load_scenario(ROOT / "scenarios" / "mnist.yaml", ["summarize.rounds=20", "summarize.baselines=[]"]),
                          tmp_path, driver="inprocess")
    assert report["status"] == "completed" and report["data"]["dim"] == 50
    assert report["checks"]["central_replay"]["matches"]
