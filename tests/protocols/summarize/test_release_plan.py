"""summarize's release plan (marketplace.protocols.summarize.plan): every release of an owner's data
and of the consumer's D_v declared once, from PrivateSchedule; the curator records exactly the plan's
steps, the lifetime charge is the plan's declaration, the budgets are checked against it."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import ROOT

import marketplace
from marketplace import plugins
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.privacy.neighbouring import REPLACE_ONE_DISTINCT
from marketplace.privacy.plan import PlanExceeded
from marketplace.protocols.summarize.exchange import release_plan
from marketplace.protocols.summarize.plan import LedgerRelease
from marketplace.protocols.summarize.private_curator import (
    AUCTION,
    AUCTION_MECHANISM,
    GAUSSIAN_MECHANISM,
    SUMMARY,
    VALIDATION,
    PrivateSchedule,
)
from marketplace.runner.run import run_scenario
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import config_of


def private(tiny_scenario, **privacy):
    raw = copy.deepcopy(tiny_scenario)
    raw["summarize"].update(
        rounds=6,
        features=30,
        privacy={"enabled": True, "t_init": 60, "t_sub": 3, "eps_auction": 0.5, "tau": 3, **privacy},
    )
    return raw


def test_an_owners_plan_lists_the_auctions_selections_and_the_g_l_releases(tiny_scenario, tmp_path):
    config = config_of(private(tiny_scenario), tmp_path, "plan")
    plan = release_plan(config, "owner-2")
    assert plan.party == "owner-2" and plan.relation == REPLACE_ONE_DISTINCT and plan.min_eps == 1e-12
    assert [a.name for a in plan.accounts] == [AUCTION, SUMMARY]
    assert plan.account(SUMMARY).budget_keys == ("summarize.privacy.budget_summary",)
    assert [(r.name, r.account, r.count) for r in plan.releases] == [
        (AUCTION_MECHANISM["composed"], AUCTION, 6),
        (GAUSSIAN_MECHANISM, SUMMARY, 5),  # round 1's release is of the public seed set
    ]
    assert plan.release(AUCTION_MECHANISM["composed"]).eps == 0.5
    assert plan.release(GAUSSIAN_MECHANISM).gaussian and plan.release(GAUSSIAN_MECHANISM).norm == "L2"
    assert plan.not_covered.startswith("the points sold (in the clear)")
    consumer = release_plan(config, "consumer")
    assert [a.name for a in consumer.accounts] == [VALIDATION] and consumer.relation == "replace-one"
    assert consumer.account(VALIDATION).budget_keys == ("summarize.privacy.budget_validation",)
    assert [(r.name, r.count) for r in consumer.releases] == [(GAUSSIAN_MECHANISM, 1)]


def test_mwem_releases_are_declared_per_step_and_the_first_of_an_empty_seed_set_apart(tiny_scenario, tmp_path):
    raw = private(tiny_scenario, release="mwem_last")
    raw["data"]["seed_set"]["size"] = 0
    config = config_of(raw, tmp_path, "plan")
    plan = release_plan(config, "owner-1")
    d_s = [r for r in plan.releases if r.account == SUMMARY]
    assert [(r.step().mechanism, r.count) for r in d_s] == [
        ("h2.select", 60),  # round 2's first private release: T_init at eps_first_round
        ("h2.measure", 60),
        ("h2.select", 4 * 3),  # rounds 3..6: T_sub each
        ("h2.measure", 4 * 3),
    ]
    assert all(isinstance(r, LedgerRelease) for r in d_s[:2]) and d_s[0].eps == 0.05 / 2
    consumer = release_plan(config, "consumer")
    assert [(r.name, r.eps, r.count) for r in consumer.releases] == [
        ("h2.select", 0.01 / 2, 60),
        ("h2.measure", 0.01 / 2, 60),
    ]


def test_the_non_private_form_and_the_auctions_that_do_not_compose_declare_no_finite_cost(tiny_scenario, tmp_path):
    config = config_of(copy.deepcopy(tiny_scenario), tmp_path, "plan")
    assert release_plan(config, "owner-1").declared().cost is None
    assert release_plan(config, "consumer").declared().cost is None
    config = config_of(private(tiny_scenario, auction="paper"), tmp_path, "plan")
    plan = release_plan(config, "owner-1")
    assert plan.declared().cost is None and "the paper's auction" in plan.unbounded
    assert plan.release(AUCTION_MECHANISM["paper"]).delta > 0  # still what the curator records
    assert release_plan(config, "consumer").declared().cost is not None


@pytest.mark.parametrize("release", ["gaussian", "mwem_call_average"])
@pytest.mark.parametrize("seed_set", [4, 0])
def test_a_private_run_records_exactly_the_plans_steps(tiny_scenario, tmp_path, release, seed_set):
    raw = private(tiny_scenario, release=release)
    raw["data"]["seed_set"]["size"] = seed_set
    scenario = parse_scenario(raw, source="plan", base_dir=tmp_path)
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")  # the ledgers, not the transport
    assert report["status"] == "completed"
    config = scenario.config
    owner, consumer = release_plan(config, "owner-1"), release_plan(config, "consumer")
    for plan, account in ((owner, AUCTION), (owner, SUMMARY), (consumer, VALIDATION)):
        recorded = report["privacy"][account]["steps"]
        planned = [step.to_dict() for step in plan.steps(account)]
        assert [s["mechanism"] for s in recorded] == [s["mechanism"] for s in planned], account
        for got, want in zip(recorded, planned):
            assert {k: v for k, v in got.items() if k != "count"} == {k: v for k, v in want.items() if k != "count"}
            assert 0 < got["count"] <= want["count"], account
    # every round ranked somebody: the auction ran its R rounds, as planned
    assert report["privacy"][AUCTION]["steps"][0]["count"] == 6


def test_the_lifetime_charge_is_the_plans_declaration(tmp_path):
    scenario = marketplace.load(
        ROOT / "scenarios" / "quickstart-private.yaml",
        {
            "lifetime.ledgers": str(tmp_path / "ledgers"),
            "lifetime.relation": "replace-one-distinct",
            "lifetime.budget.epsilon": 50.0,
            "lifetime.budget.delta": 0.01,
            "summarize.rounds": 3,
            "summarize.features": 30,
            "summarize.privacy.t_init": 100,
        },
    )
    config = scenario.config
    exchange = plugins.exchange("summarize")
    declared = release_plan(config, "owner-1").declared()
    assert exchange.owner_cost(config, "owner-1") == declared
    assert exchange.consumer_cost(config) == release_plan(config, "consumer").declared()
    assert declared.what.endswith(
        "; not covered: the points sold (in the clear), what the choice of a sold point (its best remaining by "
        "the bid) reveals of its unsold points, and which points enter D_s"
    )
    marketplace.run(scenario, tmp_path / "s", driver="inprocess")
    report = json.loads((tmp_path / "s" / "report.json").read_text())
    for owner, record in report["lifetime"]["owners"].items():
        assert record["state"] == "committed"
        assert record["cost"]["eps"] == pytest.approx(release_plan(config, owner).declared().cost.eps, rel=1e-12)
        with LifetimeLedger.read(ledger_file(tmp_path / "ledgers", owner)) as ledger:
            assert ledger.sales()  # the points it sold are on its ledger besides the charge


@pytest.mark.parametrize(
    "key, value", [("budget_validation", 0.05), ("budget_summary", 1e-4)], ids=["validation", "summary"]
)
def test_a_budget_below_the_plan_is_refused_naming_its_key(tiny_scenario, tmp_path, key, value):
    raw = private(tiny_scenario, **{key: value})
    with pytest.raises(ScenarioError, match=f"summarize.privacy.{key}") as err:
        parse_scenario(raw, source="plan", base_dir=tmp_path)
    assert "planned total" in str(err.value)
    config = config_of(private(tiny_scenario, **{key: 1e6}), tmp_path, "plan")  # a budget above the plan passes
    assert release_plan(config, "owner-1").declared().cost.eps > 0


def test_a_release_beyond_the_plan_is_refused(tiny_scenario, tmp_path):
    plan = release_plan(config_of(private(tiny_scenario), tmp_path, "plan"), "owner-1")
    ledger = plan.ledger(AUCTION, budget=False)
    plan.spend(ledger, AUCTION_MECHANISM["composed"], 6)
    with pytest.raises(PlanExceeded, match="planned 6"):
        plan.spend(ledger, AUCTION_MECHANISM["composed"], 1)


def test_a_run_without_a_noisy_release_of_an_owner_still_charges_the_floor(tiny_scenario, tmp_path):
    raw = private(tiny_scenario, eps_auction=0.0)
    raw["summarize"]["rounds"] = 1
    declared = release_plan(config_of(raw, tmp_path, "plan"), "owner-1").declared()
    assert declared.cost.eps == 1e-12 and "not covered: the points sold" in declared.what


# --- the zCDP statement, against the hand formula it replaces


def hand_rho(schedule: PrivateSchedule, rounds: int, seed_set_size: int, owners: int) -> float | None:
    """The owner's zCDP statement as exchange._planned_rho wrote it by hand before the plan: each pure
    eps-DP auction round and each MWEM iteration eps^2/2, each Gaussian release its rho."""
    eps_round, delta_round = schedule.auction_round(owners)
    if delta_round > 0:
        return None
    rho = rounds * eps_round**2 / 2
    if schedule.release == "gaussian":
        rho += (schedule.rho_per_round or 0.0) * max(rounds - 1, 0)
    else:
        rho += sum(t * e**2 / 2 for e, t in schedule.summary_calls(rounds, seed_set_size=seed_set_size))
    return rho if rho > 0 else None


def hand_totals(schedule: PrivateSchedule, rounds: int, seed_set_size: int, owners: int):
    ledgers = schedule.ledgers()
    schedule.plan(ledgers, rounds, seed_set_size=seed_set_size, owners=owners)
    return ledgers[AUCTION].total(), ledgers[SUMMARY].total()


SETTINGS = [
    {},
    {"eps_auction": 0.05, "secure": True},
    {"gaussian_accountant": "zcdp", "total_epsilon": 0.7},
    {"eps_auction": 2.0, "requests_per_round": 2},
    {"eps_auction": 0.0},
]


@pytest.mark.parametrize("settings", SETTINGS)
@pytest.mark.parametrize("seed_set", [4, 0])
def test_the_zcdp_statement_is_the_hand_formulas(tiny_scenario, tmp_path, settings, seed_set):
    raw = private(tiny_scenario, **settings)
    raw["data"]["seed_set"]["size"] = seed_set
    config = config_of(raw, tmp_path, "plan")
    s = config.summarize
    schedule = PrivateSchedule.resolve(s.privacy, features=s.features, rounds=s.rounds, seed_set_size=seed_set)
    declared = release_plan(config, "owner-1").declared()
    want = hand_rho(schedule, s.rounds, seed_set, config.parties.owners)
    assert declared.cost.rho == pytest.approx(want, rel=1e-12)
    auction, summary = hand_totals(schedule, s.rounds, seed_set, config.parties.owners)
    assert declared.cost.eps == max(auction.eps + summary.eps, 1e-12)
    assert declared.cost.delta == auction.delta + summary.delta


@pytest.mark.parametrize("seed_set", [4, 0])
def test_mwem_releases_state_the_tighter_zcdp_figure_of_their_two_steps(tiny_scenario, tmp_path, seed_set):
    """The hand formula counted an MWEM iteration (eps/2 selection, eps/2 measurement) as one eps-DP
    step, eps^2/2; the plan declares its two steps, each (eps/2)^2/2: half the figure, still valid."""
    raw = private(tiny_scenario, release="mwem_paper")
    raw["data"]["seed_set"]["size"] = seed_set
    config = config_of(raw, tmp_path, "plan")
    s = config.summarize
    schedule = PrivateSchedule.resolve(s.privacy, features=s.features, rounds=s.rounds, seed_set_size=seed_set)
    auction = s.rounds * schedule.auction_round(config.parties.owners)[0] ** 2 / 2
    hand = hand_rho(schedule, s.rounds, seed_set, config.parties.owners)
    assert hand is not None
    declared = release_plan(config, "owner-1").declared()
    assert declared.cost.rho == pytest.approx(auction + (hand - auction) / 2, rel=1e-12)
    auction_total, summary_total = hand_totals(schedule, s.rounds, seed_set, config.parties.owners)
    assert declared.cost.eps == auction_total.eps + summary_total.eps
