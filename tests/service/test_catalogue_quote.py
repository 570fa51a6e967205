"""The catalogue and the quote of a served marketplace, without a server (:mod:`marketplace.service.catalogue`,
:mod:`marketplace.service.quote`, :mod:`marketplace.service.answers`): what is shown, what is not,
the declared charges, the money, the declines, and the control messages that carry them."""

from __future__ import annotations

import copy
import json
import math

import msgspec
import pytest
import yaml

from marketplace import plugins
from marketplace.api import load
from marketplace.privacy.lifetime.cost import Charge
from marketplace.privacy.lifetime.terms import SaleTerms
from marketplace.scheduling.costs import declared_costs
from marketplace.service import control
from marketplace.service.answers import answer
from marketplace.service.asking import MaxPriceExceeded, check_max_price, within_max_price
from marketplace.service.catalogue import NOT_PUBLIC, MarketView, bounds_of, catalogue, owner_terms, posted_terms
from marketplace.service.quote import NOT_PRICED, privacy_prices, quote, quote_money
from marketplace.service.worlds import WorldCache

OWNERS = ["owner-1", "owner-2", "owner-3"]
MARKET = {
    "name": "summarize-market",
    "protocol": "summarize",
    "seed": 3,
    "parties": {"owners": 3},
    "data": {
        "source": {
            "kind": "covariate_shift",
            "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 200},
        },
        "partition": {"scheme": "by_group", "skew": 0.8},
        "consumer": {"target_groups": [0], "validation_size": 25, "test_size": 25},
        "seed_set": {"size": 0},
    },
    "summarize": {"rounds": 4, "features": 30, "baselines": []},
    "lifetime": {
        "ledgers": "ledgers",
        "budget": {"epsilon": 20.0, "delta": 0.01},
        "owner_budgets": {"owner-2": {"epsilon": 1.0, "delta": 0.01}},
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
WORLDS = WorldCache()


def view(present=("owner-1", "owner-2"), posted=None, admitted=None, market=MARKET) -> MarketView:
    return MarketView(load(market), OWNERS, frozenset(present), posted or {}, admitted or {}, "fcfs")


def test_the_catalogue_shows_the_schema_protocols_present_owners_and_their_posted_terms():
    cat = catalogue(view(posted={"owner-1": {"price": 7.5}}, admitted={"owner-1": {"eps": 2.0}}), plugins.protocols())
    assert cat["market"]["owners"] == 3 and cat["market"]["owners_present"] == 2
    assert cat["market"]["relation"] == "replace-one-distinct" and cat["market"]["filter"] == "basic"
    assert cat["schema"]["kind"] == "simulated" and cat["schema"]["data"]["source"]["kind"] == "covariate_shift"
    assert {"sketch", "summarize", "stc", "pfds"} <= set(cat["protocols"])
    sketch = cat["protocols"]["sketch"]
    assert sketch["bounds"]["mechanism"] == "one of 'laplace', 'gaussian'" and "samples" in sketch["bounds"]
    assert isinstance(sketch["settings"]["samples"], int)  # defaults, as plain values
    owners = {o["owner"]: o for o in cat["owners"]}
    assert set(owners) == {"owner-1", "owner-2"}  # owner-3 is not connected: not listed
    assert owners["owner-1"]["terms"] == {
        **owners["owner-1"]["terms"],
        "price": 7.5,
        "points": 5,
        "points_per_consumer": 3,
    }
    assert owners["owner-1"]["terms_from"] == "agent" and owners["owner-2"]["terms_from"] == "market"
    assert owners["owner-2"]["budget"] == {"epsilon": 1.0, "delta": 0.01}
    assert owners["owner-1"]["admitted"] == {"eps": 2.0} and owners["owner-2"]["admitted"] == {}
    assert cat["notes"]["not_public"] == NOT_PUBLIC
    for owner in cat["owners"]:  # nothing more of an owner: no row count, no ledger standing
        assert set(owner) == {"owner", "terms", "terms_from", "budget", "admitted"}


def test_an_agents_posted_fields_replace_only_those_of_the_marketplaces_terms():
    v = view(posted={"owner-3": {"points": 2}})
    assert owner_terms(v, "owner-3") == SaleTerms(price=5.0, points=2)
    assert owner_terms(v, "owner-1") == SaleTerms(price=2.0, points=5, points_per_consumer=3)
    assert posted_terms(control.OwnerTerms(price=1.5)) == {"price": 1.5}
    assert posted_terms(control.OwnerTerms()) == {}
    assert control.owner_terms_message({"price": 1.0, "points": 4, "not_a_field": 3}) == control.OwnerTerms(
        price=1.0, points=4
    )


def test_bounds_walk_nested_settings_and_stop_at_a_non_dataclass():
    assert bounds_of(int) == []
    keys = dict(bounds_of(plugins.protocols()["summarize"].config))
    assert "rounds" in keys and any(k.startswith("privacy.") for k in keys)


def test_the_quote_charges_what_the_ledgers_would_and_prices_the_points_of_the_owners_taking_part():
    v = view(posted={"owner-1": {"price": 7.5}})
    q = quote(v, yaml.safe_dump(REQUEST), "alice", WORLDS.get)
    assert isinstance(q, dict), q
    scenario = load({**MARKET, **REQUEST, "lifetime": MARKET["lifetime"]})
    life = scenario.config.lifetime
    declared = declared_costs(scenario.config, OWNERS, life.relation, life.filter, plugins.exchange("summarize"))
    for owner in OWNERS:  # the one place the admission and the ledgers read
        charge = {k: v for k, v in declared[owner][1]._asdict().items() if v is not None}
        assert q["owners"][owner]["privacy"]["charge"] == pytest.approx(charge)
    assert q["owners"]["owner-3"]["declines"].startswith("not connected")
    assert q["owners"]["owner-1"]["declines"] is None
    # owner-2's budget (eps 1) is under the charge (eps about 2): its ledger declines it on any record
    assert "over the owner's lifetime budget" in q["owners"]["owner-2"]["declines"]
    money = q["money"]
    assert money["per_owner"] == {"owner-1": 7.5 * 3}  # 4 rounds, capped by 3 per consumer; only owner-1 takes part
    assert money["at_most"] == 22.5 and money["spending_budget"] == 100.0 and q["reserved"] is False


def test_a_quote_of_a_request_that_cannot_run_says_why():
    v = view()
    bad = copy.deepcopy(REQUEST)
    bad["protocol"] = "no-such-protocol"
    assert "protocol" in quote(v, yaml.safe_dump(bad), "alice", WORLDS.get)
    assert "expected a scenario" in quote(v, "- just\n- a list\n", "alice", WORLDS.get)
    refused = answer(v, control.QuoteAsk(scenario=yaml.safe_dump(bad)), "alice", WORLDS.get)
    assert isinstance(refused, control.SessionRefused) and refused.reason.startswith("no quote:")


def test_a_question_that_breaks_is_refused_and_the_server_serves_on():
    def broken(scenario, exchange):
        raise RuntimeError("a secret path /home/x")

    refused = answer(view(), control.QuoteAsk(scenario=yaml.safe_dump(REQUEST)), "alice", broken)
    assert isinstance(refused, control.SessionRefused)
    assert refused.reason == "the marketplace could not answer: RuntimeError"


def test_sale_terms_that_sell_nothing_decline_and_a_quota_too():
    market = copy.deepcopy(MARKET)
    market["lifetime"]["owner_terms"] = {"owner-3": {"price": 5.0, "points": 0}}
    market["lifetime"]["consumer_quota"] = {"epsilon": 30.0, "delta": 0.01}
    q = quote(view(present=OWNERS, market=market), yaml.safe_dump(REQUEST), "alice", WORLDS.get)
    assert "sell no points" in q["owners"]["owner-3"]["declines"]
    market["lifetime"]["consumer_quota"] = {"epsilon": 0.5, "delta": 0.01}
    q = quote(view(present=OWNERS, market=market), yaml.safe_dump(REQUEST), "alice", WORLDS.get)
    assert "per-consumer quota" in q["owners"]["owner-1"]["declines"]


def test_quote_money():
    terms = {"a": SaleTerms(price=2.0, points=1), "b": SaleTerms(price=3.0), "c": None}
    money = quote_money({"a": 4, "b": 4, "c": 4}, terms)
    assert money["per_owner"] == {"a": 2.0, "b": 12.0} and money["at_most"] == 14.0
    assert quote_money({"a": 4, "b": 4}, terms, 10.0)["at_most"] == 10.0  # within the consumer's budget
    assert quote_money({"a": 4, "b": 4}, terms, taking_part=["b"])["per_owner"] == {"b": 12.0}
    free = quote_money({"a": None, "b": None}, terms)
    assert free["at_most"] == 0.0 and free["priced"] == NOT_PRICED
    sold = quote_money({"a": 4}, {"a": SaleTerms(price=2.0, points=0)})
    assert sold["at_most"] == 0.0  # never a negative price for terms that sell nothing


def test_quote_money_adds_each_owners_privacy_price_at_its_ledgers_price_function():
    terms = {"a": SaleTerms(price=2.0, price_per_eps=4.0), "b": SaleTerms(price_per_eps=10.0), "c": None}
    costs = {
        "a": (None, Charge(0.5, 0.0, None)),
        "b": (None, Charge(None, None, 0.125)),
        "c": (None, Charge(1, 0, None)),
    }
    prices = privacy_prices(costs, terms)
    assert prices == {"a": pytest.approx(2.0), "b": pytest.approx(5.0)}  # sqrt(2 * 0.125) = 0.5 eps under zcdp
    money = quote_money({"a": 3, "b": None, "c": None}, terms, 1.0, privacy_prices=prices)
    assert money["per_owner"] == {"a": pytest.approx(8.0), "b": pytest.approx(5.0)}
    # a spending budget bounds what is paid for points (1 of 6), never the privacy prices (2 + 5)
    assert money["at_most"] == pytest.approx(8.0) and money["privacy"] == prices
    assert money["priced"] == "per point and per unit eps of privacy loss"
    declined = quote_money({"a": None, "b": None}, terms, taking_part=["b"], privacy_prices=prices)
    assert declined["per_owner"] == {"b": pytest.approx(5.0)} and declined["priced"] == "per unit eps of privacy loss"


def test_the_catalogue_answer_and_its_messages_are_bounded():
    v = view()
    reply = answer(v, control.CatalogueAsk(), "alice", WORLDS.get)
    assert isinstance(reply, control.Catalogue)
    again = control.decode(control.encode(reply))
    assert json.loads(again.catalogue)["market"]["name"] == "summarize-market"
    for message in (control.CatalogueAsk(), control.QuoteAsk(scenario="x: 1"), control.OwnerTerms(price=2.0, points=3)):
        assert control.decode(control.encode(message)) == message
    too_big = msgspec.msgpack.encode({"kind": "catalogue", "catalogue": b"x" * (control.MAX_ANSWER + 1)})
    negative = msgspec.msgpack.encode({"kind": "owner_terms", "price": -1.0})
    empty_quote = msgspec.msgpack.encode({"kind": "quote_ask", "scenario": ""})
    for frame in (too_big, negative, empty_quote):
        with pytest.raises(control.ControlError):
            control.decode(frame)


def test_max_price_checks():
    assert check_max_price("2.5") == 2.5 and check_max_price(0) == 0.0
    for bad in ("-1", "nan", "inf", "x", None):
        with pytest.raises(ValueError, match="max_price: expected a finite number >= 0"):
            check_max_price(bad)
    within_max_price({"money": {"at_most": 3.0}}, 3.0)
    with pytest.raises(
        MaxPriceExceeded, match=r"^max_price: expected a request quoted at most 2, got a quote of 3"
    ) as e:
        within_max_price({"money": {"at_most": 3.0, "priced": "per point"}}, 2.0)
    assert e.value.named("--max-price").startswith("--max-price: expected a request quoted at most 2, got a quote of 3")
    assert (e.value.limit, e.value.quoted) == (2.0, 3.0)
    with pytest.raises(MaxPriceExceeded, match="no price"):
        within_max_price({"money": {"at_most": math.nan}}, 2.0)
