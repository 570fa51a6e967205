"""An empirical two-sided audit of one round of the private auction, as an outside auditor would run it
(the exact audit over several rounds, which the older rules fail, is ``test_auction_rounds_audit.py``).

Two neighbouring worlds differ in one point of one other owner, so that owner's bid moves across the
audited owner's and the audited owner's rank moves by one place. For each world we draw 200,000
rounds through :meth:`PrivAuction.decide` and count how often the audited owner is asked. Both
events an owner observes are audited, "asked" and "not asked", in both directions: with 99%
Clopper–Pearson intervals, the smallest privacy loss the data allow is ln(lower bound of P[E | D] /
upper bound of P[E | D']). The composed (default) and two-sided auctions must never show a loss
above eps_auc in one round; the paper's auction, the negative control, must be caught at ranks 1–2,
where "not asked" has probability 0 on one side. The seeds are fixed, so the audit is reproducible.
"""

from __future__ import annotations

import math

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

DRAWS = 200_000
CONFIDENCE = 0.99
NEVER = 10**9  # a tau that never fires
OWNERS = ("o1", "o2", "o3", "o4", "o5")
BASE = {"o1": 0.9, "o2": 0.7, "o3": 0.5, "o4": 0.3, "o5": 0.1}


def clopper_pearson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    alpha = 1.0 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - alpha / 2, k + 1, n - k))
    return lo, hi


def times_asked(
    bids: dict[str, float], owner: str, *, rule: str, eps: float, seed: int, requests: int | str = 1
) -> int:
    auction = PrivAuction(
        owners=OWNERS, eps_auc=eps, tau=NEVER, rng=np.random.default_rng(seed), rule=rule, requests=requests
    )
    return sum(owner in auction.decide(bids) for _ in range(DRAWS))


def loss_lower_bound(k: int, k_prime: int) -> float:
    """The smallest |privacy loss| the counts allow, over both events and both directions."""
    bound = 0.0
    for a, b in ((k, k_prime), (DRAWS - k, DRAWS - k_prime)):  # asked, not asked
        lo_a, hi_a = clopper_pearson(a, DRAWS)
        lo_b, hi_b = clopper_pearson(b, DRAWS)
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
    At eps = 0.1 (the private quickstart's) every draw goes through ``decide``; at eps = 1 through
    the same schedule's sampler directly (the code ``decide`` calls), which is faster."""
    world, neighbour, audited = neighbours(rank)
    auction = PrivAuction(owners=OWNERS, eps_auc=eps, tau=NEVER, rng=np.random.default_rng(0), rule=rule)
    assert auction.ranking(world).index(audited) == rank - 1 and auction.ranking(neighbour).index(audited) == rank
    if through == "decide":
        k = times_asked(world, audited, rule=rule, eps=eps, seed=100 + rank)
        k_prime = times_asked(neighbour, audited, rule=rule, eps=eps, seed=200 + rank)
    else:
        draws = auction.schedule(len(OWNERS)).sample_many
        k = sum(rank - 1 in d for d in draws(np.random.default_rng(100 + rank), DRAWS))
        k_prime = sum(rank in d for d in draws(np.random.default_rng(200 + rank), DRAWS))
    assert loss_lower_bound(k, k_prime) <= eps, (k / DRAWS, k_prime / DRAWS)
    # and the frequencies are the schedule's, so the audit looked at what the ledger states
    schedule = auction.schedule(len(OWNERS))
    for count, r in ((k, rank - 1), (k_prime, rank)):
        lo, hi = clopper_pearson(count, DRAWS, 0.999)
        assert lo <= schedule.probabilities[r] <= hi


@pytest.mark.slow
def test_the_audit_catches_the_papers_auction_at_ranks_one_and_two():
    """The negative control: rank 1 is always asked, so "not asked" is 0 against 1 - e^-eps."""
    eps = 0.1
    world, neighbour, audited = neighbours(1)
    k = times_asked(world, audited, rule="paper", eps=eps, seed=301)
    k_prime = times_asked(neighbour, audited, rule="paper", eps=eps, seed=302)
    assert k == DRAWS  # never left out at rank 1
    assert loss_lower_bound(k, k_prime) > 5 * eps  # the outside audit found 8.6 at eps = 0.1


@pytest.mark.slow
def test_the_audit_catches_a_schedule_with_twice_the_eps_on_the_asked_side():
    """A second negative control, on the other event: a geometric schedule with ratio e^(2 eps)."""
    eps = 1.0
    world, neighbour, audited = neighbours(2)
    counts = []
    for bids, seed in ((world, 401), (neighbour, 402)):
        auction = PrivAuction(owners=OWNERS, eps_auc=2 * eps, tau=NEVER, rng=np.random.default_rng(seed), rule="paper")
        counts.append(sum(audited in auction.decide(bids) for _ in range(DRAWS)))
    assert loss_lower_bound(*counts) > eps


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
