"""Reading a market file: the stream it describes, and clear errors naming the key path."""

from __future__ import annotations

import pytest
from market_files import HAND_STREAM, market, sketch_request

from marketplace.market.spec import MarketError, parse_market, read_market


def _error(raw) -> str:
    with pytest.raises(MarketError) as caught:
        parse_market(raw, source="m.yaml")
    return str(caught.value)


def test_requests_are_numbered_in_arrival_order_with_repeats_expanded():
    raw = market([sketch_request("late", 0.1, arrival=5), sketch_request("early", 0.2, arrival=1, every=2, repeat=3)])
    spec = parse_market(raw)
    assert [(r.id, r.consumer, r.arrival) for r in spec.requests] == [
        ("req-0001", "early", 1.0),
        ("req-0002", "early", 3.0),
        ("req-0003", "late", 5.0),
        ("req-0004", "early", 5.0),
    ]
    assert spec.unlock_steps == 4 and spec.rules == ("fcfs", "dpf")


def test_a_request_without_arrival_keeps_its_place_in_the_list():
    spec = parse_market(market([sketch_request("x", 0.1, arrival=2), sketch_request("y", 0.1)]))
    assert [(r.consumer, r.arrival) for r in spec.requests] == [("x", 2.0), ("y", 2.0)]


def test_every_request_scenario_shares_the_owners_data_and_sets_its_own_section():
    spec = parse_market(market(HAND_STREAM, owners=3))
    first, second = (spec.scenario(r) for r in spec.requests[:2])
    assert first.config.data == second.config.data and first.config.seed == second.config.seed == 5
    assert first.config.sketch.epsilon == 0.6 and second.config.sketch.epsilon == 0.3
    assert first.config.parties.owners == 3


def test_a_bad_rule_is_named_with_its_position():
    message = _error(market(HAND_STREAM, rules=["fcfs", "lottery"]))
    assert "m.yaml: market.rules[1]: expected one of fcfs, dpf, got 'lottery'" in message


def test_missing_owners_and_missing_requests_are_named():
    raw = market(HAND_STREAM)
    del raw["market"]["owners"]
    assert "market.owners: missing" in _error(raw)
    raw = market(HAND_STREAM)
    del raw["requests"]
    assert "m.yaml: requests: missing" in _error(raw)
    assert "requests: expected a non-empty list of requests, got a list of 0 items" in _error(market([]))


def test_a_request_with_an_unknown_protocol_is_named_with_its_key_path():
    message = _error(market([sketch_request("a", 0.1), {"consumer": "b", "protocol": "auction"}]))
    assert "m.yaml: requests[1].protocol: expected one of" in message and "got 'auction'" in message


def test_a_request_without_a_consumer_is_named():
    assert "requests[0].consumer: missing" in _error(market([{"protocol": "sketch"}]))


def test_a_summarize_request_is_refused_since_its_owners_release_points_in_the_clear():
    message = _error(market([{"consumer": "a", "protocol": "summarize"}]))
    assert "requests[0].protocol:" in message and "no finite privacy cost" in message


def test_a_bad_value_in_a_request_section_is_named_under_the_request():
    message = _error(market([sketch_request("a", 0.1), sketch_request("b", -1.0)]))
    assert "m.yaml: requests[1].sketch.epsilon:" in message


def test_a_request_key_of_another_protocol_is_refused():
    message = _error(market([{**sketch_request("a", 0.1), "stc": {"k": 3}}]))
    assert "requests[0].stc: no such request key" in message


def test_a_request_may_set_only_the_consumer_part_of_the_data():
    message = _error(market([{**sketch_request("a", 0.1), "data": {"partition": {"skew": 0.1}}}]))
    assert "requests[0].data.partition: no such key; expected one of consumer" in message


def test_keys_the_market_sets_are_refused_in_the_base_scenario():
    raw = market(HAND_STREAM)
    raw["scenario"]["noise"] = {"source": "seed"}
    assert "m.yaml: scenario.noise: the market sets this" in _error(raw)
    raw = market(HAND_STREAM)
    raw["scenario"]["parties"] = {"owners": 4}
    assert "scenario.parties.owners: set the number of owners with market.owners" in _error(raw)


def test_a_budget_for_an_owner_the_market_does_not_have_is_refused():
    message = _error(market(HAND_STREAM, owner_budgets={"owner-9": {"epsilon": 0.5}}))
    assert "market.owner_budgets.owner-9: no such owner; expected one of owner-1 ... owner-2" in message


def test_an_owner_budget_keeps_the_market_delta_unless_it_gives_its_own():
    spec = parse_market(market(HAND_STREAM, budget=1.0, owner_budgets={"owner-2": {"epsilon": 0.5}}))
    assert spec.budget_of("owner-1").epsilon == 1.0 and spec.budget_of("owner-2").epsilon == 0.5
    assert spec.budget_of("owner-2").delta == 0.0


def test_an_unknown_top_level_key_names_the_valid_ones():
    raw = {**market(HAND_STREAM), "consumers": []}
    assert "m.yaml: consumers: no such key; expected one of market, scenario, requests" in _error(raw)


def test_the_shipped_market_reads_and_has_a_small_budget_owner():
    from conftest import ROOT

    spec = read_market(ROOT / "scenarios" / "market.yaml")
    assert len(spec.requests) >= 20 and spec.owners == 16 and set(spec.rules) == {"fcfs", "dpf"}
    assert any(b.epsilon < spec.budget.epsilon for b in spec.owner_budgets.values())
    assert {r.protocol for r in spec.requests} == {"sketch", "stc", "pfds"}


def test_a_request_whose_data_cannot_be_built_is_refused_before_the_stream_starts():
    from marketplace.market.spec import check_worlds

    raw = market(
        [sketch_request("a", 0.1), {**sketch_request("b", 0.1), "data": {"consumer": {"validation_size": 5000}}}]
    )
    with pytest.raises(MarketError) as caught:
        check_worlds(parse_market(raw, source="m.yaml"))
    assert "m.yaml: requests[1]" in str(caught.value) and "validation_size" in str(caught.value)


def test_a_quality_figure_the_protocol_does_not_report_is_refused_with_the_ones_it_does():
    message = _error(market(HAND_STREAM, quality={"sketch": "accuracy"}))
    assert "m.yaml: market.quality.sketch: expected one of" in message and "moment1_mre" in message
    assert parse_market(market(HAND_STREAM, quality={"sketch": "cdf_mae"})).quality == {"sketch": "cdf_mae"}


def test_a_cost_declared_under_replace_one_is_refused_for_add_remove_one_ledgers(monkeypatch):
    import types

    import marketplace.scheduling.costs as costs
    from marketplace.privacy.lifetime import Cost, Declared

    # a protocol declaring its owners' cost under replace-one (as pfds does with neighbours: replace)
    protocol = types.SimpleNamespace(owner_cost=lambda config, party: Declared("x", Cost.pure(0.1), "replace-one"))
    config = types.SimpleNamespace(protocol="mine")
    with pytest.raises(costs.NoOwnerCost, match="declared under 'replace-one'.*set market.relation to 'replace-one'"):
        costs.owner_cost(config, "owner-1", "add/remove-one", protocol)
    assert costs.owner_cost(config, "owner-1", "replace-one", protocol) == Cost.pure(0.1)


def test_ledgers_kept_under_replace_one_are_charged_a_restated_cost():
    from marketplace.market.player import demands

    spec = parse_market(market([sketch_request("a", 0.2)], relation="replace-one"))
    assert demands(spec)["req-0001"].charges["owner-1"] == {"eps": pytest.approx(0.4), "delta": 0.0}


def test_a_market_states_its_budgets_under_replace_one_distinct_by_name():
    from marketplace.market.player import demands

    spec = parse_market(market([sketch_request("a", 0.2)], relation="replace-one-distinct"))
    assert spec.relation == "replace-one-distinct"
    assert spec.lifetime(spec.requests[0], None)["relation"] == "replace-one-distinct"
    assert demands(spec)["req-0001"].charges["owner-1"] == {"eps": pytest.approx(0.4), "delta": 0.0}
