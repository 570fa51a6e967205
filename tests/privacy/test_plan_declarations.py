"""The release plan (marketplace.privacy.plan): one declaration per party from which the budget check,
the lifetime charge, the calibration and the ledger entries are read, so that they cannot disagree."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest

from marketplace.plugins import Exchange
from marketplace.privacy.accountant import BudgetExceeded, advanced
from marketplace.privacy.neighbouring import add_remove_one, replace_one
from marketplace.privacy.plan import Account, PlanExceeded, Release, ReleasePlan
from marketplace.schema import SchemaError


def owner_account(**overrides: Any) -> Account:
    settings: dict[str, Any] = dict(name="owner", dataset="owner-1", neighbouring=add_remove_one("a row of owner-1"))
    return Account(**{**settings, **overrides})


def laplace(name: str, eps: float, *, account: str = "owner", count: int = 1, sensitivity: float = 1.0) -> Release:
    return Release(
        name=name, account=account, to=("curator",), mechanism="laplace", sensitivity=sensitivity, eps=eps, count=count
    )


def plan_of(*releases: Release, accounts: tuple[Account, ...] | None = None, **overrides: Any) -> ReleasePlan:
    settings: dict[str, Any] = dict(
        party="owner-1",
        what="two counts of owner-1's rows",
        relation="add/remove-one",
        accounts=accounts or (owner_account(),),
        releases=releases,
    )
    return ReleasePlan(**{**settings, **overrides})


def test_the_declared_cost_is_what_the_ledger_records_when_the_plan_runs():
    plan = plan_of(laplace("sum", 0.3, sensitivity=4.0), laplace("count", 0.2, count=3))
    ledger = plan.ledger("owner")
    plan.spend(ledger, "sum")
    plan.spend(ledger, "count")
    declared = plan.declared()
    assert declared is not None and declared.cost is not None
    assert declared.cost.eps == pytest.approx(ledger.total().eps) == pytest.approx(0.9)
    assert declared.relation == "add/remove-one" and declared.cost.rho is None  # pure: the ledger takes eps^2/2
    assert [(s.mechanism, s.eps, s.count) for s in ledger.steps] == [("sum", 0.3, 1), ("count", 0.2, 3)]
    assert plan.release("sum").laplace_scale() == pytest.approx(4.0 / 0.3)  # the calibration, from the same eps


def test_accounts_compose_by_their_own_theorem_and_add_up_across():
    accounts = (
        owner_account(name="auction", neighbouring=replace_one("a point"), theorem="advanced", delta=1e-6),
        owner_account(name="summary", neighbouring=replace_one("a point")),
    )
    plan = plan_of(
        laplace("select", 0.01, account="auction", count=100),
        laplace("measure", 0.05, account="summary", count=2),
        accounts=accounts,
        relation="replace-one",
    )
    auction = min(advanced(0.01, 100, 1e-6).eps, 1.0)  # the ledger takes the smaller of advanced and basic
    declared = plan.declared()
    assert declared is not None and declared.cost is not None
    assert declared.cost.eps == pytest.approx(auction + 0.1)
    assert declared.cost.delta == pytest.approx(1e-6 if auction < 1.0 else 0.0)


def test_a_zcdp_statement_adds_each_release_up():
    gaussian = Release(
        name="gauss", account="owner", to=("consumer",), mechanism="gaussian", sensitivity=1.0, norm="L2",
        rho=0.02, gaussian=True, count=2,
    )  # fmt: skip
    declared = plan_of(gaussian, laplace("count", 0.1), accounts=(owner_account(delta=1e-6),)).declared()
    assert declared is not None and declared.cost is not None
    assert declared.cost.rho == pytest.approx(2 * 0.02 + 0.1**2 / 2)
    stated = plan_of(laplace("a", 0.1), laplace("b", 0.2), state_rho=True).declared()
    assert stated is not None and stated.cost is not None and stated.cost.rho == pytest.approx(0.005 + 0.02)


def test_a_plan_without_releases_releases_nothing_and_an_unbounded_one_has_no_cost():
    assert plan_of().declared() is None
    declared = plan_of(unbounded="its target points leave in the clear").declared()
    assert declared is not None and declared.cost is None and "in the clear" in declared.unbounded


def test_a_spend_past_the_plan_is_refused_naming_the_party_and_the_counts():
    plan = plan_of(laplace("count", 0.2, count=2))
    ledger = plan.ledger("owner")
    plan.spend(ledger, "count", 1)
    plan.spend(ledger, "count", 1)
    with pytest.raises(PlanExceeded, match=r"owner-1: release 'count' planned 2 time\(s\), asked for 3"):
        plan.spend(ledger, "count", 1)
    with pytest.raises(PlanExceeded, match="owner-1: release 'other' is not in its plan"):
        plan.spend(ledger, "other")
    assert ledger.total().eps == pytest.approx(0.4)  # nothing recorded by the refusals


def test_the_ledger_keeps_its_budget_and_refuses_before_recording():
    plan = plan_of(laplace("count", 0.6), accounts=(owner_account(budget=(0.5, 0.0), budget_keys=("x.budget",)),))
    ledger = plan.ledger("owner")
    with pytest.raises(BudgetExceeded):
        plan.spend(ledger, "count")
    assert ledger.steps == ()


def test_check_names_the_budget_key_and_both_figures():
    plan = plan_of(
        laplace("count", 0.6), accounts=(owner_account(budget=(0.5, 0.0), budget_keys=("x.budget_epsilon",)),)
    )
    with pytest.raises(SchemaError) as err:
        plan.check()
    assert err.value.path == "x.budget_epsilon"
    assert "budget (eps=0.5, delta=0)" in str(err.value) and "planned total (eps=0.6, delta=0)" in str(err.value)


def test_check_names_the_delta_key_when_only_delta_is_passed():
    gaussian = Release(
        name="sum", account="owner", to=("curator",), mechanism="gaussian", sensitivity=1.0, norm="L2",
        eps=0.4, delta=1e-5,
    )  # fmt: skip
    keys = ("x.budget_epsilon", "x.budget_delta")
    plan = plan_of(gaussian, accounts=(owner_account(budget=(1.0, 1e-6), budget_keys=keys),))
    with pytest.raises(SchemaError) as err:
        plan.check()
    assert err.value.path == "x.budget_delta"
    plan_of(gaussian, accounts=(owner_account(budget=(1.0, 1e-4), budget_keys=keys),)).check()  # fits


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: laplace("count", 0.1, sensitivity=0.0), "'sensitivity' must be a finite number > 0"),
        (lambda: laplace("count", 0.1, sensitivity=math.inf), "'sensitivity' must be a finite number > 0"),
        (lambda: laplace("count", -0.1), "eps"),
        (lambda: Release(name="r", account="owner", to=(), mechanism="laplace", sensitivity=1.0, eps=0.1), "'to'"),
        (lambda: plan_of(laplace("count", 0.1, account="nobody")), "account 'nobody', which the plan does not"),
        (lambda: plan_of(laplace("count", 0.1), laplace("count", 0.2)), "release 'count' is declared twice"),
        (lambda: plan_of(relation="add-one"), "'relation' must be one of"),
        (lambda: owner_account(budget=(1.0, 0.0)), "name the scenario key that sets it"),
        (lambda: owner_account(theorem="magic"), "theorem"),
    ],
)
def test_a_bad_declaration_is_refused_naming_what_is_wrong(build, says):
    with pytest.raises((ValueError, TypeError), match=None) as err:
        build()
    assert says in str(err.value)


class _Planned(Exchange):
    """An exchange whose only privacy statement is its plan (the abstract methods are not called)."""

    def release_plan(self, config: Any, party: str) -> ReleasePlan | None:
        return None if config.undeclared else plan_of(laplace("count", 0.25), party=party)

    build_role = check_plan = progress = report = head_rows = tables = None  # type: ignore[assignment]
    sweep_row = sweep_table = plot_sweep = None  # type: ignore[assignment]


def test_the_exchange_declares_its_costs_from_its_plan():
    exchange = _Planned()
    declared = exchange.owner_cost(SimpleNamespace(undeclared=False), "owner-2")
    assert declared.cost.eps == 0.25 and declared.relation == "add/remove-one"
    assert exchange.consumer_cost(SimpleNamespace(undeclared=False)).cost.eps == 0.25
    config = SimpleNamespace(undeclared=True, protocol="toy", name="t")
    assert exchange.owner_cost(config, "owner-2").cost is None  # no plan: no finite cost, a ledger declines
