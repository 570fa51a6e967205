"""`summarize` traded in a marketplace that stays open: owners sell points under their terms (the
marketplace's, or an agent's own `--price`), each request's consumer pays from its spending budget,
and every owner's ledger records its DP charges, the points it sold and what it earned."""

from __future__ import annotations

import json
import time

import pytest
import yaml
from test_serve import MARKET, Market, cli, free_port, report

from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.reporting.absent import NOT_ASKED, REFERENCES_ABSENT

pytestmark = pytest.mark.slow

SUMMARIZE_MARKET = {
    **MARKET,
    "name": "summarize-market",
    "protocol": "summarize",
    "summarize": {"rounds": 4, "features": 30, "baselines": []},
    "lifetime": {
        "ledgers": "ledgers",
        "budget": {"epsilon": 20.0, "delta": 0.01},
        "relation": "replace-one-distinct",
        "terms": {"price": 2.0, "points": 5, "points_per_consumer": 3},
        "owner_terms": {"owner-3": {"price": 5.0}},
    },
}
REQUEST = {
    "name": "buy-points",
    "protocol": "summarize",
    "data": {"consumer": {"target_groups": [1], "validation_size": 25, "test_size": 25}},
    "summarize": {
        "rounds": 4,
        "features": 30,
        "baselines": [],
        "spending_budget": 100.0,
        "privacy": {"enabled": True, "t_init": 100, "eps_auction": 0.5, "tau": 3},
    },
}


def start(tmp_path) -> Market:
    return Market(tmp_path, consumers="alice,bob", market=SUMMARIZE_MARKET, request=REQUEST)


def sales_of(folder, owner):
    with LifetimeLedger.read(ledger_file(folder, owner)) as ledger:
        return ledger.sales(), ledger.history()


def test_a_served_summarize_request_pays_each_owner_and_every_ledger_says_so(tmp_path):
    market = start(tmp_path)
    try:
        reports = []
        for n, consumer in enumerate(("alice", "alice", "bob")):
            proc = market.request(consumer, f"out-{n}")
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, (consumer, out, err)
            reports.append(report(tmp_path / f"out-{n}"))
    finally:
        status, err = market.stop()
        assert status == 0, err
    ledgers = market.state / "owners"
    sold_by_owner: dict[str, int] = {}
    for r in reports:
        assert r["status"] == "completed", r.get("failures")
        sale = r["sale"]
        assert sale["paid"] <= 100.0 and sale["prices"]  # the owners that sold in this session posted terms
        assert all(price == (5.0 if owner == "owner-3" else 2.0) for owner, price in sale["prices"].items())
        for owner, record in r["lifetime"]["owners"].items():
            if record["state"] != "committed":
                continue
            assert record["relation"].startswith("replace-one keeping")
            assert record["sale"]["sold"] == sale["bought"].get(owner, 0)
            assert record["sale"]["earnings"] == pytest.approx(record["sale"]["sold"] * sale["prices"][owner])
            sold_by_owner[owner] = sold_by_owner.get(owner, 0) + record["sale"]["sold"]
    for owner, sold in sold_by_owner.items():
        sales, history = sales_of(ledgers, owner)
        committed = [s for s in sales if s.state == "committed"]
        assert sum(s.sold for s in committed) == sold
        assert sum(s.earnings for s in committed) == pytest.approx(sold * (5.0 if owner == "owner-3" else 2.0))
        assert all(s.sold <= s.reserved for s in committed)
        assert {h.request_id for h in history if h.state == "committed"} == {s.request_id for s in committed}
        by_consumer: dict[str, int] = {}
        for s in committed:
            by_consumer[s.consumer] = by_consumer.get(s.consumer, 0) + s.sold
        if owner != "owner-3":  # its own terms set no caps
            assert sum(by_consumer.values()) <= 5 and all(v <= 3 for v in by_consumer.values())


def test_an_agents_own_price_wins_over_the_marketplaces(tmp_path):
    import marketplace

    market_file = tmp_path / "market.yaml"
    market_file.write_text(yaml.safe_dump(SUMMARIZE_MARKET))
    (tmp_path / "request.yaml").write_text(yaml.safe_dump(REQUEST))
    with marketplace.serve(
        market_file,
        tmp_path / "state",
        endpoint=f"tcp://127.0.0.1:{free_port()}",
        consumers=["alice"],
        start_owners=False,
        session_port=free_port(),
    ) as served:
        agent = cli(
            "agent",
            "--market",
            served.endpoint,
            "--keys",
            str(tmp_path / "state" / "owners"),
            "--ids",
            "owner-1..owner-3",
            "--price",
            "7.5",
            "--work",
            str(tmp_path / "agent"),
        )
        try:
            deadline = time.monotonic() + 120  # its pings make the three owners present
            while json.loads((tmp_path / "state" / "server.json").read_text())["owners_present"] < 3:
                assert time.monotonic() < deadline and agent.poll() is None, "the agent's owners never came"
                time.sleep(0.05)
            result = marketplace.request(
                tmp_path / "request.yaml",
                market=served.endpoint,
                keys=tmp_path / "state" / "consumers" / "alice",
                out=tmp_path / "out",
            )
            asked = marketplace.request(
                tmp_path / "request.yaml",
                market=served.endpoint,
                keys=tmp_path / "state" / "consumers" / "alice",
                out=tmp_path / "out-asked",
                references=True,
            )
        finally:
            served.stop()
            out, err = agent.communicate(timeout=60)
            assert agent.returncode == 0, err
    assert result.status == "completed"
    assert set(result.raw["sale"]["prices"].values()) == {7.5}
    assert result.raw["sale"]["paid"] == pytest.approx(7.5 * result.raw["sale"]["points_bought"])
    # a served simulation computes no central references unless the request asks, and says which it lacks
    absent = result.raw[REFERENCES_ABSENT]
    assert absent["metrics.baselines"] == absent["history.mmd2"] == NOT_ASKED
    assert result.raw["metrics"]["baselines"] == {"absent": NOT_ASKED}
    assert (
        json.loads((tmp_path / "state" / "sessions" / result.raw["run_id"] / "report.json").read_text())[
            REFERENCES_ABSENT
        ]
        == absent
    )  # the server's copy says the same
    assert asked.status == "completed" and REFERENCES_ABSENT not in asked.raw
    assert "non_private_greedy" in asked.raw["metrics"]["baselines"]
    assert all(row["mmd2"] is not None for row in asked.raw["history"]["rounds"])


def test_an_agent_refuses_bad_terms_naming_them(tmp_path):
    proc = cli("agent", "--market", "tcp://127.0.0.1:9", "--keys", str(tmp_path), "--ids", "owner-1", "--price", "-3")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "price" in err, err


def test_an_agents_price_alone_keeps_the_marketplaces_limits_on_points(tmp_path):
    """`agent --price P` alone changes the price and keeps the marketplace's limits (lifetime and per
    consumer); each option given replaces its own field only, and a bad one is refused naming it."""
    from marketplace.service import control
    from marketplace.service.agent import OwnerAgent
    from marketplace.service.options import AgentOptions

    def terms_under(given: dict) -> dict:
        agent = OwnerAgent(
            AgentOptions("tcp://127.0.0.1:9", tmp_path, ["owner-1", "owner-3"], work=tmp_path / "w", **given)
        )
        invite = control.SessionInvite(session="s0001-test", scenario=yaml.safe_dump(SUMMARIZE_MARKET))
        lifetime = agent._scenario(invite).config.lifetime
        return {o: lifetime.terms_of(o).to_dict() for o in ("owner-1", "owner-2", "owner-3")}

    def without_privacy_price(terms: dict) -> dict:  # the points fields; price_per_eps is asserted below
        return {k: v for k, v in terms.items() if k != "price_per_eps"}

    assert {o: without_privacy_price(t) for o, t in terms_under({"price": 7.5}).items()} == {
        "owner-1": {"price": 7.5, "points": 5, "points_per_consumer": 3},  # the marketplace's limits
        "owner-2": {"price": 2.0, "points": 5, "points_per_consumer": 3},  # not hosted here: the marketplace's
        "owner-3": {"price": 7.5, "points": None, "points_per_consumer": None},  # its own terms set no limits
    }
    assert without_privacy_price(terms_under({"points_per_consumer": 1})["owner-1"]) == {
        "price": 2.0,
        "points": 5,
        "points_per_consumer": 1,
    }
    assert terms_under({})["owner-1"] == {"price": 2.0, "points": 5, "points_per_consumer": 3, "price_per_eps": 0.0}
    # --price-per-eps sets the privacy price of the hosted owners only, and keeps everything else
    assert terms_under({"price_per_eps": 6.0})["owner-1"] == {
        "price": 2.0,
        "points": 5,
        "points_per_consumer": 3,
        "price_per_eps": 6.0,
    }
    assert terms_under({"price_per_eps": 6.0})["owner-2"]["price_per_eps"] == 0.0
    with pytest.raises(ValueError, match=r"sale terms \(--price, --points, --points-per-consumer, --price-per-eps\)"):
        terms_under({"points": -1})
    with pytest.raises(ValueError, match=r"'price_per_eps' parameter of SaleTerms.from_dict must be a finite number"):
        terms_under({"price_per_eps": float("inf")})
