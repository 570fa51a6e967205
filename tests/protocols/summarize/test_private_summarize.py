"""Private summarize end to end: ledgers in the report, budgets refused before start, huge eps
behaves like the non-private protocol, the same seed gives the same run with either driver."""

from __future__ import annotations

import copy

import pytest

from marketplace import plugins
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import private_tiny_raw, run_raw


@pytest.fixture
def private_scenario():
    return private_tiny_raw()


def test_a_private_run_reports_a_ledger_per_protected_dataset(private_scenario, run_cache):
    private_scenario["summarize"]["privacy"]["release"] = "mwem_paper"  # MWEM: counts per iteration
    report = run_cache.run(private_scenario).report
    assert report["status"] == "completed"
    privacy = report["privacy"]
    assert set(privacy) == {"consumer:D_v", "D_s", "auction"}
    assert sum(s["count"] for s in privacy["consumer:D_v"]["steps"]) == 200 * 2  # T_init x (select + measure)
    # round 1's release is on the public seed set alone: only the 7 later rounds are charged
    assert sum(s["count"] for s in privacy["D_s"]["steps"]) == 7 * 5 * 2
    assert sum(s["count"] for s in privacy["auction"]["steps"]) == 8
    assert 0 < privacy["consumer:D_v"]["eps"] and privacy["consumer:D_v"]["delta"] <= 0.01
    m = report["metrics"]
    greedy = m["baselines"]["non_private_greedy"]  # like with like: both with the seed set, both alone
    assert m["mmd2_with_seed_set_increase_over_greedy_pct"] == pytest.approx(
        100 * (m["mmd2_with_seed_set"] / greedy["mmd2_with_seed_set"] - 1), rel=1e-12
    )
    assert m["mmd2_alone_increase_over_greedy_pct"] == pytest.approx(100 * (m["mmd2"] / greedy["mmd2"] - 1), rel=1e-12)
    assert "mmd2_increase_over_greedy_pct" not in m  # the old name did not say which MMD^2 it compared


def test_a_private_run_is_reproducible_from_its_seed(private_scenario, tmp_path, run_cache):
    a, b = run_cache.run(private_scenario).report, run_raw(private_scenario, tmp_path, "b")  # two runs all the same
    assert a["selection"] == b["selection"] and a["metrics"] == b["metrics"]


@pytest.mark.slow
def test_a_private_run_gives_the_same_report_with_either_driver(private_scenario, tmp_path, run_cache):
    inprocess = run_cache.run(private_scenario).report
    processes = run_raw(private_scenario, tmp_path, "proc", driver="processes")
    assert processes["status"] == "completed", processes["failures"]
    for key in ("selection", "metrics", "value", "parsimony", "privacy"):
        assert processes[key] == inprocess[key], key


def test_with_huge_eps_the_private_run_selects_what_the_non_private_one_does(private_scenario, tmp_path):
    huge = copy.deepcopy(private_scenario)
    huge["summarize"]["privacy"].update(
        eps_validation=1e6,
        eps_first_round=1e6,
        eps_later_rounds=1e6,
        eps_auction=50.0,
        tau=1000,
        t_init=3000,
        t_sub=400,
    )
    private = run_raw(huge, tmp_path, "private")
    plain = copy.deepcopy(huge)
    plain["summarize"]["privacy"] = {"enabled": False}
    public = run_raw(plain, tmp_path, "public")
    same = len(set(map(tuple, private["selection"])) & set(map(tuple, public["selection"])))
    # h2 keeps its quantization noise at any eps, so "nearly": most picks shared, quality within 10%
    assert same >= 4, (private["selection"], public["selection"])
    assert private["metrics"]["mmd2"] == pytest.approx(public["metrics"]["mmd2"], rel=0.10)
    assert private["parsimony"]["rho"] == pytest.approx(1.0)  # eps_auc huge: only rank 1 is asked


def test_owners_learn_only_whether_they_were_asked(private_scenario, run_cache):
    report = run_cache.run(private_scenario).report
    for party, details in report["party_details"].items():
        if party.startswith("owner-"):
            assert details["result"]["rounds_seen"] == 8
    kinds_to_owners = {k for k in report["messages"]["by_kind"]} - {
        "hello",
        "validation_set",
        "bid",
        "point",
        "summary",
        "bye",
    }
    assert kinds_to_owners == {"target_embedding", "round_open", "request", "shutdown"}


def test_a_budget_smaller_than_the_plan_is_refused_before_anything_starts(private_scenario, tmp_path):
    private_scenario["summarize"]["privacy"]["budget_validation"] = 0.05
    with pytest.raises(ScenarioError, match="summarize.privacy.budget_validation") as err:
        parse_scenario(private_scenario, source="private", base_dir=tmp_path)
    assert "planned total" in str(err.value)


def test_the_plan_checked_before_start_is_what_the_run_spends(private_scenario, tmp_path, run_cache):
    from marketplace.protocols.summarize.private_curator import PrivateSchedule

    config = parse_scenario(private_scenario, source="private", base_dir=tmp_path).config
    schedule = PrivateSchedule.resolve(
        config.summarize.privacy, features=config.summarize.features, rounds=config.summarize.rounds
    )
    planned = schedule.ledgers()
    schedule.plan(
        planned, config.summarize.rounds, seed_set_size=config.data.seed_set.size, owners=config.parties.owners
    )
    report = run_cache.run(private_scenario).report
    for name, ledger in planned.items():
        assert report["privacy"][name]["eps"] == pytest.approx(ledger.to_dict()["eps"], rel=1e-12), name


def test_a_lying_owner_is_caught_in_the_private_auction(private_scenario, tmp_path):
    from test_roles import CheatingOwner

    from marketplace.parties import build_role, make_world, party_ids
    from marketplace.transport.inprocess import run_inprocess
    from marketplace.transport.node import Node

    config = parse_scenario(private_scenario, source="private", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    honest = roles[1]
    roles[1] = CheatingOwner(
        party_id="owner-1", scenario_name=config.name, data=honest.data, features=roles[0].features
    )
    roles[1].join(honest.identity)
    run_inprocess([Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles])
    curator = roles[0]
    asked_owner_1 = roles[1].result()["points_sent"] > 0
    assert asked_owner_1  # eps_auc = 0.5 and tau = 3 over 8 rounds: owner-1 is asked at some point
    assert "owner-1" in curator.flagged and all(o != "owner-1" for o, *_ in curator.selection)


def test_the_private_summary_has_no_duplicate_and_owners_never_resend(private_scenario, tmp_path):
    private_scenario["summarize"]["rounds"] = 20
    private_scenario["summarize"]["privacy"].update(eps_auction=0.05, tau=2)  # many requests: a big pool
    report = run_raw(private_scenario, tmp_path)
    selection = [tuple(s) for s in report["selection"]]
    assert len(selection) == len(set(selection)) == 20
    for party, details in report["party_details"].items():
        if party.startswith("owner-"):
            sent = details["simulator_view"]["result"]["sent_rows"]  # a simulation: the runner saw every owner's
            assert len(sent) == len(set(sent))
    assert report["parsimony"]["points_seen"] > 20 + report["parsimony"]["validation_size"]  # the pool kept extras
