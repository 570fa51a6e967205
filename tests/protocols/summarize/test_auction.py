"""Behaviour of PRIVAUCTION's pure core: whom it asks, the tau rule, the pool and verification (the
statistical two-sided audit is in ``test_auction_audit.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marketplace.privacy.rng import make_rng
from marketplace.protocols.summarize import bid_value
from marketplace.protocols.summarize.auction import (
    Pool,
    PoolEntry,
    PrivAuction,
    paper_expected_requests,
    request_probabilities,
    verify,
)

OWNERS = ("o1", "o2", "o3", "o4", "o5")
NEVER = 10**9  # a tau that never fires within a test


def auction(
    *,
    eps_auc: float = 0.5,
    tau: int = NEVER,
    seed: int = 1,
    owners: tuple[str, ...] = OWNERS,
    rule: str = "two_sided",
    requests: int | str = "auto",
) -> PrivAuction:
    return PrivAuction(
        owners=owners, eps_auc=eps_auc, tau=tau, rng=make_rng(seed=seed, secure=False), rule=rule, requests=requests
    )


def entry(owner: str, serial: int, phi, *, claimed: float = 0.0, round: int = 1) -> PoolEntry:
    phi = np.asarray(phi, dtype=np.float64)
    return PoolEntry(owner=owner, serial=serial, phi=phi, claimed=claimed, round=round, content=(np.zeros(2), 0))


# --- request probabilities -----------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.0, 0.01, 0.5, 3.0])
def test_the_papers_request_probabilities_follow_the_formula(eps):
    probs = request_probabilities(6, eps)
    assert probs.shape == (6,)
    np.testing.assert_allclose(probs, [math.exp(-eps * (r - 1)) for r in range(1, 7)], rtol=1e-15)
    assert probs[0] == 1.0


def test_request_probabilities_of_no_owner_is_empty():
    assert request_probabilities(0, 0.5).shape == (0,)


@pytest.mark.parametrize("bad", [-0.1, math.inf, math.nan])
def test_request_probabilities_refuse_a_bad_eps(bad):
    with pytest.raises(ValueError, match="'eps_auc'"):
        request_probabilities(3, bad)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"tau": 0}, ValueError),
        ({"tau": 1.5}, TypeError),
        ({"eps_auc": -1.0}, ValueError),
        ({"owners": ()}, ValueError),
        ({"owners": ("a", "a")}, ValueError),
        ({"rng": 7}, TypeError),
        ({"rule": "greedy"}, ValueError),
        ({"requests": 0}, ValueError),
        ({"requests": "many"}, TypeError),
    ],
)
def test_auction_parameters_are_checked(kwargs, error):
    args = {"owners": OWNERS, "eps_auc": 0.5, "tau": 3, "rng": np.random.default_rng(0)} | kwargs
    with pytest.raises(error):
        PrivAuction(**args)


def test_bids_from_unknown_owners_or_not_finite_are_refused():
    a = auction()
    with pytest.raises(ValueError, match="owners"):
        a.decide({"stranger": 1.0})
    with pytest.raises(ValueError, match="finite"):
        a.decide({"o1": math.nan})


# --- who is asked ---------------------------------------------------------------------------------


def test_the_papers_rule_always_asks_rank_one():
    a = auction(eps_auc=5.0, seed=3, rule="paper")
    rng = np.random.default_rng(4)
    for _ in range(2000):
        bids = dict(zip(OWNERS, rng.normal(size=len(OWNERS))))
        best = max(bids, key=bids.get)
        assert best in a.decide(bids)


@pytest.mark.parametrize("rule", ["composed", "two_sided"])
@pytest.mark.parametrize("requests", [1, 2, 4])
def test_the_rule_asks_exactly_the_requested_number_every_round(requests, rule):
    a = auction(eps_auc=0.5, seed=3, requests=requests, rule=rule)
    rng = np.random.default_rng(4)
    for _ in range(500):
        assert len(a.decide(dict(zip(OWNERS, rng.normal(size=len(OWNERS)))))) == requests


def test_the_two_sided_rule_leaves_rank_one_out_sometimes():
    a = auction(eps_auc=1.0, seed=3, requests=1)
    bids = dict(zip(OWNERS, (5.0, 4.0, 3.0, 2.0, 1.0)))
    asked = [a.decide(bids)[0] for _ in range(4000)]
    share = asked.count("o1") / len(asked)
    assert 0.55 < share < 0.72  # 1 - 1/e = 0.632 with 5 owners and one request per round


def test_auto_asks_as_many_as_the_papers_coins_do_on_average():
    for n, eps in ((4, 0.1), (16, 0.1), (64, 0.1), (64, 1.0)):
        assert paper_expected_requests(n, eps) == max(1, round(float(request_probabilities(n, eps).sum())))
    assert paper_expected_requests(5, 50.0) == 1


def test_requests_go_out_in_a_random_order_not_by_rank():
    a = auction(eps_auc=30.0, requests=3, seed=8)
    bids = dict(zip(OWNERS, (5.0, 4.0, 3.0, 2.0, 1.0)))
    orders = {tuple(a.decide(bids)) for _ in range(200)}
    assert {frozenset(o) for o in orders} == {frozenset({"o1", "o2", "o3"})}  # the top three, always
    assert len(orders) == 6  # in every order


def test_owners_without_a_bid_are_never_asked_nor_ranked():
    a = auction(eps_auc=0.0, tau=1)  # tau 1 asks every bidder
    asked = a.decide({"o1": 0.2, "o2": None, "o3": 0.1})
    assert set(asked) == {"o1", "o3"}
    assert a.last.ranking == ("o1", "o3")
    assert a.unasked["o2"] == 0


def test_equal_bids_go_to_the_lower_owner_index():
    a = auction(eps_auc=30.0, requests=1)  # ranks >= 2 are asked with probability ~e^-30: never
    bids = {"o4": 1.0, "o2": 1.0, "o5": 1.0, "o1": 0.5}
    assert a.ranking(bids) == ("o2", "o4", "o5", "o1")
    assert a.decide(bids) == ["o2"]


@pytest.mark.parametrize("rule", ["composed", "two_sided", "paper"])
def test_tau_rule_fires_exactly_at_the_tau_th_unasked_bid(rule):
    tau = 4
    a = auction(eps_auc=30.0, tau=tau, owners=("top", "low"), rule=rule, requests=1)
    asked_low = [r for r in range(1, 13) if "low" in a.decide({"top": 1.0, "low": 0.0})]
    assert asked_low == [4, 8, 12]
    assert a.last.by_tau == frozenset({"low"}) and a.last.by_coin == frozenset({"top"})


def test_owners_due_under_tau_are_asked_on_top_of_the_requested_number():
    a = auction(eps_auc=30.0, tau=2, requests=1, owners=("a", "b", "c"))
    assert a.decide({"a": 3.0, "b": 2.0, "c": 1.0}) == ["a"]
    assert sorted(a.decide({"a": 3.0, "b": 2.0, "c": 1.0})) == ["a", "b", "c"]  # b, c due; a by schedule
    assert a.last.by_tau == frozenset({"b", "c"}) and a.last.by_coin == frozenset({"a"})


def test_tau_one_asks_every_bidder_every_round():
    a = auction(eps_auc=30.0, tau=1)
    for _ in range(5):
        assert set(a.decide(dict(zip(OWNERS, range(5))))) == set(OWNERS)


def test_a_schedule_request_resets_the_tau_count():
    a = auction(eps_auc=30.0, tau=3, owners=("a", "b"), requests=1)
    a.decide({"a": 0.0, "b": 1.0})  # b asked (rank 1), a: 1 unasked bid
    assert a.decide({"a": 1.0, "b": 0.0}) == ["a"]  # a ranks first: asked, count reset
    assert a.unasked == {"a": 0, "b": 1}
    assert a.decide({"a": 1.0, "b": 0.0}) == ["a"]  # b: 2 unasked bids, not yet tau
    assert set(a.decide({"a": 1.0, "b": 0.0})) == {"a", "b"}  # b's third unasked bid: tau


def test_rounds_without_a_bid_do_not_count_towards_tau():
    a = auction(eps_auc=30.0, tau=2, owners=("a", "b"), requests=1)
    a.decide({"a": 1.0, "b": 0.0})
    a.decide({"a": 1.0, "b": None})
    assert a.unasked["b"] == 1
    assert set(a.decide({"a": 1.0, "b": 0.0})) == {"a", "b"}


@pytest.mark.parametrize("rule", ["composed", "two_sided", "paper"])
def test_same_seed_same_decisions(rule):
    rng = np.random.default_rng(9)
    rounds = [dict(zip(OWNERS, rng.normal(size=5))) for _ in range(300)]
    first, second = auction(seed=42, tau=3, rule=rule), auction(seed=42, tau=3, rule=rule)
    assert [first.decide(b) for b in rounds] == [second.decide(b) for b in rounds]
    other = auction(seed=43, tau=3, rule=rule)
    assert [first.decide(b) for b in rounds] != [other.decide(b) for b in rounds]


def test_the_default_rule_is_composed():
    a = PrivAuction(owners=OWNERS, eps_auc=0.5, tau=3, rng=np.random.default_rng(0))
    assert a.rule == "composed" and a.schedule(5).rule == "composed"


def test_each_round_states_its_guarantee():
    c = auction(eps_auc=0.5, requests=1, rule="composed")
    c.decide(dict(zip(OWNERS, range(5))))
    assert c.last.guarantee == (0.5, 0.0)
    a = auction(eps_auc=0.5, requests=1)
    a.decide(dict(zip(OWNERS, range(5))))
    assert a.last.guarantee == (0.5, 0.0)
    p = auction(eps_auc=0.5, rule="paper")
    p.decide(dict(zip(OWNERS, range(5))))
    assert p.last.guarantee == (0.5, pytest.approx(1 - math.exp(-0.5)))
    assert a.decide({}) == [] and a.last.guarantee == (0.0, 0.0)  # nobody ranked: nothing observed


# --- the pool ---------------------------------------------------------------------------------------


def test_pool_best_uses_the_current_direction_not_the_bid_at_arrival():
    pool = Pool(OWNERS)
    early = entry("o1", 0, [1.0, 0.0], claimed=1.0, round=1)  # great under round 1's direction
    late = entry("o2", 5, [0.0, 1.0], claimed=0.2, round=2)  # a low bid when it came
    pool.add(early)
    pool.add(late)
    assert pool.best(np.array([1.0, 0.1])) is early
    assert pool.best(np.array([0.1, 1.0])) is late


def test_pool_ties_go_to_owner_index_then_serial():
    pool = Pool(OWNERS)
    for e in (entry("o3", 1, [1.0, 0.0]), entry("o2", 9, [1.0, 0.0]), entry("o2", 4, [1.0, 0.0])):
        pool.add(e)
    winner = pool.best(np.array([1.0, 0.0]))
    assert (winner.owner, winner.serial) == ("o2", 4)


def test_an_entry_removed_from_the_pool_is_never_returned_again():
    pool = Pool(OWNERS)
    star = entry("o1", 0, [5.0, 0.0])
    pool.add(star)
    pool.add(entry("o2", 0, [1.0, 0.0]))
    assert pool.best(np.array([1.0, 0.0])) is star
    pool.remove(star)
    for d in (np.array([1.0, 0.0]), np.array([1.0, 1.0]), np.array([2.0, -1.0])):
        assert pool.best(d) is not star
    assert star not in pool and len(pool) == 1
    with pytest.raises(KeyError):
        pool.remove(star)


def test_a_point_is_never_accepted_twice():
    pool = Pool(OWNERS)
    first = entry("o1", 3, [1.0, 0.0])
    pool.add(first)
    pool.remove(first)
    with pytest.raises(ValueError, match="never offered twice"):
        pool.add(entry("o1", 3, [1.0, 0.0], round=7))
    assert pool.seen("o1", "serial 3")


def test_an_empty_pool_has_no_best():
    assert Pool(OWNERS).best(np.array([1.0, 0.0])) is None


# --- verification -------------------------------------------------------------------------------------


def test_verify_accepts_a_matching_bid_within_tolerance():
    rng = np.random.default_rng(5)
    phi, direction = rng.normal(size=140), rng.normal(size=140)
    claimed = bid_value(phi, direction)
    assert verify(phi, claimed, direction, 1e-9)
    assert verify(phi, claimed * (1 + 1e-10), direction, 1e-9)


def test_verify_catches_a_mismatch():
    rng = np.random.default_rng(6)
    phi, direction = rng.normal(size=140), rng.normal(size=140)
    claimed = bid_value(phi, direction)
    assert not verify(phi, claimed + 1e-3, direction, 1e-9)
    assert not verify(phi, math.nan, direction, 1e-9)


def test_verify_uses_the_direction_of_the_round_the_point_was_bid_in():
    phi = np.array([1.0, 2.0])
    bid_round, now = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    claimed = bid_value(phi, bid_round)
    assert verify(phi, claimed, bid_round, 1e-9)
    assert not verify(phi, claimed, now, 1e-9)


def test_in_secure_mode_the_auction_draws_from_the_operating_system():
    bids = dict(zip(OWNERS, (5.0, 4.0, 3.0, 2.0, 1.0)))
    runs = []
    for _ in range(2):
        a = PrivAuction(owners=OWNERS, eps_auc=0.5, tau=NEVER, rng=make_rng(seed=1, secure=True), requests=2)
        runs.append([tuple(a.decide(bids)) for _ in range(50)])
        assert all(len(r) == 2 for r in runs[-1])
    assert runs[0] != runs[1]  # the same seed does not repeat: the seed is ignored
