"""Every scenario we ship validates, and the ones that need no download run."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import ROOT, needs_data

from marketplace import plugins
from marketplace.market.spec import is_market_file
from marketplace.runner.run import run_scenario
from marketplace.runtime import prepare_world
from marketplace.scenario import load_scenario

SHIPPED = sorted(path for path in (ROOT / "scenarios").glob("*.yaml") if not is_market_file(path))
"""The shipped scenarios (market files, tested in tests/market, are not scenarios)."""


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_scenario_validates(path: Path):
    from marketplace.data.config import SourceConfig
    from marketplace.data.sources import datasets_of
    from marketplace.datasets.cache import fetch_command, missing_files
    from marketplace.datasets.registry import dataset
    from marketplace.scenario.load import read_yaml
    from marketplace.schema import build

    source = build(SourceConfig, (read_yaml(path.read_text()).get("data") or {}).get("source") or {})
    absent = [name for name in datasets_of(source) if missing_files(dataset(name))]
    if absent:
        pytest.skip(f"{path.name} needs {absent}: {fetch_command(absent)}")
    scenario = load_scenario(path)
    assert scenario.config.name == path.stem
    world = prepare_world(
        scenario, plugins.exchange(scenario.config.protocol)
    )  # what `marketplace validate` and `run` check before starting
    assert len(world.owners) == scenario.config.parties.owners and all(len(owner) for owner in world.owners)


def test_no_shipped_scenario_names_a_data_folder():
    for path in SHIPPED:
        text = path.read_text()
        assert "root:" not in text and "shared" not in text, path.name


def test_digits_scenario_runs_and_beats_uniform_sampling(tmp_path):
    report = run_scenario(
        load_scenario(ROOT / "scenarios" / "digits.yaml", ["summarize.rounds=30"]), tmp_path, driver="inprocess"
    )
    assert report["status"] == "completed"
    assert report["metrics"]["mmd2"] < report["metrics"]["baselines"]["uniform"]["mmd2"]


@pytest.mark.data
@needs_data("mnist")
def test_mnist_scenario_runs_on_real_data(tmp_path):
    report = run_scenario(
        load_scenario(ROOT / "scenarios" / "mnist.yaml", ["summarize.rounds=20", "summarize.baselines=[]"]),
        tmp_path,
        driver="inprocess",
    )
    assert report["status"] == "completed" and report["data"]["dim"] == 50
    assert report["checks"]["central_replay"]["matches"]
