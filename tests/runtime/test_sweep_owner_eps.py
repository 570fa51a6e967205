"""The eps a sweep records, tabulates and plots (``eps_spent``) is what an owner gave up over the
run: every ledger that bounds what some observer learns of its data (the report's per-owner
section), composed, for the owner that gave up most. A protocol whose owners are bounded by one
ledger each (sketch, stc, pfds) states that ledger; summarize's owners are bounded by two (``D_s``
and ``auction``), and a sweep that showed one of them alone would understate what they gave up."""

from __future__ import annotations

import json

import pytest
from golden.view import golden_path

from marketplace.plugins import exchange

GOLDEN = [
    "quickstart-private.yaml",
    "private-shift.yaml",
    "paper-synthetic.yaml",
    "sketch-quickstart.yaml",
    "sketch-uniform.yaml",
    "stc-synthetic.yaml",
    "pfds-synthetic.yaml",
    "pfds-diabetes.yaml",
]


def composed_per_owner(report: dict) -> list[tuple[float, float]]:
    """(eps, delta) of each group of owners: basic composition of the distinct ledgers that bound
    any observer's view of its data."""
    out = []
    for group in report["privacy_per_owner"]["groups"]:
        ledgers = {
            entry["ledger"]: entry
            for observer in group["observers"]
            for entry in observer["ledgers"]
            if entry.get("eps") is not None
        }
        if ledgers:
            out.append((sum(e["eps"] for e in ledgers.values()), sum(e.get("delta") or 0.0 for e in ledgers.values())))
    return out


@pytest.mark.parametrize("scenario", GOLDEN)
def test_eps_spent_is_an_owners_ledgers_composed(scenario):
    report = json.loads(golden_path(scenario).read_text())
    row = exchange(report["protocol"]).sweep_row(report)
    totals = composed_per_owner(report)
    assert totals, scenario
    eps, delta = max(totals)
    assert row["eps_spent"] == pytest.approx(eps, rel=1e-12) and row["delta_spent"] == pytest.approx(delta, rel=1e-12)
    bounding = {
        entry["ledger"].replace("<owner>", "")
        for group in report["privacy_per_owner"]["groups"]
        for observer in group["observers"]
        for entry in observer["ledgers"]
    }
    for name, ledger in report["privacy"].items():  # no ledger that bounds an owner states more than the row
        if (name in bounding or name.startswith("owner-")) and ledger.get("eps") is not None:
            assert ledger["eps"] <= row["eps_spent"] * (1 + 1e-12), (name, ledger["eps"], row["eps_spent"])


def test_summarizes_eps_spent_adds_the_auction_to_d_s():
    report = json.loads(golden_path("quickstart-private.yaml").read_text())
    row = exchange("summarize").sweep_row(report)
    privacy = report["privacy"]
    assert row["eps_spent"] == pytest.approx(privacy["D_s"]["eps"] + privacy["auction"]["eps"], rel=1e-12)
    assert row["eps[D_s]"] == privacy["D_s"]["eps"] and row["eps[auction]"] == privacy["auction"]["eps"]
