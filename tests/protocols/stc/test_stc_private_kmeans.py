"""stc's PrivateKmeans baseline: DP Lloyd's algorithm on the source (protocols/stc/private_kmeans.py).

Statistical tests use fixed seeds, so they are deterministic; their acceptance bounds are stated
where used (Kolmogorov-Smirnov p > 1e-3, and variances within 5 standard errors).
"""

from __future__ import annotations

import dataclasses
import doctest
import importlib
import math

import numpy as np
import pytest
from scipy import stats
from test_stc_core import in_ball, seeded

from marketplace.privacy.rng import make_rng

pk_module = importlib.import_module("marketplace.protocols.stc.private_kmeans")  # the module: the function has its name


def lloyd(S: np.ndarray, centers: np.ndarray, iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """Plain Lloyd's by brute force (every point-centre distance); an empty cluster keeps its
    centre. The final centres, and which clusters were non-empty in the last round."""
    centers = centers.copy()
    for _ in range(iterations):
        labels = np.argmin(np.linalg.norm(S[:, None, :] - centers[None, :, :], axis=2), axis=1)
        nonempty = np.array([np.any(labels == j) for j in range(len(centers))])
        for j in np.flatnonzero(nonempty):
            centers[j] = S[labels == j].mean(axis=0)
    return centers, nonempty


def count_noise(release, m: int) -> np.ndarray:
    """The noise on the last round's counts when all m source points sit at one spot: one cluster
    holds all m (the one whose noisy count is near m, as the noise is << m), the others none."""
    exact = np.zeros(len(release.noisy_counts))
    exact[np.argmax(release.noisy_counts)] = m
    return release.noisy_counts - exact


def test_docstring_examples_hold():
    result = doctest.testmod(pk_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# --- calibration -----------------------------------------------------------------------------


def test_laplace_scale_is_iterations_times_sqrt_d_plus_1_over_eps():
    release = pk_module.private_kmeans(in_ball(200, 3, seed=1), 4, eps=3.0, iterations=6, rng=seeded())
    assert release.scale == pytest.approx(6 * (math.sqrt(3) + 1) / 3.0)
    assert release.sensitivity == pytest.approx(math.sqrt(3) + 1) and release.mechanism == "laplace"
    assert release.epsilon == 3.0 and release.round_epsilon == pytest.approx(0.5) and release.rho is None


def test_gaussian_sigma_is_sqrt_2_iterations_over_rho():
    release = pk_module.private_kmeans(in_ball(200, 8, seed=2), 4, rho=3.0, iterations=5, rng=seeded())
    assert release.scale == pytest.approx(math.sqrt(2 * 5 / 3.0))
    assert release.sensitivity == 2.0 and release.mechanism == "gaussian_zcdp"
    assert release.rho == 3.0 and release.round_rho == pytest.approx(0.6) and release.epsilon is None


def test_laplace_noise_on_the_counts_has_the_split_budgets_scale():
    m, k, eps, iterations = 1000, 10, 2.0, 4
    S = np.tile([[0.1, -0.2]], (m, 1))
    noise = np.concatenate(
        [
            count_noise(pk_module.private_kmeans(S, k, eps=eps, iterations=iterations, rng=seeded(s)), m)
            for s in range(300)
        ]
    )
    b = iterations * (math.sqrt(2) + 1) / eps
    assert stats.kstest(noise / b, "laplace").pvalue > 1e-3
    # Var Lap(b) = 2 b^2, and the sample variance of N draws has sd sqrt(5/N) of it (kurtosis 6)
    assert abs(noise.var() / (2 * b**2) - 1) < 5 * math.sqrt(5 / noise.size)


def test_gaussian_noise_on_the_counts_has_the_split_budgets_sigma():
    m, k, rho, iterations = 1000, 10, 1.0, 4
    S = np.tile([[0.1, -0.2]], (m, 1))
    noise = np.concatenate(
        [
            count_noise(pk_module.private_kmeans(S, k, rho=rho, iterations=iterations, rng=seeded(s)), m)
            for s in range(300)
        ]
    )
    sigma = math.sqrt(2 * iterations / rho)
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-3
    assert abs(noise.var() / sigma**2 - 1) < 5 * math.sqrt(2 / noise.size)


def test_one_point_changes_one_clusters_count_and_sum_within_the_calibrated_sensitivity():
    # with the centres fixed, removing a point changes one (count, sum) row: L1 <= 1 + sqrt(d)/2 and
    # L2 <= sqrt(5)/2 at norm <= 1/2, within the sqrt(d) + 1 and 2 each round's noise is calibrated for
    d = 3
    S, centers = in_ball(60, d, seed=3), in_ball(5, d, seed=4)
    full = pk_module._counts_and_sums(S, centers)
    for i in range(len(S)):
        diff = full - pk_module._counts_and_sums(np.delete(S, i, axis=0), centers)
        assert np.count_nonzero(np.abs(diff).sum(axis=1) > 1e-12) == 1
        assert np.abs(diff).sum() <= 1 + math.sqrt(d) / 2 + 1e-12 <= math.sqrt(d) + 1
        assert np.linalg.norm(diff) <= math.sqrt(5) / 2 + 1e-12 <= 2


# --- the algorithm ---------------------------------------------------------------------------


def test_the_start_is_uniform_in_the_ball_and_drawn_from_the_rng_before_any_noise():
    release = pk_module.private_kmeans(in_ball(50, 2, seed=5), 6, eps=1.0, rng=seeded(9))
    assert np.array_equal(release.initial_centers, pk_module.uniform_in_ball(6, 2, seeded(9)))
    start = pk_module.uniform_in_ball(20000, 2, seeded(10))
    radii = np.linalg.norm(start, axis=1)
    assert radii.max() <= 0.5
    # uniform in the disc of radius 1/2: P(r <= 1/4) = 1/4, and the mean is 0
    assert abs((radii <= 0.25).mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / 20000)
    assert np.abs(start.mean(axis=0)).max() < 5 * 0.25 / math.sqrt(20000)


def test_at_huge_eps_it_is_lloyds_algorithm_from_the_same_start():
    S = np.vstack([in_ball(15, 2, seed=6, radius=0.1) + c for c in ([0.3, 0.2], [-0.3, 0.1], [0.0, -0.35])])
    release = pk_module.private_kmeans(S, 4, eps=1e9, iterations=6, rng=seeded(11))
    expected, nonempty = lloyd(S, release.initial_centers, 6)
    assert np.allclose(release.all_centers, expected, atol=1e-6)
    assert np.array_equal(release.kept, np.flatnonzero(nonempty))
    assert np.allclose(release.centers, expected[nonempty], atol=1e-6)


def test_only_centres_whose_last_noisy_count_reached_1_are_kept_and_all_lie_in_the_ball():
    release = pk_module.private_kmeans(in_ball(300, 2, seed=7), 12, eps=0.5, iterations=5, rng=seeded(12))
    passed = release.noisy_counts >= 1
    assert 0 < passed.sum() < 12  # the noise is large enough that some centres are dropped
    assert np.array_equal(release.kept, np.flatnonzero(passed))
    assert np.array_equal(release.centers, release.all_centers[passed])
    assert np.linalg.norm(release.all_centers, axis=1).max() <= 0.5 + 1e-12


def test_same_seed_gives_the_same_centres_and_another_seed_others():
    S = in_ball(100, 2, seed=8)
    first = pk_module.private_kmeans(S, 5, rho=0.5, rng=seeded(3))
    again = pk_module.private_kmeans(S, 5, rho=0.5, rng=seeded(3))
    other = pk_module.private_kmeans(S, 5, rho=0.5, rng=seeded(4))
    assert np.array_equal(first.all_centers, again.all_centers)
    assert np.array_equal(first.noisy_counts, again.noisy_counts)
    assert not np.array_equal(first.all_centers, other.all_centers)


def test_the_release_is_a_frozen_record_of_its_cost():
    release = pk_module.private_kmeans(in_ball(40, 2, seed=9), 3, eps=0.5, rng=seeded())
    with pytest.raises(dataclasses.FrozenInstanceError):
        release.epsilon = 10.0
    with pytest.raises(ValueError):
        release.all_centers[0, 0] = 1.0  # read-only
    assert release.privacy_step().to_dict() == {"mechanism": "stc.private_kmeans", "eps": 0.5, "delta": 0.0, "count": 1}
    assert release.privacy_cost()["epsilon"] == 0.5 and release.iterations == 5


def test_secure_mode_takes_the_noise_from_opendp_and_records_it():
    release = pk_module.private_kmeans(
        in_ball(40, 2, seed=10), 3, eps=3.0, iterations=2, rng=make_rng(seed=None, secure=True), secure=True
    )
    assert release.secure and release.privacy_cost()["secure"] and release.all_centers.shape == (3, 2)


# --- bad input -------------------------------------------------------------------------------


def test_bad_input_is_refused_with_what_was_expected():
    S = in_ball(20, 2, seed=11)
    with pytest.raises(ValueError, match="private_kmeans needs exactly one of 'eps'.* and 'rho'"):
        pk_module.private_kmeans(S, 3, eps=1.0, rho=1.0, rng=seeded())
    with pytest.raises(ValueError, match="private_kmeans needs exactly one of 'eps'"):
        pk_module.private_kmeans(S, 3, rng=seeded())
    with pytest.raises(ValueError, match="The 'k' parameter of private_kmeans must be an integer >= 1. Got 0 instead."):
        pk_module.private_kmeans(S, 0, eps=1.0, rng=seeded())
    with pytest.raises(ValueError, match="The 'iterations' parameter of private_kmeans must be an integer >= 1"):
        pk_module.private_kmeans(S, 3, eps=1.0, iterations=0, rng=seeded())
    with pytest.raises(ValueError, match="The 'eps' parameter of private_kmeans must be a positive finite real"):
        pk_module.private_kmeans(S, 3, eps=-1.0, rng=seeded())
    with pytest.raises(ValueError, match="'source' parameter of private_kmeans must have every row of norm <= 0.5"):
        pk_module.private_kmeans(S * 3, 3, eps=1.0, rng=seeded())
    bad = S.copy()
    bad[4, 0] = np.nan
    with pytest.raises(ValueError, match="'source' parameter of private_kmeans must be finite. Got NaN"):
        pk_module.private_kmeans(bad, 3, eps=1.0, rng=seeded())
    with pytest.raises(TypeError, match="The 'rng' parameter of private_kmeans must be a numpy.random.Generator"):
        pk_module.private_kmeans(S, 3, eps=1.0, rng=None)
