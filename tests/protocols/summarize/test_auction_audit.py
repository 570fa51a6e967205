"""An empirical two-sided audit of one round of the private auction, as an outside auditor would run it
(the exact audit over several rounds, which the older rules fail, is ``test_auction_rounds_audit.py``).

Two neighbouring worlds differ in one point of one other owner, so that owner's bid moves across the
audited owner's and the audited owner's rank moves by one place. For each world we draw many rounds
through :meth:`PrivAuction.decide` and count how often the audited owner is asked. Both events an
owner observes are audited, "asked" and "not asked", in both directions: with 99% Clopper–Pearson
intervals, the smallest privacy loss the data allow is ln(lower bound of P[E | D] / upper bound of
P[E | D']). The composed (default) and two-sided auctions must never show a loss above eps_auc in
one round; the paper's auction, the negative control, must be caught at ranks 1–2, where "not
asked" has probability 0 on one side. The seeds are fixed, so the audit is reproducible.

**How many rounds, and what they give.** A false alarm needs one of the four one-sided 0.5% misses
of the two counts' intervals, so it has probability at most 2% per rank pair whatever the number of
rounds, even where the true loss is eps itself (ranks 1-2 of the composed rule). The number sets the
power: :data:`DRAWS` is the smallest round number (to a round figure) at which a schedule whose loss
at the pair is 1.5 eps_auc instead of eps_auc ("asked" e^{1.5 eps} times likelier on one side, at
the audited schedules' own probabilities) is found with probability >= 99% at every audited pair
(binomial simulation of the bound: >= 99.3% at eps = 0.1, >= 99.9% at eps = 1; a loss of 2 eps is
found every time). At eps = 1 that needs far fewer rounds than at eps = 0.1. The negative controls
use :data:`CONTROL_DRAWS`: the paper's auction shows a loss above 6 there, the doubled schedule one
above 1.8. The world D of every rank pair is the same (:data:`BASE`), so its rounds are drawn once
and shared (:func:`asked_counts`).
"""

from __future__ import annotations

import functools
import math
from collections import Counter

import numpy as np
import pytest
from scipy.stats import beta

from marketplace.protocols.summarize.auction import PrivAuction
from marketplace.protocols.summarize.request_schedule import (
    MULT_BITS,
    _check_two_sided,
    paper_schedule,
    two_sided_schedule,
)

DRAWS = {0.1: 150_000, 1.0: 30_000}
"""Rounds drawn per world at each audited eps_auc (see the module doc for the power they give)."""
CONTROL_DRAWS = 30_000
"""Rounds drawn per world for the negative controls (each is caught by a wide margin)."""
CONFIDENCE = 0.99
NEVER = 10**9  # a tau that never fires
OWNERS = ("o1", "o2", "o3", "o4", "o5")
BASE = {"o1": 0.9, "o2": 0.7, "o3": 0.5, "o4": 0.3, "o5": 0.1}


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    alpha = 1.0 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


@functools.cache
def asked_counts(bids: tuple[tuple[str, float], ...], *, rule: str, eps: float, seed: int, draws: int) -> Counter:
    """How often each owner is asked in ``draws`` rounds of ``decide`` under ``bids`` (one auction,
    its own seeded generator; tau never fires, so the rounds are independent and alike). Cached: the
    world D is shared by every rank pair, and each count is read for every owner at once."""
    auction = PrivAuction(owners=OWNERS, eps_auc=eps, tau=NEVER, rng=np.random.default_rng(seed), rule=rule)
    world = dict(bids)
    counts: Counter = Counter()
    for _ in range(draws):
        counts.update(auction.decide(world))
    return counts


@functools.cache
def rank_counts(*, rule: str, eps: float, seed: int, draws: int) -> Counter:
    """How often each rank (0-based) is asked in ``draws`` rounds of the schedule's own sampler (the
    code ``decide`` calls) for the five owners. Cached like :func:`asked_counts`."""
    auction = PrivAuction(owners=OWNERS, eps_auc=eps, tau=NEVER, rng=np.random.default_rng(0), rule=rule)
    counts: Counter = Counter()
    for ranks in auction.schedule(len(OWNERS)).sample_many(np.random.default_rng(seed), draws):
        counts.update(ranks)
    return counts


def frozen(bids: dict[str, float]) -> tuple[tuple[str, float], ...]:
    return tuple(sorted(bids.items()))


def loss_lower_bound(k: int, k_prime: int, draws: int) -> float:
    """The smallest |privacy loss| the counts (of ``draws`` rounds each) allow, over both events and
    both directions."""
    bound = 0.0
    for a, b in ((k, k_prime), (draws - k, draws - k_prime)):  # asked, not asked
        lo_a, hi_a = clopper_pearson(a, draws)
        lo_b, hi_b = clopper_pearson(b, draws)
        for lo, hi in ((lo_a, hi_b), (lo_b, hi_a)):
            if lo > 0:
                bound = max(bound, math.log(lo / hi))
    return bound


def neighbours(rank: int) -> tuple[dict[str, float], dict[str, float], str]:
    """Two worlds in which the owner at ``rank`` (1-based) in the first is at ``rank + 1`` in the
    second: the owner just below it raises its bid past it (one other owner's data changed)."""
    order = sorted(BASE, key=BASE.get, reverse=True)
    audited, below = order[rank - 1], order[rank]
    moved = dict(BASE)
    moved[below] = BASE[audited] + 0.05
    return BASE, moved, audited


RANK_PAIRS = [1, 2, 4]  # ranks 1-2, 2-3 and the last two (4-5)


@pytest.mark.slow
@pytest.mark.parametrize("rule", ["composed", "two_sided"])
@pytest.mark.parametrize("eps, through", [(0.1, "decide"), (1.0, "schedule")])
@pytest.mark.parametrize("rank", RANK_PAIRS)
def test_the_auctions_pass_the_one_round_two_sided_audit(rank, eps, through, rule):
    """One round, one owner's bit (the multi-round audit is in ``test_auction_rounds_audit.py``).
    At eps = 0.1 (the private quickstart's) every draw goes through ``decide``, D's rounds (seed 100)
    shared by the three rank pairs and D' drawn per pair (seed 200 + rank); at eps = 1 through the
    same schedule's sampler directly (the code ``decide`` calls), which is faster: one sample stands
    for D (seed 100) and one for D' (seed 200), the audited owner's rank being r in D and r + 1 in D'."""
    world, neighbour, audited = neighbours(rank)
    draws = DRAWS[eps]
    auction = PrivAuction(owners=OWNERS, eps_auc=eps, tau=NEVER, rng=np.random.default_rng(0), rule=rule)
    assert auction.ranking(world).index(audited) == rank - 1 and auction.ranking(neighbour).index(audited) == rank
    if through == "decide":
        k = asked_counts(frozen(world), rule=rule, eps=eps, seed=100, draws=draws)[audited]
        k_prime = asked_counts(frozen(neighbour), rule=rule, eps=eps, seed=200 + rank, draws=draws)[audited]
    else:
        k = rank_counts(rule=rule, eps=eps, seed=100, draws=draws)[rank - 1]
        k_prime = rank_counts(rule=rule, eps=eps, seed=200, draws=draws)[rank]
    assert loss_lower_bound(k, k_prime, draws) <= eps, (k / draws, k_prime / draws)
    # and the frequencies are the schedule's, so the audit looked at what the ledger states
    schedule = auction.schedule(len(OWNERS))
    for count, r in ((k, rank - 1), (k_prime, rank)):
        lo, hi = clopper_pearson(count, draws, 0.999)
        assert lo <= schedule.probabilities[r] <= hi


@pytest.mark.slow
def test_the_audit_catches_the_papers_auction_at_ranks_one_and_two():
    """The negative control: rank 1 is always asked, so "not asked" is 0 against 1 - e^-eps."""
    eps = 0.1
    world, neighbour, audited = neighbours(1)
    k = asked_counts(frozen(world), rule="paper", eps=eps, seed=301, draws=CONTROL_DRAWS)[audited]
    k_prime = asked_counts(frozen(neighbour), rule="paper", eps=eps, seed=302, draws=CONTROL_DRAWS)[audited]
    assert k == CONTROL_DRAWS  # never left out at rank 1
    # the outside audit found 8.6 at eps = 0.1 (200,000 rounds); about 6.3 here
    assert loss_lower_bound(k, k_prime, CONTROL_DRAWS) > 5 * eps


@pytest.mark.slow
def test_the_audit_catches_a_schedule_with_twice_the_eps_on_the_asked_side():
    """A second negative control, on the other event: a geometric schedule with ratio e^(2 eps)."""
    eps = 1.0
    world, neighbour, audited = neighbours(2)
    counts = [
        asked_counts(frozen(bids), rule="paper", eps=2 * eps, seed=seed, draws=CONTROL_DRAWS)[audited]
        for bids, seed in ((world, 401), (neighbour, 402))
    ]
    assert loss_lower_bound(*counts, CONTROL_DRAWS) > eps


# --- the schedule, exactly ------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 16, 64, 300])
@pytest.mark.parametrize("eps", [1e-5, 0.01, 0.1, 1.0, 5.0, 30.0])
@pytest.mark.parametrize("requests", [1, 2, 10])
def test_the_two_sided_schedule_satisfies_both_bounds_exactly_and_asks_exactly_m(n, eps, requests):
    schedule = two_sided_schedule(n, eps, requests)
    m = min(requests, n)
    if schedule.rule == "everyone":
        assert m == n and schedule.probabilities == (1.0,) * n
        return
    one = 1 << schedule.bits
    shares = [b - a for a, b in zip((0, *schedule.thresholds), schedule.thresholds)]
    assert schedule.thresholds[-1] == m * one  # exactly m owners asked per round
    assert _check_two_sided(shares, eps, one)  # the integers themselves, against e^eps
    assert all(s >= 1 for s in shares)  # no rank has probability 0: the bound holds at the tail too
    assert (schedule.eps, schedule.delta) == (min(eps, 30.0), 0.0)


def test_the_schedule_asks_the_requested_number_every_round():
    schedule = two_sided_schedule(16, 0.5, 3)
    draws = schedule.sample_many(np.random.default_rng(5), 5000)
    assert {len(d) for d in draws} == {3}
    assert all(len(set(d)) == 3 for d in draws)


def test_a_float_schedule_would_not_be_private_at_the_tail():
    """Why the schedule is exact: in floats, rank 800's probability at eps = 1 underflows to 0,
    and the ratio to rank 799 (e^-797, a subnormal float) is infinite."""
    floats = np.exp(-1.0 * np.arange(800))
    last = int(np.flatnonzero(floats > 0)[-1])
    assert last < 799 and floats[last + 1] == 0.0  # "asked" at rank last + 2 is impossible, at last + 1 it is not
    exact = two_sided_schedule(800, 1.0, 1)
    shares = [b - a for a, b in zip((0, *exact.thresholds), exact.thresholds)]
    assert min(shares) >= 1


def test_below_the_smallest_eps_the_schedule_is_uniform_and_zero_dp():
    schedule = two_sided_schedule(8, 1e-9, 2)
    assert schedule.rule == "uniform" and (schedule.eps, schedule.delta) == (0.0, 0.0)
    counts = np.zeros(8)
    for draw in schedule.sample_many(np.random.default_rng(1), 8000):
        counts[draw] += 1
    assert np.allclose(counts / 8000, 0.25, atol=0.03)


@pytest.mark.parametrize("eps", [0.1, 1.0])
@pytest.mark.parametrize("n", [2, 4, 64])
def test_the_papers_schedule_states_its_honest_delta(eps, n):
    schedule = paper_schedule(n, eps)
    assert schedule.eps == eps
    assert schedule.delta == pytest.approx(1 - math.exp(-eps), rel=1e-12)
    assert schedule.delta >= 1 - math.exp(-eps) - 2.0**-52  # from the coins' real probabilities


def test_the_number_asked_by_the_papers_coins_adds_no_delta_without_tau():
    """The paper's coins are independent, so the count of owners asked is random and an owner can
    time it; the joint law of (its bit, the count) has the same delta as the bit (exact check)."""

    def joint(ps, r):
        others = np.array([1.0])
        for i, p in enumerate(ps):
            if i != r:
                others = np.convolve(others, [1 - p, p])
        n = len(ps)
        out = np.zeros((2, n + 1))
        out[1, 1:] = ps[r] * others
        out[0, :n] = (1 - ps[r]) * others
        return out

    for eps in (0.1, 1.0):
        ps = np.exp(-eps * np.arange(6))
        worst = max(
            max(
                np.maximum(0, joint(ps, r) - math.exp(eps) * joint(ps, r + 1)).sum(),
                np.maximum(0, joint(ps, r + 1) - math.exp(eps) * joint(ps, r)).sum(),
            )
            for r in range(5)
        )
        assert worst == pytest.approx(1 - math.exp(-eps), rel=1e-9)


def test_multipliers_leave_room_for_the_check():
    """The chain is built a hair inside e^eps, so the exact check against e^eps has room."""
    from marketplace.protocols.summarize.request_schedule import _multipliers

    for eps in (1e-5, 0.1, 1.0, 30.0):
        C, c = _multipliers(eps)
        E = math.floor(math.exp(eps) * (1 - 2.0**-50) * (1 << MULT_BITS))
        assert C < E and c * E > (1 << (2 * MULT_BITS))
