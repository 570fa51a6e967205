"""stc's release plan (:mod:`marketplace.protocols.stc.plan`) is the one place a release's cost is
written: an owner's ledger records the plan's step, its lifetime charge is the plan's, the budget
check before a run is the plan's, and the owner's noise is calibrated to the plan's eps or rho and
its sensitivity for the target points sent."""

from __future__ import annotations

import math

import pytest

from marketplace import plugins
from marketplace.parties import build_role, make_world, party_ids
from marketplace.protocols.stc import owner as stc_owner
from marketplace.protocols.stc.plan import REPORT_DELTA, at_target, release_plan, summary_release
from marketplace.scenario import ScenarioError
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node
from scenarios import config_of, stc_raw

SETTINGS = [
    ("nna", {"notion": "dp", "epsilon": 2.0}),
    ("nas", {"notion": "dp", "epsilon": 2.0}),
    ("nna", {"notion": "zcdp", "rho": 0.5}),
    ("nas", {"notion": "zcdp", "rho": 0.5, "gaussian_accountant": "zcdp"}),
    ("nna", {"notion": "zcdp", "rho": 0.5, "secure": True}),
]


def plan_config(tmp_path, release="nna", **privacy):
    """The configuration of the plan tests' stc scenario with ``release`` and ``privacy``."""
    return config_of(stc_raw("stc-plan", t=20, release=release, privacy=privacy, transport=False), tmp_path)


def run_nodes(config, monkeypatch):
    """Run ``config`` in process; each owner's roles and the release object it made (by owner)."""
    made = {}
    for name in ("nas_release", "nna_release"):
        real = getattr(stc_owner, name)

        def spy(source, target, *, _real=real, **kwargs):
            release = _real(source, target, **kwargs)
            made[len(made)] = (target.shape, kwargs, release)
            return release

        monkeypatch.setattr(stc_owner, name, spy)
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
    return {node.party_id: node.role for node in nodes}, list(made.values())


@pytest.mark.parametrize("release, privacy", SETTINGS)
def test_the_plan_lists_each_owners_one_summary_and_the_consumers_points_in_the_clear(release, privacy, tmp_path):
    config = plan_config(tmp_path, release, **privacy)
    plan = release_plan(config, "owner-2")
    (summary,) = plan.releases
    assert summary.name == f"stc.{release}" and summary.to == ("curator", "consumer")
    account = plan.account("owner")
    assert account.dataset == "owner-2" and plan.relation == "add/remove-one"
    if privacy["notion"] == "dp":
        assert (summary.eps, summary.rho, summary.mechanism, summary.norm[:2]) == (2.0, None, "laplace", "L1")
        assert account.theorem == "basic"
    else:
        assert (summary.eps, summary.rho, summary.mechanism, summary.norm[:2]) == (None, 0.5, "gaussian_zcdp", "L2")
        assert summary.gaussian is not privacy.get("secure", False)
        assert (account.theorem, account.delta) == ("zcdp", REPORT_DELTA)
    consumer = release_plan(config, "consumer")
    assert consumer.releases == () and "in the clear" in consumer.unbounded
    assert plugins.exchange("stc").consumer_cost(config) == consumer.declared()


@pytest.mark.parametrize("release, privacy", SETTINGS)
def test_each_owners_ledger_records_the_plans_step_and_its_lifetime_charge_is_the_plans(
    release, privacy, tmp_path, monkeypatch
):
    config = plan_config(tmp_path, release, **privacy)
    roles, _ = run_nodes(config, monkeypatch)
    exchange = plugins.exchange("stc")
    for owner in party_ids(config)[1:-1]:
        plan = release_plan(config, owner)
        ledger = roles[owner].ledger
        assert ledger.dataset == owner
        assert [s.to_dict() for s in ledger.steps] == [s.to_dict() for s in plan.steps("owner")]
        declared = exchange.owner_cost(config, owner)
        assert declared == plan.declared()
        total = ledger.total()
        assert (declared.cost.eps, declared.cost.delta) == (pytest.approx(total.eps), pytest.approx(total.delta))
        if privacy["notion"] == "zcdp":
            assert declared.cost.rho == 0.5 and declared.cost.delta == REPORT_DELTA


@pytest.mark.parametrize("release, privacy", SETTINGS[:4])
def test_the_owners_noise_is_calibrated_to_the_plans_release_for_the_points_sent(
    release, privacy, tmp_path, monkeypatch
):
    config = plan_config(tmp_path, release, **privacy)
    _, made = run_nodes(config, monkeypatch)
    assert len(made) == 2  # one release per owner
    for shape, kwargs, made_release in made:
        planned = at_target(release_plan(config, "owner-1"), config.stc, *shape).release(summary_release(config.stc))
        assert kwargs["sensitivity"] == planned.sensitivity == made_release.sensitivity
        if planned.eps is not None:
            assert kwargs["eps"] == planned.eps
            assert made_release.scale == pytest.approx(planned.laplace_scale(), rel=1e-12)
        else:
            assert kwargs["rho"] == planned.rho
            assert made_release.scale == pytest.approx(planned.sensitivity / math.sqrt(2 * planned.rho), rel=1e-12)


@pytest.mark.parametrize("privacy", [{"notion": "dp", "epsilon": 3.0}, {"notion": "zcdp", "rho": 3.0}])
def test_a_budget_below_the_plan_is_refused_naming_its_key(privacy, tmp_path):
    with pytest.raises(ScenarioError, match=r"stc\.privacy\.budget"):
        plan_config(tmp_path, **privacy, budget=1.0)
    config = plan_config(tmp_path, **privacy, budget=3.0)  # a budget that covers the plan is accepted
    release_plan(config, "owner-1").check()
