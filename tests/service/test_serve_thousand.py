"""A served marketplace of 1,000 owners, hosted by four agent processes of 250 owners each, serves a
sketch request end to end: every owner is connected, releases its sketch and is charged once on its
own ledger, and nothing is left reserved. (Its latency is measured by benchmarks/bench_serve.py
--owners 1000 --owners-per-agent 250, not here.)"""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import ROOT
from test_serve import free_port

import marketplace
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

pytestmark = pytest.mark.slow

OWNERS = 1000
PER_AGENT = 250


def thousand_owner_market() -> dict:
    """scenarios/market-serve.yaml with 1,000 owners, its rows dealt evenly (at least 40 each), and
    budgets no request exhausts."""
    market = yaml.safe_load((ROOT / "scenarios" / "market-serve.yaml").read_text())
    market["parties"] = {"owners": OWNERS}
    market["data"]["source"]["covariate_shift"]["rows_per_component"] = -(-OWNERS * 40 // 6)
    market["data"]["partition"] = {"scheme": "even"}
    market["lifetime"] = {"budget": {"epsilon": 100.0}, "relation": "add/remove-one", "filter": "basic"}
    return market


def test_a_marketplace_of_a_thousand_owners_in_four_agents_serves_a_sketch_request(tmp_path):
    (tmp_path / "market.yaml").write_text(yaml.safe_dump(thousand_owner_market()))
    with marketplace.serve(
        tmp_path / "market.yaml",
        tmp_path / "state",
        endpoint=f"tcp://127.0.0.1:{free_port()}",
        consumers=["alice"],
        owners_per_process=PER_AGENT,
    ) as served:
        report = marketplace.request(
            ROOT / "scenarios" / "sketch-quickstart.yaml",
            market=served.endpoint,
            keys=tmp_path / "state" / "consumers" / "alice",
            out=tmp_path / "out",
            wait_s=600,
        )
        status = json.loads((tmp_path / "state" / "server.json").read_text())
    assert report.status == "completed", report.raw.get("failures")
    assert len(report.raw["released"]) == OWNERS and status["owners_present"] == OWNERS
    hosted = sorted(p.name for p in (tmp_path / "state" / "agents").iterdir())  # each agent's work folder
    assert hosted == sorted(f"owner-{i + 1}..owner-{i + PER_AGENT}" for i in range(0, OWNERS, PER_AGENT))
    session = report.raw["run_id"]
    for i in range(1, OWNERS + 1):
        with LifetimeLedger.read(ledger_file(tmp_path / "state" / "owners", f"owner-{i}")) as ledger:
            assert [(r.request_id, r.state) for r in ledger.history()] == [(session, "committed")], i
