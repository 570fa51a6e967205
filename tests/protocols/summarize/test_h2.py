"""h2: quantization, MWEM over a product of marginals, warm start, and its privacy bookkeeping."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marketplace.privacy.accountant import BudgetExceeded, PrivacyLedger, Step
from marketplace.privacy.mechanisms import Exponential, Laplace
from marketplace.privacy.rng import make_rng
from marketplace.protocols.summarize.features import RandomFourierFeatures
from marketplace.protocols.summarize.h2 import (
    SENSITIVITY,
    IterationCost,
    MwemState,
    coordinate_sums,
    grid_size,
    grid_values,
    h2_release,
    mwem,
    quantize,
)

HUGE_EPS = 1e9  # noise scales of ~1e-9: MWEM becomes its deterministic greedy limit
from marketplace.privacy.neighbouring import replace_one  # noqa: E402

ROW = replace_one("a row")


def rng(seed: int = 0) -> np.random.Generator:
    return make_rng(seed=seed, secure=False)


def h1_features(rows: int, d: int, seed: int = 0) -> np.ndarray:
    """Realistic h1 features: a Gaussian blob through random Fourier features."""
    h1 = RandomFourierFeatures.draw(dim=5, n_features=d, gamma=0.1, seed=seed)
    return h1.transform(np.random.default_rng(seed).normal(0.5, 1.0, size=(rows, 5)))


def max_error(release: np.ndarray, features: np.ndarray) -> float:
    return float(np.abs(release - features.mean(axis=0)).max())


# --- the grid and quantization


def test_grid_has_2_over_eta_plus_1_points_from_minus_1_to_1_exactly():
    grid = grid_values(1 / 140)
    assert grid.size == grid_size(1 / 140) == 281
    assert grid[0] == -1.0 and grid[-1] == 1.0 and grid[140] == 0.0
    assert np.allclose(np.diff(grid), 1 / 140)


def test_quantize_returns_integer_grid_indices_and_keeps_grid_points_in_place():
    eta = 0.25
    on_grid = grid_values(eta)[None, :]  # 1 x 9, every grid point once
    indices = quantize(on_grid, eta, rng())
    assert indices.dtype == np.int32
    assert indices.tolist() == [list(range(9))]


def test_quantize_is_unbiased():
    eta, repeats = 0.1, 20_000
    values = np.random.default_rng(1).uniform(-1, 1, size=(4, 6))
    values[0, :3] = [-1.0, 1.0, 0.05]  # ends, and a midpoint between grid values
    rounded = grid_values(eta)[quantize(np.tile(values, (repeats, 1)), eta, rng(2))]
    means = rounded.reshape(repeats, 4, 6).mean(axis=0)
    # one rounding has standard deviation <= eta/2; 6 standard errors of the mean per entry
    assert np.abs(means - values).max() < 6 * (eta / 2) / math.sqrt(repeats)
    assert set(np.unique(rounded)) <= set(grid_values(eta).tolist())


def test_quantize_rounds_only_to_the_two_neighbouring_grid_points():
    eta = 0.5
    indices = quantize(np.full((1000, 1), 0.3), eta, rng())  # between 0 (index 2) and 0.5 (index 3)
    assert set(np.unique(indices).tolist()) == {2, 3}


def test_coordinate_sums_add_the_grid_values_of_each_column():
    eta = 0.5
    indices = np.array([[0, 4], [2, 3], [4, 4]], dtype=np.int32)  # values [-1, 1], [0, .5], [1, 1]
    assert coordinate_sums(indices, eta).tolist() == [0.0, 2.5]


# --- the state: a product of marginals


def test_state_starts_uniform_and_its_means_match_its_marginals():
    state = MwemState.uniform(5, eta=0.1)
    assert np.allclose(state.marginals, 1 / 21)
    moved = MwemState(eta=0.1, theta=np.array([-800.0, -3.0, 0.0, 1e-7, 40.0]), mean_sum=np.zeros(5), iterations=0)
    assert np.allclose(moved.marginals @ moved.grid, moved.mean, rtol=0, atol=1e-13)


def test_every_marginal_stays_a_probability_distribution_after_many_noisy_updates():
    # tiny eps and q: every measurement is wildly noisy, so theta is thrown far in both directions
    d, q = 7, 3
    state = MwemState.uniform(d, eta=1 / 7)
    sums = np.array([3.0, -3.0, 0.0, 1.0, -1.0, 2.5, -0.5])
    for seed in range(5):
        state, release = mwem(state, sums, q=q, T=400, eps=1e-3, rng=rng(seed))
        marginals = state.marginals
        assert np.all(np.isfinite(marginals)) and np.all(marginals >= 0)
        assert np.allclose(marginals.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert np.all(np.abs(release) <= math.sqrt(2 / d))
    assert np.abs(state.theta).max() > 100  # the updates did push the marginals to the edges


# --- convergence at huge eps


def test_last_iterate_error_shrinks_as_T_grows_at_huge_eps():
    features = h1_features(150, 40)
    errors = [
        max_error(h2_release(features, T=T, eps=HUGE_EPS, rng=rng(), release="last")[1], features)
        for T in (100, 1000, 4000)
    ]
    assert errors[0] > errors[1] > errors[2]
    # measured 0.073, 0.0060, 0.00048. The floor is the quantization noise: sd at most
    # sqrt(2/d) eta / (2 sqrt(q)) = 2.3e-4 per coordinate (d = 40, eta = 1/40, q = 150)
    assert errors[2] < 1e-3


def test_average_of_iterates_converges_too_but_much_more_slowly_than_the_last_iterate():
    features = h1_features(150, 40)
    errors = [
        max_error(h2_release(features, T=T, eps=HUGE_EPS, rng=rng(), release="average")[1], features)
        for T in (500, 2000, 8000)
    ]
    assert errors[0] > errors[1] > errors[2]  # measured 0.047, 0.016, 0.0041
    assert errors[2] < 6e-3
    # the early iterates stay in the average: its error decays about like 1/T, not geometrically
    assert errors[2] > 0.15 * errors[1]
    last = max_error(h2_release(features, T=2000, eps=HUGE_EPS, rng=rng(), release="last")[1], features)
    assert errors[1] > 5 * last  # measured 0.016 against 0.0013


# --- warm start


def test_warm_start_changes_nothing_when_the_data_is_unchanged_and_eps_is_huge():
    features = h1_features(150, 40)
    state, last = h2_release(features, T=3000, eps=HUGE_EPS, rng=rng(1), release="last")
    continued, last_again = h2_release(features, state=state, T=5, eps=HUGE_EPS, rng=rng(2), release="last")
    assert np.abs(last_again - last).max() < 1e-3  # only fresh quantization noise (~1e-4)
    average_before = state.embedding("average")
    average_after = continued.embedding("average")
    assert np.abs(average_after - average_before).max() < 1e-4  # 5 more iterates out of 3005


def test_warm_start_continues_the_run_instead_of_restarting_it():
    features = h1_features(60, 10)
    first, _ = h2_release(features, T=50, eps=1.0, rng=rng(1))
    second, release = h2_release(features, state=first, T=5, eps=1.0, rng=rng(2), release="average")
    assert second.iterations == 55
    assert np.allclose(release, second.embedding("average"))
    assert np.allclose(second.mean_sum[:], second.average_mean * 55)
    _, this_call = h2_release(features, state=first, T=5, eps=1.0, rng=rng(2), release="call_average")
    assert np.allclose(this_call * 5 + first.embedding("average") * 50, release * 55)


def test_mwem_leaves_the_given_state_unchanged():
    state = MwemState.uniform(4, eta=0.5)
    mwem(state, np.array([1.0, -2.0, 0.5, 3.0]), q=3, T=20, eps=1.0, rng=rng())
    assert state.iterations == 0 and not state.theta.any() and not state.mean_sum.any()
    with pytest.raises(ValueError):
        state.theta[0] = 1.0


# --- reproducibility


def test_the_same_seed_gives_the_same_release_and_another_seed_another():
    features = h1_features(80, 20)
    a = h2_release(features, T=300, eps=0.05, rng=rng(7))
    b = h2_release(features, T=300, eps=0.05, rng=rng(7))
    c = h2_release(features, T=300, eps=0.05, rng=rng(8))
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[0].theta, b[0].theta)
    assert not np.array_equal(a[1], c[1])


# --- privacy: the noise is the stated mechanisms', and the ledger records it


def test_selection_and_measurement_follow_the_stated_mechanisms():
    """One iteration many times: the chosen coordinate follows Exponential(eps/2, sensitivity 2)
    and mu - w(D, i) is Laplace with scale 2 / (eps/2)."""
    eps, q, repeats = 0.4, 5, 3000
    state = MwemState.uniform(3, eta=0.5)
    sums = np.array([5.0, -2.0, 0.0])  # psi = |0 - sums| = [5, 2, 0]
    generator = rng(3)
    chosen, noise = np.zeros(3), []
    for _ in range(repeats):
        new, _ = mwem(state, sums, q=q, T=1, eps=eps, rng=generator)
        i = int(np.flatnonzero(new.theta)[0])
        chosen[i] += 1
        noise.append(new.theta[i] * 2 * q - sums[i])  # theta_i = (mu - 0) / (2q)
    expected = Exponential(epsilon=eps / 2, sensitivity=SENSITIVITY, rng=rng()).probabilities([5.0, 2.0, 0.0])
    assert np.abs(chosen / repeats - expected).max() < 4 * math.sqrt(0.25 / repeats)
    scale = Laplace(epsilon=eps / 2, sensitivity=SENSITIVITY, rng=rng()).scale
    assert scale == 10.0
    assert abs(np.mean(np.abs(noise)) / scale - 1) < 6 / math.sqrt(repeats)  # E|Lap(b)| = b, sd b


def test_the_ledger_records_T_select_and_T_measure_steps_of_half_the_eps_each():
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, theorem="basic")
    h2_release(h1_features(30, 10), T=40, eps=0.01, rng=rng(), ledger=ledger)
    assert ledger.steps == (
        Step(mechanism="h2.select", eps=0.005, count=40),
        Step(mechanism="h2.measure", eps=0.005, count=40),
    )
    assert ledger.total().eps == pytest.approx(40 * 0.01)


def test_the_papers_literal_noise_is_recorded_at_its_honest_cost():
    """Weights exp(eps psi) and Lap(1/eps) with sensitivity 2 cost 4 eps and 2 eps."""
    assert IterationCost.of(0.01, "paper") == IterationCost(select=0.04, measure=0.02)
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, theorem="basic")
    h2_release(h1_features(30, 10), T=7, eps=0.01, rng=rng(), ledger=ledger, split="paper")
    assert [(s.mechanism, s.eps, s.count) for s in ledger.steps] == [("h2.select", 0.04, 7), ("h2.measure", 0.02, 7)]


def test_a_custom_split_shares_the_per_iteration_eps():
    cost = IterationCost.of(0.01, (0.25, 0.75))
    assert (cost.select, cost.measure) == (0.0025, 0.0075) and cost.total == pytest.approx(0.01)


def test_the_papers_D_v_setting_stays_within_its_stated_1_40_under_honest_accounting():
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, theorem="advanced", delta=0.01)
    h2_release(h1_features(100, 140), T=1656, eps=0.01, rng=rng(), ledger=ledger)
    assert ledger.total().eps <= 1.40  # 2 x 1656 steps of 0.005 compose to about 0.96


def test_a_spend_over_budget_is_refused_before_anything_runs():
    ledger = PrivacyLedger("owner-1", neighbouring=ROW, budget=(0.5, 0.0), theorem="basic")
    with pytest.raises(BudgetExceeded, match="h2.select"):
        h2_release(h1_features(30, 10), T=100, eps=0.01, rng=rng(), ledger=ledger)
    assert ledger.steps == ()


def test_every_release_option_is_computed_from_the_same_measurements():
    features = h1_features(30, 10)
    states = [
        h2_release(features, T=30, eps=0.5, rng=rng(4), release=r)[0] for r in ("average", "call_average", "last")
    ]
    assert all(np.array_equal(s.theta, states[0].theta) for s in states)


def test_secure_mode_draws_from_opendp_and_records_the_same_cost():
    ledger = PrivacyLedger("consumer:D_v", neighbouring=ROW, theorem="basic")
    state, release = h2_release(
        h1_features(20, 6), T=3, eps=1.0, rng=make_rng(seed=None, secure=True), secure=True, ledger=ledger
    )
    assert state.iterations == 3 and release.shape == (6,) and np.all(np.isfinite(release))
    assert ledger.total().eps == pytest.approx(3.0)


def test_a_seeded_generator_cannot_be_used_for_secure_noise_nor_a_secure_one_for_simulation():
    with pytest.raises(ValueError, match="secure generator"):
        h2_release(h1_features(5, 4), T=1, eps=1.0, rng=make_rng(seed=None, secure=True))


# --- bad parameters


@pytest.mark.parametrize(
    "eta, message",
    [
        (0.3, "2/eta an integer"),
        (0.0, "positive finite"),
        (2.0, r"in \(0, 1\]"),
        ("0.5", "must be a real number"),
    ],
)
def test_a_bad_eta_is_refused_with_what_to_do(eta, message):
    with pytest.raises((ValueError, TypeError), match=message):
        quantize(np.zeros((2, 2)), eta, rng())


def test_values_outside_minus_1_1_and_features_outside_the_h1_bound_are_refused():
    with pytest.raises(ValueError, match=r"'v' parameter of quantize must lie in \[-1, 1\]"):
        quantize(np.array([[1.5]]), 0.5, rng())
    with pytest.raises(ValueError, match=r"sqrt\(2/d\)"):
        h2_release(np.full((3, 8), 0.6), T=1, eps=1.0, rng=rng())


@pytest.mark.parametrize(
    "kwargs, kind, message",
    [
        ({"T": 0}, ValueError, "'T' parameter of mwem must be an integer >= 1"),
        ({"T": 2.5}, TypeError, "'T' parameter of mwem must be an integer"),
        ({"eps": 0.0}, ValueError, "'eps' parameter of mwem must be a positive finite"),
        ({"eps": math.inf}, ValueError, "'eps' parameter"),
        ({"split": (0.5, 0.6)}, ValueError, "'split' parameter of mwem must be a pair of positive shares summing to 1"),
        ({"split": [0.5, "0.5"]}, ValueError, "'split' parameter"),
        ({"split": (1.0, 0.0)}, ValueError, "'split' parameter"),
        ({"split": "literal"}, ValueError, "or 'paper'"),
        ({"release": "best"}, ValueError, "'release' parameter of mwem must be one of"),
        ({"q": 0}, ValueError, "'q' parameter of mwem must be an integer >= 1"),
        ({"q": 1}, ValueError, r"must lie in \[-q, q\]"),
        ({"sums": np.zeros(3)}, ValueError, r"shape \(4,\)"),
        ({"ledger": "D_v"}, TypeError, "'ledger' parameter of mwem must be a PrivacyLedger"),
        ({"rng": None}, TypeError, "'rng' parameter of Exponential"),
    ],
)
def test_bad_mwem_parameters_raise_precise_errors(kwargs, kind, message):
    arguments = {"sums": np.array([2.0, -1.0, 0.0, 0.5]), "q": 2, "T": 3, "eps": 1.0, "rng": rng()} | kwargs
    with pytest.raises(kind, match=message):
        mwem(MwemState.uniform(4, eta=0.5), **arguments)


def test_a_state_of_another_width_or_grid_is_refused():
    features = h1_features(5, 6)
    with pytest.raises(ValueError, match="must have d = 6"):
        h2_release(features, state=MwemState.uniform(7), T=1, eps=1.0, rng=rng())
    with pytest.raises(ValueError, match="must match the state's grid"):
        h2_release(features, state=MwemState.uniform(6, eta=0.5), eta=0.25, T=1, eps=1.0, rng=rng())
    with pytest.raises(TypeError, match="'state' parameter of mwem must be an MwemState"):
        mwem(np.zeros((6, 13)), np.zeros(6), q=1, T=1, eps=1.0, rng=rng())


def test_a_state_with_an_impossible_running_sum_is_refused():
    with pytest.raises(ValueError, match=r"'mean_sum' parameter of MwemState must lie in \[-iterations, iterations\]"):
        MwemState(eta=0.5, theta=np.zeros(2), mean_sum=np.array([3.0, 0.0]), iterations=2)
