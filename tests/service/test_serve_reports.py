"""What a served session's owners hand their server, and what reaches the consumer: each owner's agent
sends the report of a party that publishes only its declared releases and public values, so neither
the server's copy nor the consumer's report holds an owner's row count or timings."""

from __future__ import annotations

import json

import pytest
from test_serve import Market, report

pytestmark = pytest.mark.slow


def owner_figures(details: dict) -> list[str]:
    """What an owner's entry of a report holds that it keeps to itself: its row count, its timings."""
    found = [f"result.{key}" for key in ("rows", "sent_rows") if key in (details.get("result") or {})]
    found += [key for key in ("timing", "simulator_view", "own") if details.get(key)]
    return found + [f"driver.{key}" for key in ("io_s", "idle_s") if key in (details.get("driver") or {})]


def test_a_served_session_reports_no_owners_row_count_or_timings(tmp_path):
    market = Market(tmp_path, consumers="alice")
    try:
        proc = market.request("alice", "out")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (out, err)
        got = report(tmp_path / "out")
        assert got["status"] == "completed" and got["driver"] == "market"
        owners = [p["id"] for p in got["parties"] if p["role"] == "owner"]
        assert owners == ["owner-1", "owner-2", "owner-3"]
        for owner in owners:
            assert owner_figures(got["party_details"][owner]) == [], owner
            assert got["party_details"][owner]["result"]["released"] is True
            assert owner not in got["timing"]["by_party"]
        (folder,) = (market.state / "sessions").iterdir()
        for owner in owners:  # what the owner's agent sent the server
            handed = json.loads((folder / "parties" / f"{owner}.json").read_text())
            assert owner_figures(handed) == [], owner
    finally:
        assert market.stop()[0] == 0
