"""sketch's release plan (:mod:`marketplace.protocols.sketch.plan`) is the one place a release's cost
is written: an owner's ledger records the plan's steps, its lifetime charge is the plan's, the
budget check before a run is the plan's, and the owner's noise is calibrated to the plan's eps and
sensitivities."""

from __future__ import annotations

import numpy as np
import pytest

from marketplace import plugins
from marketplace.parties import build_role, make_world, party_ids
from marketplace.privacy.mechanisms import Gaussian
from marketplace.protocols.sketch.plan import release_plan
from marketplace.protocols.sketch.public import public_map
from marketplace.protocols.sketch.release import COUNT, sum_release
from marketplace.scenario import ScenarioError
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node
from scenarios import config_of, sketch_raw


def plan_config(tmp_path, **sketch):
    """The configuration of the plan tests' sketch scenario, ``sketch`` options overriding its section."""
    raw = sketch_raw(
        "sketch-plan",
        owners=2,
        dim=2,
        components=3,
        validation_size=40,
        test_size=20,
        features=40,
        transport=False,
        numerator_share=0.9,
        samples=500,
        queries={"moments": 1, "random_counts": 1},
    )
    raw["sketch"].update(sketch)
    return config_of(raw, tmp_path)


def run_nodes(config):
    world = make_world(config, plugins.exchange(config.protocol))
    nodes = [
        Node(
            build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)),
            run_id="t",
            max_message_bytes=1 << 24,
        )
        for p in party_ids(config)
    ]
    run_inprocess(nodes)
    return {node.party_id: node.role for node in nodes}


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_the_plan_lists_each_owners_two_releases_and_the_consumer_releases_nothing(mechanism, tmp_path):
    config = plan_config(tmp_path, mechanism=mechanism, delta=1e-6)
    plan = release_plan(config, "owner-1")
    fmap = public_map(config)
    total, count = plan.releases
    assert [r.name for r in plan.releases] == [f"{mechanism} sum of features", "laplace count"]
    assert total.eps == pytest.approx(0.9 * 2.0) and count.eps == pytest.approx(0.1 * 2.0)
    assert total.delta == (1e-6 if mechanism == "gaussian" else 0.0) and count.delta == 0.0
    assert total.sensitivity == (fmap.l2_sensitivity if mechanism == "gaussian" else fmap.l1_sensitivity)
    assert count.sensitivity == 1.0
    assert all(r.to == ("curator", "consumer") and r.account == "owner" for r in plan.releases)
    assert plan.account("owner").dataset == "owner-1" and plan.relation == "add/remove-one"
    consumer = release_plan(config, "consumer")
    assert consumer.releases == () and not consumer.unbounded and consumer.declared() is None


def test_a_null_epsilon_plans_an_unbounded_release(tmp_path):
    plan = release_plan(plan_config(tmp_path, epsilon=None), "owner-2")
    assert plan.releases == () and "sketch.epsilon is null" in plan.unbounded
    assert plan.declared().cost is None and plan.declared().unbounded == plan.unbounded


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_each_owners_ledger_records_the_plans_steps_and_its_lifetime_charge_is_the_plans(mechanism, tmp_path):
    config = plan_config(tmp_path, mechanism=mechanism, delta=1e-6)
    roles = run_nodes(config)
    exchange = plugins.exchange("sketch")
    for owner in party_ids(config)[1:-1]:
        plan = release_plan(config, owner)
        ledger = roles[owner].ledger
        assert ledger.dataset == owner
        assert [s.to_dict() for s in ledger.steps] == [s.to_dict() for s in plan.steps("owner")]
        assert exchange.owner_cost(config, owner) == plan.declared()
        assert plan.declared().cost.eps == pytest.approx(ledger.total().eps)
    assert exchange.consumer_cost(config) is None


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_the_owners_noise_is_calibrated_to_the_plans_releases(mechanism, tmp_path):
    config = plan_config(tmp_path, mechanism=mechanism, delta=1e-6)
    roles = run_nodes(config)
    plan = release_plan(config, "owner-1")
    released = roles["owner-1"].released
    total, count = plan.release(sum_release(mechanism)), plan.release(COUNT)
    assert released.count_variance == pytest.approx(2 * count.laplace_scale() ** 2, rel=1e-12)
    if mechanism == "laplace":
        assert released.numerator_variance == pytest.approx(2 * total.laplace_scale() ** 2, rel=1e-12)
    else:
        sigma = Gaussian(
            epsilon=total.eps, delta=total.delta, sensitivity=total.sensitivity, rng=np.random.default_rng(0)
        ).sigma
        assert released.numerator_variance == pytest.approx(sigma**2, rel=1e-12)
    assert released.epsilon == config.sketch.epsilon


@pytest.mark.parametrize(
    "settings, key",
    [
        ({"budget_epsilon": 1.0}, "sketch.budget_epsilon"),
        ({"mechanism": "gaussian", "delta": 1e-5, "budget_epsilon": 5.0, "budget_delta": 1e-6}, "sketch.budget_delta"),
    ],
)
def test_a_budget_below_the_plan_is_refused_naming_its_key(settings, key, tmp_path):
    with pytest.raises(ScenarioError, match=key) as err:
        plan_config(tmp_path, **settings)
    assert "planned releases" in str(err.value)
    # a budget that covers the plan is accepted
    release_plan(plan_config(tmp_path, budget_epsilon=2.0, budget_delta=1e-5), "owner-1").check()
