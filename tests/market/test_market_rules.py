"""The scheduling rules against their definitions, on streams small enough to work out by hand."""

from __future__ import annotations

import math

import pytest

from marketplace.scheduling.rules import Demand, Dpf, Fcfs, dominant_share, filter_budget, fits, make_rule


def _demand(i: int, **eps: float) -> Demand:
    return Demand(
        f"req-{i:04d}", i - 1, {owner.replace("_", "-"): {"eps": e, "delta": 0.0} for owner, e in eps.items()}
    )


def _simulate(rule, stream: list[Demand], budgets: dict) -> tuple[list[str], list[str]]:
    """Play ``stream`` against owners that charge exactly what is declared, when it fits (a ledger
    with the basic filter): returns (granted ids in order, ids left)."""
    spent = {o: {"eps": 0.0, "delta": 0.0} for o in budgets}
    granted = []
    for n, demand in enumerate(stream, start=1):
        rule.arrive(demand)
        if n == len(stream):
            rule.close()
        while (grant := rule.next_grant(spent)) is not None:
            granted.append(grant.id)
            for owner, charge in grant.charges.items():
                if fits(spent[owner], charge, budgets[owner]):
                    spent[owner] = {d: spent[owner][d] + c for d, c in charge.items()}
    return granted, [d.id for d, _ in rule.left()]


BUDGET = {"owner-1": {"eps": 1.0, "delta": 0.0}}
STREAM = [_demand(1, owner_1=0.6), _demand(2, owner_1=0.3), _demand(3, owner_1=0.2), _demand(4, owner_1=0.5)]


def test_dpf_grants_by_unlocked_budget_and_smallest_share_first():
    # N = 4: after arrival n, n/4 of the budget (1.0) is unlocked.
    # 1: 0.25 unlocked, A (0.6) waits.  2: 0.5 unlocked, B (0.3) runs; spent 0.3.
    # 3: 0.75 unlocked, C (0.2) runs (0.5 <= 0.75); A would need 0.9.  4: all unlocked, D (0.5) runs: spent 1.0;
    # A (0.6) can no longer be paid by the owner's whole budget: not granted.
    granted, left = _simulate(Dpf(BUDGET, unlock_steps=4), STREAM, BUDGET)
    assert granted == ["req-0002", "req-0003", "req-0004"]
    assert left == ["req-0001"]


def test_fcfs_runs_everything_in_arrival_order_and_leaves_the_declining_to_the_owners():
    granted, left = _simulate(Fcfs(), STREAM, BUDGET)
    assert granted == ["req-0001", "req-0002", "req-0003", "req-0004"] and left == []


def test_dpf_takes_the_smallest_dominant_share_among_ready_requests_not_the_earliest():
    budgets = {"owner-1": {"eps": 1.0, "delta": 0.0}, "owner-2": {"eps": 4.0, "delta": 0.0}}
    big = _demand(1, owner_1=0.2, owner_2=0.2)  # dominant share 0.2 (owner-1)
    small = _demand(2, owner_1=0.1, owner_2=0.3)  # dominant share 0.1 (owner-1)
    rule = Dpf(budgets, unlock_steps=1)
    rule.arrive(big)
    rule.arrive(small)
    spent = {o: {"eps": 0.0, "delta": 0.0} for o in budgets}
    assert dominant_share(big, budgets) == pytest.approx(0.2) and dominant_share(small, budgets) == pytest.approx(0.1)
    assert rule.next_grant(spent).id == "req-0002"
    assert rule.next_grant(spent).id == "req-0001"


def test_dpf_ties_go_in_arrival_order():
    rule = Dpf(BUDGET, unlock_steps=1)
    for i in (1, 2):
        rule.arrive(_demand(i, owner_1=0.1))
    spent = {"owner-1": {"eps": 0.0, "delta": 0.0}}
    assert [rule.next_grant(spent).id, rule.next_grant(spent).id] == ["req-0001", "req-0002"]


def test_dpf_does_not_wait_for_an_owner_whose_whole_budget_can_no_longer_pay():
    budgets = {"owner-1": {"eps": 1.0, "delta": 0.0}, "owner-2": {"eps": 0.1, "delta": 0.0}}
    rule = Dpf(budgets, unlock_steps=1)
    rule.arrive(_demand(1, owner_1=0.3, owner_2=0.3))
    spent = {o: {"eps": 0.0, "delta": 0.0} for o in budgets}
    assert rule.needed(_demand(1, owner_1=0.3, owner_2=0.3), spent) == ["owner-1"]
    assert rule.next_grant(spent).id == "req-0001"


def test_dpf_waits_for_an_owner_that_can_pay_once_more_budget_unlocks():
    budgets = {"owner-1": {"eps": 1.0, "delta": 0.0}, "owner-2": {"eps": 0.4, "delta": 0.0}}
    rule = Dpf(budgets, unlock_steps=2)  # after one arrival, half unlocked: owner-2 has 0.2 < 0.3
    rule.arrive(_demand(1, owner_1=0.3, owner_2=0.3))
    spent = {o: {"eps": 0.0, "delta": 0.0} for o in budgets}
    assert rule.next_grant(spent) is None
    rule.arrive(_demand(2, owner_1=0.9, owner_2=0.9))
    assert rule.next_grant(spent).id == "req-0001"


def test_requests_still_waiting_when_the_stream_ends_are_not_granted_with_the_reason():
    rule = Dpf(BUDGET, unlock_steps=10)  # only 20% ever unlocks
    granted, left = _simulate(rule, [_demand(1, owner_1=0.3), _demand(2, owner_1=0.1)], BUDGET)
    assert granted == ["req-0002"] and left == ["req-0001"]
    assert "still waiting for unlocked budget" in rule.left()[0][1]


def test_a_zcdp_budget_is_counted_in_rho_as_the_ledger_does():
    from marketplace.privacy.lifetime import zcdp_budget

    assert filter_budget("zcdp", 1.0, 1e-6) == {"rho": zcdp_budget(1.0, 1e-6)}
    assert filter_budget("basic", 1.0, 0.0) == {"eps": 1.0, "delta": 0.0}


def test_a_dimension_an_owner_has_no_budget_for_is_an_infinite_share():
    budgets = {"owner-1": {"eps": 1.0, "delta": 0.0}}
    demand = Demand("req-0001", 0, {"owner-1": {"eps": 0.1, "delta": 1e-6}})
    assert math.isinf(dominant_share(demand, budgets))
    assert not fits({}, demand.charges["owner-1"], budgets["owner-1"])


def test_make_rule_refuses_an_unknown_rule():
    with pytest.raises(ValueError, match="'rule' parameter of make_rule must be 'fcfs' or 'dpf'. Got 'lottery'"):
        make_rule("lottery", BUDGET, unlock_steps=1)


def test_the_rules_module_examples_hold():
    import doctest

    from marketplace.scheduling import rules

    assert doctest.testmod(rules).failed == 0
