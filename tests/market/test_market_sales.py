"""`summarize` in a market beside sketch: owners sell points under their terms, consumers pay from
their spending budgets, and the market report's points sold, earnings and per-consumer bills are
what the owners' ledgers and the requests' reports say."""

from __future__ import annotations

import copy
import math

import pytest
from conftest import ROOT
from market_files import market, sketch_request

from marketplace.market import play
from marketplace.market.spec import MarketError, read_market
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

SUMMARIZE = {
    "rounds": 4,
    "features": 20,
    "baselines": [],
    "privacy": {"enabled": True, "t_init": 100, "eps_auction": 0.2},
}


def summarize_request(consumer: str, budget: float | None = None, **more):
    section = {} if budget is None else {"spending_budget": budget}
    return {"consumer": consumer, "protocol": "summarize", "summarize": section, **more}


def points_market(requests, **settings):
    raw = market(requests, owners=3, budget=20.0, relation="replace-one-distinct", **settings)
    raw["market"]["budget"]["delta"] = 0.01
    raw["scenario"]["summarize"] = copy.deepcopy(SUMMARIZE)
    return raw


def test_points_sold_and_earnings_are_what_every_owners_ledger_recorded(tmp_path):
    raw = points_market(
        [summarize_request("alice", repeat=2), sketch_request("bob", 0.3), summarize_request("carol", 5.0)],
        rules=["fcfs"],
        terms={"price": 1.0},
        owner_terms={"owner-2": {"price": 2.5}},
    )
    report = play(raw, tmp_path / "m", driver="inprocess")
    section = report.play("fcfs")
    rows = section["requests"]
    assert [r["status"] for r in rows] == ["served"] * 4
    assert rows[2]["sale"]["paid"] == 0.0 and rows[2]["sale"]["points_bought"] == 0  # the sketch sells nothing
    assert rows[3]["sale"]["paid"] <= 5.0 + 1e-9  # carol's budget
    for owner, entry in section["owners"].items():
        with LifetimeLedger.read(ledger_file(tmp_path / "m" / "fcfs" / "ledgers", owner)) as ledger:
            sales = [s for s in ledger.sales() if s.state == "committed"]
        assert entry["points_sold"] == sum(s.sold for s in sales)
        assert entry["earnings"] == pytest.approx(math.fsum(s.earnings for s in sales))
        price = 2.5 if owner == "owner-2" else 1.0
        assert entry["earnings"] == pytest.approx(price * entry["points_sold"])
        assert entry["points_sold_after"][-1] == entry["points_sold"] and len(entry["points_sold_after"]) == 4
    consumers = section["consumers"]
    paid = {c: math.fsum(r["sale"]["paid"] for r in rows if r["consumer"] == c) for c in ("alice", "bob", "carol")}
    assert {c: consumers[c]["paid"] for c in paid} == pytest.approx(paid)
    assert consumers["bob"]["quality_per_paid"] is None  # it paid nothing
    assert section["summary"]["paid"] == pytest.approx(sum(paid.values()))
    assert (tmp_path / "m" / "sales.png").exists()
    assert "Consumers" in (tmp_path / "m" / "market.md").read_text()


def test_a_summarize_request_is_refused_where_the_ledgers_relation_cannot_charge_it(tmp_path):
    raw = points_market([summarize_request("alice")])
    raw["market"]["relation"] = "add/remove-one"
    with pytest.raises(MarketError, match="replace-one-distinct"):
        read_market(raw)


def test_the_non_private_form_is_refused_naming_why(tmp_path):
    raw = points_market([summarize_request("alice")])
    raw["requests"][0]["summarize"]["privacy"] = {"enabled": False}
    with pytest.raises(MarketError, match="no finite privacy cost"):
        read_market(raw)


@pytest.mark.parametrize(
    "terms, words",
    [({"price": -1}, "price"), ({"cost": 2}, "market.terms.cost"), ({"points": 1.5}, "points")],
)
def test_bad_terms_are_refused_naming_the_key(terms, words):
    raw = points_market([summarize_request("alice")], terms=terms)
    with pytest.raises(MarketError, match=words):
        read_market(raw)


def test_terms_for_an_owner_the_market_does_not_have_are_refused():
    raw = points_market([summarize_request("alice")], owner_terms={"owner-9": {"price": 1.0}})
    with pytest.raises(MarketError, match="market.owner_terms.owner-9"):
        read_market(raw)


def test_the_shipped_points_market_mixes_summarize_with_sketch_and_stc():
    spec = read_market(ROOT / "scenarios" / "market-points.yaml")
    assert {r.protocol for r in spec.requests} == {"summarize", "sketch", "stc"}
    assert spec.terms and spec.terms["price"] > 0 and spec.relation == "replace-one-distinct"
