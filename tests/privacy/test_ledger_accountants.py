"""Every ledger names the accountant that produced its figure, for each protocol's private runs,
and the run's terminal table prints the same words.

The labels are checked against what the ledger's own steps give when composed again by that
accountant alone (the exact Gaussian, basic composition, the zCDP conversion), so a label that
names the wrong accountant fails even when the words look plausible.
"""

from __future__ import annotations

import io
import math
import re

import pytest
from conftest import ROOT
from rich.console import Console

from marketplace.privacy import accountant
from marketplace.privacy.accountant import zcdp_to_dp
from marketplace.privacy.gdp import gaussian_eps
from marketplace.runner.display import summary_tables
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario
from scenarios import pfds_raw, run_raw, stc_raw


def run_file(tmp_path, name: str, overrides: list[str]) -> dict:
    return run_scenario(load_scenario(ROOT / "scenarios" / name, overrides), tmp_path / "run", driver="inprocess")


def terminal(report: dict) -> str:
    """What the run prints at the end, as one line of words (table borders and wrapping removed)."""
    console = Console(file=io.StringIO(), width=1000, color_system=None)
    for table in summary_tables(report):
        console.print(table)
    return " ".join(re.sub("[│┃║|]", " ", console.file.getvalue()).split())


def ledgers(report: dict) -> dict[str, dict]:
    return {n: e for n, e in report["privacy"].items() if isinstance(e, dict) and e.get("eps") is not None}


def gaussian_mu(ledger: dict) -> float:
    return math.sqrt(sum(2 * s["rho"] * s["count"] for s in ledger["steps"]))


def test_summarize_gaussian_ledgers_name_the_exact_gaussian_accountant(tmp_path):
    report = run_file(tmp_path, "quickstart-private.yaml", ["summarize.rounds=5"])
    found = ledgers(report)
    for name in ("consumer:D_v", "D_s"):
        ledger = found[name]
        assert ledger["accountant"] == accountant.EXACT_GAUSSIAN, name
        assert "theorem" not in ledger and ledger["configured_theorem"] is None, name  # 'advanced' composed nothing
        assert ledger["eps"] == pytest.approx(gaussian_eps(mu=gaussian_mu(ledger), delta=ledger["delta"]), rel=1e-12)
    text = terminal(report)
    for name, ledger in found.items():
        assert f"{name}: eps = " in text and ledger["accountant"] in text, name
    assert "advanced" not in text  # no ledger of this run used advanced composition


def test_summarize_zcdp_accounting_is_named_as_the_conversion(tmp_path):
    report = run_file(
        tmp_path, "quickstart-private.yaml", ["summarize.rounds=4", "summarize.privacy.gaussian_accountant=zcdp"]
    )
    for name in ("consumer:D_v", "D_s"):
        ledger = report["privacy"][name]
        rho = sum(s["rho"] * s["count"] for s in ledger["steps"])
        assert ledger["accountant"] == accountant.ZCDP, name
        assert ledger["eps"] == pytest.approx(zcdp_to_dp(rho, ledger["delta"], method="cks"), rel=1e-12)
    assert accountant.ZCDP in terminal(report)


def test_summarize_mwem_releases_name_the_configured_theorem(tmp_path):
    report = run_file(
        tmp_path, "quickstart-private.yaml", ["summarize.rounds=3", "summarize.privacy.release=mwem_paper"]
    )
    for name in ("consumer:D_v", "D_s"):
        ledger = report["privacy"][name]
        assert ledger["accountant"] == accountant.ADVANCED, name
        assert ledger["configured_theorem"] == "advanced"
        basic = sum(s["eps"] * s["count"] for s in ledger["steps"])
        assert ledger["eps"] < basic  # advanced composition did beat basic here, as the label says
    assert accountant.ADVANCED in terminal(report)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_sketch_ledgers_name_basic_composition(tmp_path, mechanism):
    overrides = [f"sketch.mechanism={mechanism}"] + (["sketch.delta=1e-6"] if mechanism == "gaussian" else [])
    report = run_file(tmp_path, "sketch-quickstart.yaml", overrides)
    found = ledgers(report)
    assert found
    text = terminal(report)
    for name, ledger in found.items():
        assert ledger["accountant"] == accountant.BASIC and ledger["configured_theorem"] == "basic"
        assert ledger["eps"] == pytest.approx(sum(s["eps"] * s["count"] for s in ledger["steps"]))
        assert (
            f"{name}: eps = {ledger['eps']:.4g}, delta = {ledger['delta']:.4g} ({mechanism}, {accountant.BASIC};"
            in text
        )


@pytest.fixture
def stc_tiny() -> dict:
    return stc_raw()


@pytest.mark.parametrize(
    "privacy, label",
    [
        ({"epsilon": 2.0}, accountant.BASIC),
        ({"notion": "zcdp", "rho": 0.5}, accountant.EXACT_GAUSSIAN),
        ({"notion": "zcdp", "rho": 0.5, "gaussian_accountant": "zcdp"}, accountant.ZCDP),
    ],
)
def test_stc_ledgers_name_their_accountant(tmp_path, stc_tiny, privacy, label):
    stc_tiny["stc"]["privacy"] = privacy
    report = run_raw(stc_tiny, tmp_path, source="t")
    found = ledgers(report)
    assert set(found) == {"owner-1", "owner-2"}
    text = terminal(report)
    for name, ledger in found.items():
        assert ledger["accountant"] == label, name
        if label == accountant.EXACT_GAUSSIAN:
            assert ledger["eps"] == pytest.approx(
                gaussian_eps(mu=gaussian_mu(ledger), delta=ledger["delta"]), rel=1e-12
            )
        elif label == accountant.ZCDP:
            assert ledger["eps"] == pytest.approx(zcdp_to_dp(0.5, ledger["delta"], method="cks"), rel=1e-12)
        else:
            assert ledger["eps"] == pytest.approx(2.0)
        assert f"{name}: " in text
    assert label in text


def test_pfds_ledgers_name_basic_composition(tmp_path):
    raw = pfds_raw(sharers=2)
    report = run_raw(raw, tmp_path, source="t")
    found = ledgers(report)
    assert set(found) == {"owner-2", "owner-3"}  # the last two owners share
    for name, ledger in found.items():
        assert ledger["accountant"] == accountant.BASIC and ledger["delta"] == 0, name
        assert ledger["eps"] == pytest.approx(sum(s["eps"] * s["count"] for s in ledger["steps"]))
    text = terminal(report)
    assert f"delta = 0 (pure DP) ({accountant.BASIC};" in text
