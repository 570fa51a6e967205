"""pfds declares every release of a sharer's rows once (marketplace.protocols.pfds.plan): the tree's
levels and optPrivateGen's counted levels, with the names its ledger records, their mechanisms,
sensitivities, recipients and eps from split_budget. The budget check, the lifetime charge, the
sharer's ledger and the noise each level draws are all read from that plan."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from marketplace import plugins
from marketplace.parties import build_role, make_world
from marketplace.privacy.plan import PlanExceeded
from marketplace.protocols.pfds import exchange, grow, split_budget, synth
from marketplace.protocols.pfds.exchange import release_plan
from marketplace.protocols.pfds.plan import OTHER_OWNERS, SHARER, PfdsReleasePlan, level_epsilon
from marketplace.runner.run import run_scenario
from marketplace.scenario import ScenarioError, parse_scenario
from scenarios import config_of, pfds_raw

EPSILON, H_MAX, P = 1.0, 5, 4


@pytest.fixture
def pfds_plan() -> dict:
    return pfds_raw("pfds-plan", rows=600, epsilon=EPSILON, h_max=H_MAX, p=P, sharers=2, baselines=[])


def plan_config(raw, tmp_path, **pfds):
    """The configuration of ``raw`` with ``pfds`` options overriding its section."""
    return config_of({**raw, "pfds": {**raw["pfds"], **pfds}}, tmp_path)


def tree_names(kind: str, levels) -> list[str]:
    return [f"pfds.tree.{kind}.level{i}" for i in levels]


def test_a_sharers_plan_lists_its_tree_levels_and_counted_levels(pfds_plan, tmp_path):
    config = plan_config(pfds_plan, tmp_path)
    plan = release_plan(config, "owner-3")
    budget = split_budget(EPSILON, h_max=H_MAX, p=P)
    by_name = {release.name: release for release in plan.releases}
    splits = tree_names("split", range(1, H_MAX))
    leaves = tree_names("leaves", range(1, H_MAX + 1))
    counts = [f"pfds.synth.counts.level{i}" for i in range(1, P)]
    assert set(by_name) == {*splits, *leaves, *counts}
    for name in splits:
        assert (by_name[name].mechanism, by_name[name].sensitivity, by_name[name].norm) == (
            "exponential",
            1.0,
            "utility",
        )
    for name in leaves + counts:
        assert (by_name[name].mechanism, by_name[name].sensitivity, by_name[name].norm) == ("laplace", 1.0, "L1")
    assert all(by_name[name].eps == budget.tree_level for name in splits + leaves)
    assert all(by_name[name].eps == budget.counts_level for name in counts)
    assert all(release.count == 1 for release in plan.releases)
    assert all(release.to == ("curator", "consumer", OTHER_OWNERS) for release in plan.releases)
    # a level splits or holds the leaves: each pair is charged once
    assert isinstance(plan, PfdsReleasePlan)
    assert set(plan.one_of) == {(f"pfds.tree.split.level{i}", f"pfds.tree.leaves.level{i}") for i in range(1, H_MAX)}
    assert len(plan.steps(SHARER)) == H_MAX + P - 1
    (account,) = plan.accounts
    assert (account.name, account.dataset, account.theorem, account.budget, account.budget_keys) == (
        SHARER,
        "owner-3",
        "basic",
        None,
        ("pfds.budget",),
    )
    assert account.neighbouring.relation == "add/remove-one"
    declared = plan.declared()
    assert declared is not None and declared.cost.eps == pytest.approx(EPSILON) and declared.cost.delta == 0
    assert declared.what == "pfds: owner-3's tree and synthetic records (pfds-plan)"
    assert declared.relation == "add/remove-one"


def test_replace_one_doubles_every_sensitivity_and_pfds_minus_has_no_counts(pfds_plan, tmp_path):
    plan = release_plan(plan_config(pfds_plan, tmp_path, neighbours="replace", consistency=False), "owner-2")
    assert {release.sensitivity for release in plan.releases} == {2.0}
    assert not [release for release in plan.releases if release.name.startswith("pfds.synth.")]
    declared = plan.declared()
    assert declared is not None and declared.cost.eps == pytest.approx(EPSILON / 2)
    assert declared.relation == "replace-one" and plan.accounts[0].neighbouring.relation == "replace-one"


def test_receivers_and_the_consumer_release_nothing(pfds_plan, tmp_path):
    config = plan_config(pfds_plan, tmp_path)
    pfds = plugins.exchange("pfds")
    for party in ("owner-1", "consumer"):  # owner-1 only receives (pfds.sharers = 2 of 3)
        assert release_plan(config, party).releases == ()
    assert pfds.owner_cost(config, "owner-1") is None and pfds.consumer_cost(config) is None
    assert pfds.owner_cost(config, "owner-2") == release_plan(config, "owner-2").declared()
    assert not hasattr(exchange, "owner_cost") and not hasattr(exchange, "consumer_cost")


@pytest.mark.parametrize("budget", [EPSILON * 0.99, EPSILON / 2])
def test_a_budget_below_the_plan_is_refused_naming_the_key(pfds_plan, tmp_path, budget):
    with pytest.raises(ScenarioError, match=r"pfds\.budget: expected a budget that covers owner-\d's planned"):
        plan_config(pfds_plan, tmp_path, budget=budget)


def test_a_budget_of_exactly_the_plan_runs_and_pfds_minus_needs_half(pfds_plan, tmp_path):
    plan_config(pfds_plan, tmp_path, budget=EPSILON)
    plan_config(pfds_plan, tmp_path, budget=EPSILON / 2, consistency=False)


def test_each_sharers_ledger_stays_within_its_plan(pfds_plan, tmp_path):
    scenario = parse_scenario(pfds_plan, source="t", base_dir=tmp_path)
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")
    config = scenario.config
    for owner in ("owner-2", "owner-3"):
        plan = release_plan(config, owner)
        ledger = report["privacy"][owner]
        steps = ledger["steps"]
        made = Counter(step["mechanism"] for step in steps)
        assert made and all(made[name] <= plan.release(name).count for name in made)  # PlanExceeded otherwise
        assert all(step["eps"] == plan.release(step["mechanism"]).eps for step in steps)
        assert all(step["count"] == 1 and step["delta"] == 0 for step in steps)
        for split, leaves in plan.one_of:
            assert not (made[split] and made[leaves])
        assert sum(1 for name in made if ".leaves." in name) == 1
        assert [name for name in made if name.startswith("pfds.synth.")] == [
            f"pfds.synth.counts.level{i}" for i in range(1, P)
        ]
        assert ledger["dataset"] == owner and ledger["neighbouring"]["relation"] == "add/remove-one"
        declared = plugins.exchange("pfds").owner_cost(config, owner)
        assert declared == plan.declared()
        assert ledger["eps"] <= declared.cost.eps + 1e-12
    assert "owner-1" not in report["privacy"] or not report["privacy"]["owner-1"].get("steps")


def test_the_plan_refuses_a_second_release_of_a_level(pfds_plan, tmp_path):
    plan = release_plan(plan_config(pfds_plan, tmp_path), "owner-3")
    ledger = plan.ledger(SHARER)
    plan.spend(ledger, "pfds.tree.split.level1")
    with pytest.raises(PlanExceeded, match="planned 1 time"):
        plan.spend(ledger, "pfds.tree.split.level1")
    with pytest.raises(PlanExceeded, match="excludes 'pfds.tree.split.level1'"):
        plan.spend(ledger, "pfds.tree.leaves.level1")
    with pytest.raises(PlanExceeded, match="not in its plan"):
        plan.spend(ledger, f"pfds.tree.leaves.level{H_MAX + 1}")
    with pytest.raises(PlanExceeded, match="not in its plan"):
        level_epsilon(plan)("synth.counts", P)


def test_each_level_draws_its_noise_at_the_plans_eps(pfds_plan, tmp_path, monkeypatch):
    """The sharer's noise follows its plan: a plan with a distinct eps per level (not what split_budget
    gives) makes each level's mechanism calibrated to that eps and its ledger record it."""
    config = plan_config(pfds_plan, tmp_path)
    planned = release_plan(config, "owner-3")
    odd = {release.name: 0.01 * (k + 1) for k, release in enumerate(planned.releases)}
    plan = dataclasses.replace(
        planned, releases=tuple(dataclasses.replace(release, eps=odd[release.name]) for release in planned.releases)
    )
    monkeypatch.setattr(exchange, "release_plan", lambda config, party: plan)
    calibrations = []

    def recording(cls, purpose):
        class Recording(cls):
            def __init__(self, *, epsilon, sensitivity, **kwargs):
                calibrations.append((purpose, epsilon, sensitivity))
                super().__init__(epsilon=epsilon, sensitivity=sensitivity, **kwargs)

        return Recording

    monkeypatch.setattr(grow, "Exponential", recording(grow.Exponential, "tree.split"))
    monkeypatch.setattr(grow, "Laplace", recording(grow.Laplace, "tree.leaves"))
    monkeypatch.setattr(synth, "Laplace", recording(synth.Laplace, "synth.counts"))
    sharer = build_role(
        config,
        "owner-3",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    sharer.start()
    sharer.label([])
    steps = sharer.ledger.steps
    assert steps and [step.eps for step in steps] == [odd[step.mechanism] for step in steps]
    levels = [step.mechanism for step in steps]
    expected = [
        (name.split(".level")[0].removeprefix("pfds."), odd[name], plan.release(name).sensitivity) for name in levels
    ]
    assert calibrations == expected
    assert np.isclose(sharer.ledger.total().eps, sum(odd[name] for name in levels))


def test_every_release_leaves_the_sharer_through_its_plan(pfds_plan, tmp_path):
    """Each level's output (a split level's thresholds, the leaves' noisy counts, a counted level's
    noisy counts) passes through the plan's released() as it is drawn, once per ledger step; given
    back to a sharer with one row less, everything it sends is the same (the coupled differential
    test of marketplace.differential replays them so)."""
    from marketplace.privacy.coupling import Coupling, coupled

    config = plan_config(pfds_plan, tmp_path)
    world = make_world(config, plugins.exchange(config.protocol))

    def sent(sharer) -> list:
        out = [send.body for send in sharer.start() if send.to == "curator"]
        out += [send.body for send in sharer.label([])]
        return [{k: getattr(body, k) for k in body.__struct_fields__} for body in out]

    record = Coupling("record")
    with coupled(record):
        sharer = build_role(config, "owner-3", world=world, exchange=plugins.exchange(config.protocol))
        first = sent(sharer)
    assert list(record.tape) == [("owner-3", step.mechanism) for step in sharer.ledger.steps]
    assert all(len(outputs) == 1 for outputs in record.tape.values())

    replay = record.replay()
    index = 2  # owner-3 among the owners
    data = world.owners[index]
    fewer = dataclasses.replace(world, owners=[*world.owners[:index], data.take(list(range(len(data) - 1)))])
    with coupled(replay):
        second = sent(build_role(config, "owner-3", world=fewer, exchange=plugins.exchange(config.protocol)))
    assert not replay.missing and not replay.unused()
    for a, b in zip(first, second, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            if isinstance(a[key], np.ndarray):
                np.testing.assert_array_equal(a[key], b[key])
            else:
                assert a[key] == b[key], key
