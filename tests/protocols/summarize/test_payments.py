"""`summarize` sold at posted prices: the purse against its definition, and whole runs where owners
post terms and the consumer has a spending budget (the curator never asks for a point the budget
cannot pay for; every point handed over is paid at its owner's price; the report says why it ended)."""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pytest

from marketplace.protocols.summarize.payments import Purse
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import private_tiny_raw, run_raw

# --- the purse ------------------------------------------------------------------------------------


def test_without_a_budget_every_ask_is_sent_and_paid_at_the_posted_price():
    purse = Purse(None)
    purse.post("a", 2.5, None)
    assert purse.within_budget(["a", "b", "a"]) == ["a", "b", "a"]
    purse.pay("a")
    purse.pay("b")
    purse.pay("a")
    assert purse.paid == 5.0 and purse.bought == {"a": 2, "b": 1} and purse.paid_to == {"a": 5.0, "b": 0.0}


def test_asks_past_the_budget_are_not_sent_in_the_order_drawn():
    purse = Purse(5.0)
    purse.post("a", 2.0, None)
    purse.post("b", 3.0, None)
    purse.post("c", 1.0, None)
    assert purse.within_budget(["b", "a", "c"]) == ["b", "a"]  # 3 + 2 = 5; c's 1 would overspend
    assert purse.not_sent == 1
    assert purse.within_budget(["c", "a", "b"]) == ["c", "a"]  # 1 + 2; b's 3 would make 6


def test_a_budget_met_exactly_in_decimal_is_not_refused_for_a_rounding_error():
    purse = Purse(0.3)
    purse.post("a", 0.1, None)
    for _ in range(3):
        assert purse.affordable("a")
        purse.pay("a")
    assert not purse.affordable("a") and math.isclose(purse.paid, 0.3)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_a_budget_that_is_not_a_finite_number_at_least_zero_is_refused(bad):
    with pytest.raises(ValueError, match="budget"):
        Purse(bad)


# --- whole runs ---------------------------------------------------------------------------------------


@pytest.fixture
def priced():
    raw = private_tiny_raw()
    raw["lifetime"] = {"terms": {"price": 2.0}, "owner_terms": {"owner-2": {"price": 3.0}}}
    return raw


def owners_of(report):
    return {p: r for p, r in report["party_details"].items() if p.startswith("owner-")}


def test_every_point_handed_over_is_paid_at_its_owners_posted_price(priced, run_cache):
    report = run_cache.run(priced).report
    sale = report["sale"]
    assert report["status"] == "completed" and sale["spending_budget"] is None
    assert sale["prices"] == {"owner-1": 2.0, "owner-2": 3.0, "owner-3": 2.0}
    for owner, result in owners_of(report).items():
        own = result["result"]["sale"]
        assert own["sold"] == result["result"]["points_sent"] == sale["bought"].get(owner, 0)
        assert own["earned"] == pytest.approx(own["sold"] * sale["prices"][owner])
        assert sale["paid_to"].get(owner, 0.0) == pytest.approx(own["earned"])
    assert sale["paid"] == pytest.approx(sum(sale["paid_to"].values()))
    assert sale["points_bought"] >= len(report["selection"]) == 8  # the pool may hold points bought, unused


def test_the_curator_never_spends_past_the_consumers_budget_and_says_why_it_ended(priced, tmp_path):
    priced["summarize"]["spending_budget"] = 9.0  # at most 4 points at 2, 3 at 3
    report = run_raw(priced, tmp_path)
    sale = report["sale"]
    assert sale["paid"] <= 9.0 + 1e-9
    assert len(report["selection"]) < 8
    assert "spending budget is spent" in report["end_reason"]
    assert report["status"] == "completed"


def test_a_zero_budget_buys_nothing_and_the_run_ends_before_any_point(priced, tmp_path):
    priced["summarize"]["spending_budget"] = 0.0
    report = run_raw(priced, tmp_path)
    assert report["sale"]["points_bought"] == 0 and report["sale"]["paid"] == 0.0
    assert "spending budget" in report["end_reason"]


def test_free_points_under_a_zero_budget_are_still_taken(priced, tmp_path):
    priced["lifetime"] = {"terms": {"price": 0.0}}
    priced["summarize"]["spending_budget"] = 0.0
    report = run_raw(priced, tmp_path)
    assert len(report["selection"]) == 8 and report["sale"]["paid"] == 0.0


def test_an_owners_cap_stops_its_bids_and_its_points_sold(priced, tmp_path):
    priced["lifetime"] = {"terms": {"price": 1.0, "points_per_consumer": 1}}
    report = run_raw(priced, tmp_path)
    for result in owners_of(report).values():
        assert result["result"]["points_sent"] <= 1 and result["result"]["sale"]["cap"] == 1
    assert len(report["selection"]) <= 3  # three owners, one point each


def test_prices_and_budgets_give_the_same_report_with_either_driver(priced, tmp_path):
    priced["summarize"]["spending_budget"] = 11.0
    a = run_raw(priced, tmp_path, "a", driver="inprocess")
    b = run_raw(priced, tmp_path, "b", driver="processes")
    assert a["sale"] == b["sale"] and a["selection"] == b["selection"] and a["end_reason"] == b["end_reason"]


@pytest.mark.parametrize(
    "key, value",
    [
        ("summarize.spending_budget", -1.0),
        ("summarize.spending_budget", "lots"),
        ("lifetime.terms.price", -0.5),
        ("lifetime.terms.points", -1),
    ],
)
def test_bad_prices_and_budgets_are_refused_naming_the_key(priced, tmp_path, key, value):
    section, *rest = key.split(".")
    target = priced.setdefault(section, {})
    for part in rest[:-1]:
        target = target.setdefault(part, {})
    target[rest[-1]] = value
    with pytest.raises(ScenarioError, match=rest[-1]):
        parse_scenario(priced, source="priced", base_dir=tmp_path)


def test_the_terms_message_refuses_a_price_that_is_not_a_finite_number_at_least_zero():
    from marketplace.protocols.summarize.messages import Terms

    assert Terms(price=1.5, points=3).price == 1.5
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(msgspec.ValidationError):
            check_terms(bad)


def check_terms(price):
    """Decode a terms body carrying ``price`` against its kind's Struct, as the envelope decoder does."""
    from marketplace.protocols.summarize.messages import Terms

    return msgspec.msgpack.decode(msgspec.msgpack.encode({"price": price, "points": None}), type=Terms)


def test_owners_hand_over_no_point_twice_under_prices(priced, run_cache):
    report = run_cache.run(priced).report
    keys = [k for _, _, k in report["selection"]]
    assert len(keys) == len(set(keys))
    assert np.isfinite(report["sale"]["paid"])
