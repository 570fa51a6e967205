"""Mechanisms and the RNG policy: checked parameters, exact distributions, exact costs, secure mode.

Statistical tests in simulation use fixed seeds, so they are deterministic; their thresholds
(p > 1e-3) are stated where used. Secure mode ignores seeds, so its statistical tests use
thresholds (p > 1e-6) that a correct sampler fails once in a million runs.
"""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from marketplace.privacy import mechanisms
from marketplace.privacy import rng as rng_module
from marketplace.privacy.mechanisms import (
    GRID_BITS,
    Exponential,
    Gaussian,
    GaussianZCDP,
    Laplace,
    ReportNoisyMax,
    analytic_gaussian_sigma,
    gaussian_delta,
)
from marketplace.privacy.rng import SecureGenerator, is_secure, make_rng

N = 20_000


def seeded(seed: int = 1) -> np.random.Generator:
    return make_rng(seed=seed, secure=False)


# --- the RNG policy ----------------------------------------------------------------------------


def test_same_seed_gives_same_stream():
    assert (make_rng(seed=3, secure=False).random(5) == make_rng(seed=3, secure=False).random(5)).all()


def test_seed_sequence_is_accepted():
    ss = np.random.SeedSequence(5)
    assert (
        make_rng(seed=ss, secure=False).random(3) == np.random.default_rng(np.random.SeedSequence(5)).random(3)
    ).all()


def test_simulation_without_seed_is_refused():
    with pytest.raises(
        ValueError, match="'seed' parameter of make_rng must be an int or a numpy.random.SeedSequence in simulation"
    ):
        make_rng(seed=None, secure=False)


def test_negative_seed_is_refused():
    with pytest.raises(ValueError, match="non-negative int. Got -1 instead"):
        make_rng(seed=-1, secure=False)


def test_string_seed_is_a_type_error():
    with pytest.raises(TypeError, match="Got str instead"):
        make_rng(seed="7", secure=False)


def test_make_rng_secure_flag_must_be_bool():
    with pytest.raises(TypeError, match="'secure' parameter of make_rng must be a bool"):
        make_rng(seed=1, secure="yes")


def test_secure_rng_ignores_the_seed():
    a, b = make_rng(seed=7, secure=True), make_rng(seed=7, secure=True)
    assert is_secure(a) and isinstance(a, np.random.Generator)
    assert not (a.random(4) == b.random(4)).all()


def test_secure_rng_does_not_repeat_when_copied():
    import copy
    import pickle

    a = make_rng(seed=None, secure=True)
    assert not (pickle.loads(pickle.dumps(a)).random(4) == copy.deepcopy(a).random(4)).all()


def test_seeded_rng_is_not_secure():
    assert not is_secure(seeded())


# --- parameter validation ----------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan])
def test_laplace_epsilon_must_be_positive_and_finite(bad):
    with pytest.raises(
        ValueError, match=r"The 'epsilon' parameter of Laplace must be a positive finite real number\. Got"
    ):
        Laplace(epsilon=bad, sensitivity=1.0, rng=seeded())


@pytest.mark.parametrize("bad", ["1", None, True, [1.0]])
def test_laplace_epsilon_must_be_a_real_number(bad):
    with pytest.raises(TypeError, match=r"The 'epsilon' parameter of Laplace must be a real number\. Got"):
        Laplace(epsilon=bad, sensitivity=1.0, rng=seeded())


def test_laplace_sensitivity_must_be_positive():
    with pytest.raises(
        ValueError,
        match="The 'sensitivity' parameter of Laplace must be a positive finite real number. Got 0.0 instead.",
    ):
        Laplace(epsilon=1.0, sensitivity=0.0, rng=seeded())


def test_numpy_scalars_are_accepted():
    assert Laplace(epsilon=np.float32(0.5), sensitivity=np.int64(2), rng=seeded()).scale == 4.0


def test_arguments_are_keyword_only():
    with pytest.raises(TypeError):
        Laplace(1.0, 1.0, seeded())  # type: ignore[misc]


def test_rng_must_be_a_generator_in_simulation():
    with pytest.raises(
        TypeError,
        match=(
            r"The 'rng' parameter of Laplace must be a numpy.random.Generator \(marketplace.privacy.rng.make_rng\). "
            r"Got int instead."
        ),
    ):
        Laplace(epsilon=1.0, sensitivity=1.0, rng=42)


def test_secure_generator_without_secure_flag_is_refused():
    with pytest.raises(ValueError, match="secure generator but secure=False"):
        Laplace(epsilon=1.0, sensitivity=1.0, rng=make_rng(seed=None, secure=True))


def test_exponential_secure_flag_must_be_bool():
    with pytest.raises(TypeError, match="The 'secure' parameter of Exponential must be a bool. Got int instead."):
        Exponential(epsilon=1.0, sensitivity=1.0, rng=seeded(), secure=1)


@pytest.mark.parametrize("bad", [0, 1, -0.1, 1.5])
def test_gaussian_delta_must_be_in_open_unit_interval(bad):
    with pytest.raises(ValueError, match=r"The 'delta' parameter of Gaussian must be in the open interval \(0, 1\)"):
        Gaussian(epsilon=1.0, delta=bad, sensitivity=1.0, rng=seeded())


def test_gaussian_delta_type():
    with pytest.raises(TypeError, match="The 'delta' parameter of Gaussian must be a real number. Got str instead."):
        Gaussian(epsilon=1.0, delta="1e-5", sensitivity=1.0, rng=seeded())


def test_zcdp_rho_must_be_positive():
    with pytest.raises(
        ValueError, match="The 'rho' parameter of GaussianZCDP must be a positive finite real number. Got -1 instead."
    ):
        GaussianZCDP(rho=-1, sensitivity=1.0, rng=seeded())


def test_randomise_refuses_nan():
    with pytest.raises(ValueError, match="must be finite"):
        Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded()).randomise([0.0, math.nan])


def test_randomise_refuses_text():
    with pytest.raises(TypeError, match="must be a real number or an array of them. Got str instead."):
        Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded()).randomise("zero")


@pytest.mark.parametrize("bad", [[], [[1.0, 2.0]], 3.0])
def test_selection_needs_a_non_empty_vector(bad):
    with pytest.raises(ValueError, match="must be a non-empty 1-D array"):
        Exponential(epsilon=1.0, sensitivity=1.0, rng=seeded()).randomise(bad)


def test_measurement_exists_only_in_secure_mode():
    with pytest.raises(ValueError, match="only in secure mode"):
        Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded()).measurement(3)


def test_module_doctests_pass():
    for module in (mechanisms, rng_module):
        assert doctest.testmod(module, optionflags=doctest.ELLIPSIS).failed == 0


# --- stated costs ------------------------------------------------------------------------------


def test_laplace_cost_is_pure_epsilon():
    lap = Laplace(epsilon=0.5, sensitivity=2.0, rng=seeded())
    assert lap.scale == 4.0
    assert lap.privacy_cost() == {
        "mechanism": "laplace",
        "epsilon": 0.5,
        "delta": 0.0,
        "rho": 0.125,
        "sensitivity": 2.0,
        "secure": False,
    }


def test_laplace_from_scale_states_sensitivity_over_scale():
    # docs/design.md §3's Lap(1/eps) measurement of a count of sensitivity 2 costs 2 eps, not eps.
    assert Laplace.from_scale(scale=1 / 0.01, sensitivity=2.0, rng=seeded()).epsilon == pytest.approx(0.02)


def test_exponential_from_weight_states_twice_beta_sensitivity():
    # docs/design.md §3's weights exp(eps psi) with psi of sensitivity 1 cost 2 eps, not eps.
    mech = Exponential.from_weight(beta=0.01, sensitivity=1.0, rng=seeded())
    assert mech.epsilon == pytest.approx(0.02)
    assert mech.probabilities([0.0, 1.0])[1] / mech.probabilities([0.0, 1.0])[0] == pytest.approx(math.exp(0.01))


def test_exponential_cost_includes_bounded_range_zcdp():
    assert Exponential(epsilon=1.0, sensitivity=1.0, rng=seeded()).privacy_cost()["rho"] == 0.125


def test_zcdp_gaussian_cost_is_rho_only():
    mech = GaussianZCDP(rho=0.5, sensitivity=3.0, rng=seeded())
    assert mech.sigma == 3.0
    assert (mech.epsilon, mech.delta, mech.rho) == (None, None, 0.5)


def test_analytic_sigma_meets_delta_exactly():
    sigma = analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert gaussian_delta(sigma=sigma, epsilon=1.0, sensitivity=1.0) <= 1e-5
    assert gaussian_delta(sigma=sigma * (1 - 1e-9), epsilon=1.0, sensitivity=1.0) > 1e-5
    assert sigma == pytest.approx(3.7306, abs=1e-4)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 0.9])
def test_analytic_sigma_is_below_classic(epsilon):
    classic = math.sqrt(2 * math.log(1.25 / 1e-6)) / epsilon
    assert analytic_gaussian_sigma(epsilon=epsilon, delta=1e-6, sensitivity=1.0) < classic


def test_analytic_sigma_scales_with_sensitivity():
    one = analytic_gaussian_sigma(epsilon=2.0, delta=1e-6, sensitivity=1.0)
    assert analytic_gaussian_sigma(epsilon=2.0, delta=1e-6, sensitivity=5.0) == pytest.approx(5 * one, rel=1e-12)


def test_gaussian_states_its_rho_and_calibration():
    mech = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=2.0, rng=seeded())
    assert mech.calibration.startswith("analytic")
    assert mech.rho == pytest.approx(4 / (2 * mech.sigma**2))
    assert mech.privacy_cost()["delta"] == 1e-5


# --- distributions in simulation (seeded: deterministic) ---------------------------------------


def test_scalar_in_float_out_and_shape_kept():
    lap = Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded())
    assert isinstance(lap.randomise(3), float)
    assert lap.randomise(np.zeros((2, 3))).shape == (2, 3)


def test_laplace_matches_its_distribution():
    lap = Laplace(epsilon=0.5, sensitivity=1.0, rng=seeded())
    draws = lap.randomise(np.full(N, 3.0))
    assert stats.kstest(draws, stats.laplace(loc=3.0, scale=2.0).cdf).pvalue > 1e-3
    assert abs(draws.mean() - 3.0) < 5 * math.sqrt(8.0 / N)  # 5 standard errors, variance 2 b^2 = 8
    assert draws.var() == pytest.approx(8.0, rel=0.05)


def test_gaussian_matches_its_distribution():
    gauss = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0, rng=seeded())
    draws = gauss.randomise(np.zeros(N))
    assert stats.kstest(draws, stats.norm(scale=gauss.sigma).cdf).pvalue > 1e-3


def test_zcdp_gaussian_matches_its_distribution():
    draws = GaussianZCDP(rho=0.125, sensitivity=1.0, rng=seeded()).randomise(np.zeros(N))
    assert stats.kstest(draws, stats.norm(scale=2.0).cdf).pvalue > 1e-3


def test_same_seed_same_noise():
    a = Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded(9)).randomise(np.zeros(5))
    b = Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded(9)).randomise(np.zeros(5))
    assert (a == b).all()


def test_different_seed_different_noise():
    a = Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded(9)).randomise(np.zeros(5))
    b = Laplace(epsilon=1.0, sensitivity=1.0, rng=seeded(10)).randomise(np.zeros(5))
    assert not (a == b).any()


# --- selection ---------------------------------------------------------------------------------

UTILITIES = np.array([0.0, 1.0, 2.0, 2.5])


def frequencies(mech, utilities, draws: int) -> np.ndarray:
    return np.bincount([mech.randomise(utilities) for _ in range(draws)], minlength=len(utilities))


def test_exponential_probabilities_are_the_softmax():
    mech = Exponential(epsilon=1.0, sensitivity=2.0, rng=seeded())
    weights = np.exp(UTILITIES / 4)
    assert np.allclose(mech.probabilities(UTILITIES), weights / weights.sum(), rtol=1e-14)


def test_exponential_is_stable_for_huge_utilities():
    mech = Exponential(epsilon=1.0, sensitivity=1.0, rng=seeded())
    probs = mech.probabilities([1e6, 1e6 + 1.0, -1e6])
    assert np.isfinite(probs).all() and probs.sum() == pytest.approx(1.0)
    assert mech.randomise([1e6, 1e6 + 1.0, -1e6]) in (0, 1)


def test_exponential_frequencies_match_exact_probabilities():
    mech = Exponential(epsilon=1.0, sensitivity=1.0, rng=seeded())
    observed = frequencies(mech, UTILITIES, N)
    assert stats.chisquare(observed, N * mech.probabilities(UTILITIES)).pvalue > 1e-3


@settings(max_examples=200, deadline=None)
@given(
    u=st.lists(st.floats(-50, 50), min_size=2, max_size=6),
    shift=st.lists(st.floats(-1, 1), min_size=6, max_size=6),
    epsilon=st.floats(0.01, 5),
)
def test_exponential_ratio_between_neighbours_is_at_most_exp_epsilon(u, shift, epsilon):
    mech = Exponential(epsilon=epsilon, sensitivity=1.0, rng=seeded())
    u = np.array(u)
    neighbour = u + np.array(shift[: len(u)])  # every utility moves by at most the sensitivity
    ratio = mech.probabilities(u) / mech.probabilities(neighbour)
    assert ratio.max() <= math.exp(epsilon) * (1 + 1e-9)


def test_exponential_ratio_bound_is_tight():
    """One utility up by the sensitivity, 999 down: the ratio approaches e^eps (why 2 Delta)."""
    mech = Exponential(epsilon=1.0, sensitivity=1.0, rng=seeded())
    u = np.zeros(1000)
    neighbour = np.full(1000, -1.0)
    neighbour[0] = 1.0
    ratio = mech.probabilities(neighbour)[0] / mech.probabilities(u)[0]
    assert 0.99 * math.e < ratio <= math.e


def test_exponential_empirical_ratio_stays_within_exp_epsilon():
    """Clopper–Pearson 99.9% intervals: no index's frequency ratio is significantly above e^eps."""
    mech = Exponential(epsilon=1.0, sensitivity=1.0, rng=seeded(4))
    u, neighbour = np.array([0.0, 0.0, 0.0]), np.array([-1.0, 1.0, 1.0])
    a, b = frequencies(mech, u, N), frequencies(mech, neighbour, N)
    for count_a, count_b in zip(a, b):
        low_a = stats.binomtest(int(count_a), N).proportion_ci(0.999).low
        high_b = stats.binomtest(int(count_b), N).proportion_ci(0.999).high
        low_b = stats.binomtest(int(count_b), N).proportion_ci(0.999).low
        high_a = stats.binomtest(int(count_a), N).proportion_ci(0.999).high
        assert low_a / high_b <= math.e and low_b / high_a <= math.e


def permute_and_flip_probabilities(utilities: np.ndarray, epsilon: float, sensitivity: float) -> np.ndarray:
    """Exact, by enumerating the orders: the item in turn is kept with probability
    exp(eps (u - max u) / (2 sensitivity)); the best item is always kept."""
    keep = np.exp(epsilon * (utilities - utilities.max()) / (2 * sensitivity))
    probs = np.zeros(len(utilities))
    orders = list(itertools.permutations(range(len(utilities))))
    for order in orders:
        reach = 1.0
        for i in order:
            probs[i] += reach * keep[i] / len(orders)
            reach *= 1 - keep[i]
    return probs


def test_report_noisy_max_matches_permute_and_flip():
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, rng=seeded())
    expected = permute_and_flip_probabilities(UTILITIES, 1.0, 1.0)
    assert stats.chisquare(frequencies(mech, UTILITIES, N), N * expected).pvalue > 1e-3


def test_report_noisy_max_cost():
    assert ReportNoisyMax(epsilon=0.3, sensitivity=1.0, rng=seeded()).privacy_cost()["epsilon"] == 0.3


# --- secure mode -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def secure_laplace() -> Laplace:
    return Laplace(epsilon=0.5, sensitivity=1.0, rng=None, secure=True)


def test_secure_mode_ignores_the_seed(secure_laplace):
    a = Laplace(epsilon=0.5, sensitivity=1.0, rng=seeded(5), secure=True).randomise(np.zeros(4))
    b = Laplace(epsilon=0.5, sensitivity=1.0, rng=seeded(5), secure=True).randomise(np.zeros(4))
    assert not (a == b).all()


def test_secure_laplace_matches_its_distribution(secure_laplace):
    draws = secure_laplace.randomise(np.full(N, 3.0))
    assert stats.kstest(draws, stats.laplace(loc=3.0, scale=2.0).cdf).pvalue > 1e-6


def test_secure_laplace_certifies_its_epsilon(secure_laplace):
    for size in (1, 7, 1000):
        assert secure_laplace.measurement(size).map(1.0) <= 0.5


def test_secure_grid_is_a_fine_power_of_two(secure_laplace):
    assert secure_laplace.grid == 2.0 ** (1 - GRID_BITS)  # scale 2 = 2^1


def test_secure_scalar_in_float_out(secure_laplace):
    assert isinstance(secure_laplace.randomise(0.25), float)


def sterbenz_possible_at_one(outputs: np.ndarray) -> np.ndarray:
    """For outputs with |y| < 1/2: could ``1.0 + n`` in float arithmetic give y, for ANY float n?

    If |fl(1 + n)| < 1/2 then n is in [-2, -1/2], so 1 + n is exact (Sterbenz) and a multiple of
    ulp(n) >= 2^-53. So y is possible at input 1 only if y is a multiple of 2^-53.
    """
    return np.mod(outputs, 2.0**-53) == 0


def test_naive_float_laplace_leaks_the_input():
    """Mironov 2012, shown to fail: most small outputs of x + Lap(b) at x = 0 cannot occur at x = 1."""
    rng = seeded()
    u = rng.random(N)
    naive = 0.0 + (-1.0) * np.sign(u - 0.5) * np.log(1 - 2 * np.abs(u - 0.5))  # textbook inverse CDF, b = 1
    small = naive[np.abs(naive) < 0.5]
    impossible_at_one = ~sterbenz_possible_at_one(small)
    assert impossible_at_one.mean() > 0.5
    numpy_draws = Laplace(epsilon=1.0, sensitivity=1.0, rng=rng).randomise(np.zeros(N))  # simulation mode
    assert (~sterbenz_possible_at_one(numpy_draws[np.abs(numpy_draws) < 0.5])).mean() > 0.5


def test_secure_laplace_outputs_at_zero_are_all_possible_at_one(secure_laplace):
    """Every secure output is a multiple of the grid 2^k (k <= 0): the exact value is 2^k (round(x / 2^k)
    + Z) with Z of full support on the integers, rounded to float, so the set of outputs is the same
    at x = 0 and x = 1. The naive sampler fails the same check (test above)."""
    at_zero = secure_laplace.randomise(np.zeros(N))
    at_one = secure_laplace.randomise(np.ones(N))
    grid = secure_laplace.grid
    assert grid <= 1.0
    assert (np.mod(at_zero, grid) == 0).all() and (np.mod(at_one, grid) == 0).all()
    small = at_zero[np.abs(at_zero) < 0.5]
    assert small.size > 0 and sterbenz_possible_at_one(small).all()


def test_naive_outputs_are_not_on_the_secure_grid(secure_laplace):
    draws = Laplace(epsilon=0.5, sensitivity=1.0, rng=seeded()).randomise(np.zeros(1000))
    assert (np.mod(draws, secure_laplace.grid) != 0).mean() > 0.99


def test_secure_gaussian_is_calibrated_through_zcdp():
    mech = Gaussian(epsilon=1.0, delta=1e-5, sensitivity=1.0, rng=None, secure=True)
    analytic = analytic_gaussian_sigma(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    assert mech.calibration.startswith("zcdp")
    assert analytic < mech.sigma < 1.15 * analytic
    assert mech.measurement(5).map(1.0) <= mech.rho
    draws = mech.randomise(np.zeros(N))
    assert stats.kstest(draws, stats.norm(scale=mech.sigma).cdf).pvalue > 1e-6
    assert (np.mod(draws, mech.grid) == 0).all()


def test_secure_zcdp_gaussian_certifies_rho():
    mech = GaussianZCDP(rho=0.5, sensitivity=2.0, rng=None, secure=True)
    assert mech.measurement(3).map(2.0) <= 0.5


def test_secure_exponential_frequencies_match_exact_probabilities():
    mech = Exponential(epsilon=1.0, sensitivity=1.0, rng=None, secure=True)
    draws = 4000
    assert stats.chisquare(frequencies(mech, UTILITIES, draws), draws * mech.probabilities(UTILITIES)).pvalue > 1e-6


def test_secure_report_noisy_max_matches_permute_and_flip():
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, rng=None, secure=True)
    draws = 4000
    expected = permute_and_flip_probabilities(UTILITIES, 1.0, 1.0)
    assert stats.chisquare(frequencies(mech, UTILITIES, draws), draws * expected).pvalue > 1e-6


def test_secure_rng_may_be_given_to_secure_mechanisms():
    mech = Laplace(epsilon=1.0, sensitivity=1.0, rng=make_rng(seed=None, secure=True), secure=True)
    assert mech.secure and isinstance(mech.rng, SecureGenerator)
