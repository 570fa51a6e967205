"""The figures ``marketplace.protocols.sketch.signal`` quotes are what the quickstart measures: its
table's ranges hold the runs it names, with the command it names."""

from __future__ import annotations

import re

import pytest
from conftest import ROOT

import marketplace
from marketplace.protocols.sketch import signal
from marketplace.scenario import Scenario

QUICKSTART = ROOT / "scenarios" / "sketch-quickstart.yaml"


def table() -> dict[str, list[tuple[float, float]]]:
    """eps -> [(low, high) of count_snr, numerator_snr, CDF error], from the module docstring."""
    doc = signal.__doc__ or ""
    number = r"(-?[\d.]+) to (-?[\d.]+) \([^)]*\)"
    rows = re.findall(rf"^(\S+)\s+{number}\s+{number}\s+{number}\s+\d+ of 10$", doc, re.MULTILINE)
    return {row[0]: [(float(row[i]), float(row[i + 1])) for i in (1, 3, 5)] for row in rows}


def test_the_docstring_names_the_command_and_a_row_for_each_eps():
    doc = " ".join((signal.__doc__ or "").split())
    assert "marketplace run scenarios/sketch-quickstart.yaml --driver inprocess --set sketch.epsilon=EPS" in doc
    assert set(table()) == {"1", "0.05", "0.005"}


@pytest.mark.parametrize("seed", [1, 7])
@pytest.mark.parametrize("eps", ["1", "0.05", "0.005"])
def test_the_quickstart_measures_what_the_docstring_says(eps, seed, tmp_path):
    report = marketplace.run(
        Scenario.from_file(QUICKSTART, {"sketch.epsilon": float(eps)}), tmp_path / "run", driver="inprocess", seed=seed
    ).raw
    measured = (
        report["metrics"]["signal"]["count_snr"],
        report["metrics"]["signal"]["numerator_snr"],
        report["metrics"]["errors"]["cdf_mae"],
    )
    for (low, high), value in zip(table()[eps], measured, strict=True):
        assert low <= value <= high, (eps, seed, low, value, high)
    assert report["metrics"]["signal"]["collapsed"] is (eps != "1")
