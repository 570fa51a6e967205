"""Privacy prices in a market: every sketch release pays each owner its ``price_per_eps`` times the eps
its ledger charged, on the ledger's sales table and in the market report; a declined owner earns
nothing; a request priced over its consumer's spending budget is refused before anything is reserved."""

from __future__ import annotations

import math

import pytest
from market_files import market, sketch_request

from marketplace.market import play
from marketplace.market.spec import MarketError, read_market
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file


def ledger_of(folder, owner):
    return LifetimeLedger.read(ledger_file(folder / "fcfs" / "ledgers", owner))


def test_each_owner_earns_its_price_per_eps_times_the_eps_its_ledger_charged(tmp_path):
    raw = market(
        [sketch_request("alice", 0.3), sketch_request("bob", 0.2)],
        owners=3,
        budget=1.0,
        rules=["fcfs"],
        terms={"price_per_eps": 10.0},
        owner_terms={"owner-3": {"price_per_eps": 4.0}},
        owner_budgets={"owner-2": {"epsilon": 0.25}},  # declines alice's 0.3, serves bob's 0.2
    )
    report = play(raw, tmp_path / "m", driver="inprocess")
    section = report.play("fcfs")
    rows = section["requests"]
    assert [r["status"] for r in rows] == ["partial", "served"]
    assert rows[0]["declined"] == ["owner-2"]
    per_eps = {"owner-1": 10.0, "owner-2": 10.0, "owner-3": 4.0}
    for owner in per_eps:
        with ledger_of(tmp_path / "m", owner) as ledger:
            charged = {r.request_id: r for r in ledger.history()}
            sales = {s.request_id: s for s in ledger.sales()}
        for request_id, sale in sales.items():
            row = charged[request_id]
            if row.state == "committed":
                assert sale.state == "committed" and sale.reserved == 0 and sale.sold == 0
                assert sale.earnings == pytest.approx(per_eps[owner] * row.charged.eps)
                assert sale.privacy_price == pytest.approx(per_eps[owner] * row.charged.eps)
            else:  # declined: nothing charged, nothing earned
                assert row.state == "declined" and sale.state == "declined"
                assert sale.privacy_price == 0.0 and not sale.earnings
        earned = math.fsum(s.earnings or 0.0 for s in sales.values())
        assert section["owners"][owner]["earnings"] == pytest.approx(earned)
    # the declined owner earned only for bob's request
    assert rows[0]["sale"]["earned"] == pytest.approx({"owner-1": 3.0, "owner-3": 1.2})
    assert rows[1]["sale"]["earned"] == pytest.approx({"owner-1": 2.0, "owner-2": 2.0, "owner-3": 0.8})
    assert rows[0]["sale"]["paid"] == pytest.approx(4.2) and rows[0]["sale"]["privacy_paid"] == pytest.approx(4.2)
    assert section["consumers"]["bob"]["paid"] == pytest.approx(4.8)
    assert section["summary"]["paid"] == pytest.approx(9.0)


def test_a_request_priced_over_its_spending_budget_is_refused_before_anything_is_reserved(tmp_path):
    raw = market(
        [sketch_request("alice", 0.3, spending_budget=5.0), sketch_request("bob", 0.3, spending_budget=6.0)],
        owners=2,
        budget=1.0,
        rules=["fcfs"],
        terms={"price_per_eps": 10.0},  # 3.0 per owner, 6.0 a request
    )
    report = play(raw, tmp_path / "m", driver="inprocess")
    rows = report.play("fcfs")["requests"]
    assert [r["status"] for r in rows] == ["refused", "served"]
    assert "spending budget lifetime.spending_budget=5" in rows[0]["reason"]
    assert "costs 6 in privacy prices" in rows[0]["reason"]
    assert rows[0]["sale"]["paid"] == 0.0 and rows[1]["sale"]["paid"] == pytest.approx(6.0)
    for owner in ("owner-1", "owner-2"):
        with ledger_of(tmp_path / "m", owner) as ledger:
            assert [r.request_id for r in ledger.history()] == ["req-0002"]  # nothing of req-0001
    assert report.play("fcfs")["summary"]["refused"] == 1


@pytest.mark.parametrize(
    "where, terms, words",
    [
        ("terms", {"price_per_eps": -1}, "market.terms.price_per_eps: expected a number >= 0, got -1"),
        ("terms", {"price_per_eps": math.inf}, "market.terms.price_per_eps: expected a number >= 0, got inf"),
        ("owner_terms", {"owner-1": {"price_per_eps": math.nan}}, "market.owner_terms.owner-1.price_per_eps"),
    ],
)
def test_a_bad_privacy_price_names_the_field_what_it_expects_and_what_came(where, terms, words):
    raw = market([sketch_request("alice", 0.3)], **{where: terms})
    with pytest.raises(MarketError, match=words.replace(".", r"\.")):
        read_market(raw)


def test_a_bad_spending_budget_is_refused_naming_the_request():
    raw = market([sketch_request("alice", 0.3, spending_budget=-2)])
    with pytest.raises(MarketError, match=r"requests\[0\]\.spending_budget: expected a number >= 0, got -2"):
        read_market(raw)
