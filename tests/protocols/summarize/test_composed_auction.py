"""The composed auction rule (the default) against its definition: a set S of m ranked owners with
P[S] = E^{|S & Top_c|} / Z, E <= e^eps dyadic. Exact probabilities, the ratio bound for every set
and every move of one owner in exact rational arithmetic, goodness of fit of the sampler (through
the schedule and through ``PrivAuction.decide``, as the curator drives it), and bad input."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chisquare

from marketplace.protocols.summarize.auction import PrivAuction
from marketplace.protocols.summarize.config import SummarizePrivacy
from marketplace.protocols.summarize.private_curator import PrivateSchedule
from marketplace.protocols.summarize.request_schedule import MULT_BITS, composed_schedule, dyadic_exp, uniform_below

NEVER = 10**9


def owners(n: int) -> tuple[str, ...]:
    return tuple(f"o{i}" for i in range(n))


@pytest.mark.parametrize("eps", [1e-3, 0.1, 1.0, 5.0, 30.0])
@pytest.mark.parametrize("n, m, c", [(2, 1, 1), (5, 1, 1), (6, 2, 2), (6, 2, 4), (7, 3, 3), (9, 4, 2)])
def test_the_set_probabilities_are_the_definition_and_sum_to_one(n, m, c, eps):
    s = composed_schedule(n, eps, m, c)
    E = Fraction(s.multiplier, 1 << MULT_BITS)
    assert 1 <= E and E <= Fraction(math.exp(eps)) * (1 - Fraction(1, 2**51))  # a hair inside e^eps
    Z = sum(math.comb(c, k) * math.comb(n - c, m - k) * E**k for k in range(min(c, m) + 1))
    law = s.set_distribution()
    assert len(law) == math.comb(n, m) and sum(law.values()) == 1
    for S, p in law.items():
        assert p == E ** sum(r < c for r in S) / Z
    # the reported marginals are the law's (floats, for reports)
    for r in range(n):
        assert s.probabilities[r] == pytest.approx(float(sum(p for S, p in law.items() if r in S)), rel=1e-12)
    assert (s.eps, s.delta) == (min(eps, 30.0), 0.0)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
@pytest.mark.parametrize("n, m", [(3, 1), (5, 1), (5, 2), (5, 3)])
def test_moving_any_one_owner_changes_no_sets_probability_by_more_than_E(n, m, eps):
    """Through the real auction: every ranking of n owners, every owner moved to every other place
    (an arbitrary change of its bid), every set asked, P[S | D] <= E P[S | D'] exactly."""
    names = owners(n)
    auction = PrivAuction(owners=names, eps_auc=eps, tau=NEVER, rng=np.random.default_rng(0), requests=m)
    E = Fraction(dyadic_exp(eps), 1 << MULT_BITS)
    worst = Fraction(1)
    for order in itertools.permutations(names):
        bids = {o: float(n - i) for i, o in enumerate(order)}
        law = auction.outcomes(bids)
        for j in names:
            for new in [x + 0.5 for x in range(n + 1)]:
                moved = {**bids, j: float(new)}
                law2 = auction.outcomes(moved)
                assert set(law) == set(law2)
                for S in law:
                    assert law[S] <= E * law2[S] and law2[S] <= E * law[S]
                    worst = max(worst, law[S] / law2[S])
    assert worst == E  # the bound is attained: it is the rule's exact figure, not a loose one


@pytest.mark.parametrize("n, m, c, eps", [(6, 2, 2, 1.0), (8, 1, 1, 0.1), (5, 3, 2, 2.0)])
def test_the_sampler_fits_its_law(n, m, c, eps):
    """Chi-square goodness of fit over every set, 40,000 draws, a fixed seed."""
    s = composed_schedule(n, eps, m, c)
    law = s.set_distribution()
    sets = sorted(law)
    draws = s.sample_many(np.random.default_rng(11), 40_000)
    assert all(len(d) == m for d in draws)
    counts = dict.fromkeys(sets, 0)
    for d in draws:
        counts[tuple(d)] += 1
    expected = [float(law[S]) * len(draws) for S in sets]
    assert chisquare([counts[S] for S in sets], expected).pvalue > 1e-3


def test_decide_as_the_curator_drives_it_matches_the_exact_top_count():
    """The curator builds its auction from the scenario's settings; the default is the composed
    rule. Frequencies of |S & Top_c| over 30,000 rounds of ``decide`` against the exact law, each
    within 4.5 binomial standard deviations (a false alarm has probability < 1e-4 per count)."""
    privacy = SummarizePrivacy(enabled=True, eps_auction=1.0, requests_per_round=2, tau=NEVER)
    schedule = PrivateSchedule.resolve(privacy, features=10, rounds=10)
    assert schedule.auction == "composed"
    names = owners(6)
    auction = PrivAuction(
        owners=names,
        eps_auc=schedule.eps_auction,
        tau=schedule.tau,
        rng=np.random.default_rng(21),
        rule=schedule.auction,
        requests=schedule.requests_per_round,
    )
    bids = {o: float(-i) for i, o in enumerate(names)}  # o0 best
    top = {"o0", "o1"}
    rounds = 30_000
    counts = [0, 0, 0]
    for _ in range(rounds):
        counts[len(top & set(auction.decide(bids)))] += 1
    s = composed_schedule(6, 1.0, 2)
    exact = [
        sum((p for S, p in s.set_distribution().items() if sum(r < 2 for r in S) == k), Fraction(0)) for k in range(3)
    ]
    for k in range(3):
        p = float(exact[k])
        assert abs(counts[k] / rounds - p) <= 4.5 * math.sqrt(p * (1 - p) / rounds), (k, counts[k] / rounds, p)


def test_the_best_bidders_chance_is_at_most_E_over_E_plus_n_minus_1():
    for n, eps in ((16, 0.1), (64, 1.0), (256, 5.0)):
        s = composed_schedule(n, eps, 1)
        E = dyadic_exp(eps) / 2**64
        assert s.probabilities[0] == pytest.approx(E / (E + n - 1), rel=1e-12)


def test_edge_cases_are_the_everyone_and_uniform_rules():
    assert composed_schedule(3, 1.0, 3).rule == "everyone" and composed_schedule(2, 1.0, 5).probabilities == (1.0, 1.0)
    uniform = composed_schedule(4, 1e-9, 1)
    assert uniform.rule == "uniform" and (uniform.eps, uniform.delta) == (0.0, 0.0)
    assert composed_schedule(4, 50.0, 1).eps == 30.0


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"n": -1}, "'n'"),
        ({"n": 2.0}, "'n'"),
        ({"requests": 0}, "'requests'"),
        ({"requests": True}, "'requests'"),
        ({"eps": math.nan}, "'eps'"),
        ({"eps": -0.5}, "'eps'"),
        ({"top": 0}, "'top'"),
        ({"top": 7}, "'top'"),
    ],
)
def test_bad_input_is_refused_by_name(kwargs, field):
    args = {"n": 6, "eps": 1.0, "requests": 2} | kwargs
    with pytest.raises(ValueError, match=field):
        composed_schedule(**args)


def test_set_probability_and_uniform_below_refuse_bad_input():
    s = composed_schedule(4, 1.0, 1)
    with pytest.raises(ValueError, match="'ranks'"):
        s.set_probability([4])
    assert s.set_probability([0, 1]) == 0  # two ranks where one is asked
    with pytest.raises(ValueError, match="'n'"):
        uniform_below(np.random.default_rng(0), 0)
    with pytest.raises(ValueError, match="at most 20"):
        composed_schedule(21, 1.0, 1).set_distribution()


def test_uniform_below_is_uniform():
    rng = np.random.default_rng(3)
    draws = [uniform_below(rng, 5) for _ in range(20_000)]
    assert chisquare(np.bincount(draws, minlength=5)).pvalue > 1e-3


def test_advance_refuses_an_outcome_the_rule_cannot_give():
    auction = PrivAuction(owners=owners(3), eps_auc=1.0, tau=2, rng=np.random.default_rng(0))
    bids = {"o0": 3.0, "o1": 2.0, "o2": 1.0}
    auction.advance(bids, {"o0"})
    with pytest.raises(ValueError, match="'asked'"):
        auction.advance(bids, {"o0"})  # o1 and o2 are due now
    with pytest.raises(ValueError, match="'asked'"):
        auction.advance({"o0": 1.0, "o1": None, "o2": None}, {"o1"})  # o1 has no bid
