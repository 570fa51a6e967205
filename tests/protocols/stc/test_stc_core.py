"""stc's pure core: public scaling, coreset, NAS and NNA releases, the objective and the solver.

Statistical tests use fixed seeds, so they are deterministic; their acceptance bounds are stated
where used (Kolmogorov-Smirnov p > 1e-3, and means within 5 standard errors).
"""

from __future__ import annotations

import dataclasses
import doctest
import itertools
import math

import numpy as np
import pytest
from scipy import stats

from marketplace.privacy.accountant import PrivacyLedger
from marketplace.privacy.neighbouring import replace_one
from marketplace.privacy.rng import make_rng
from marketplace.protocols import stc
from marketplace.protocols.stc import coreset as coreset_module
from marketplace.protocols.stc import release as release_module
from marketplace.protocols.stc import scaling as scaling_module
from marketplace.protocols.stc import solver as solver_module
from marketplace.protocols.stc import synthetic as synthetic_module

ROW = replace_one("a row")


def seeded(seed: int = 0) -> np.random.Generator:
    return make_rng(seed=seed, secure=False)


def in_ball(rows: int, d: int, seed: int = 0, radius: float = 0.5) -> np.ndarray:
    """Points spread through the ball of radius 1/2, some of them on its surface."""
    data = np.random.default_rng(seed)
    X = data.normal(size=(rows, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X *= radius * data.uniform(0, 1, size=(rows, 1)) ** (1 / d)
    X[: rows // 5] *= radius / np.linalg.norm(X[: rows // 5], axis=1, keepdims=True)
    return X


def exact_nna(S: np.ndarray, T: np.ndarray) -> np.ndarray:
    """(count, sum) of every h_x by brute force (all source-target distances): n x (d + 1)."""
    labels = np.argmin(np.linalg.norm(S[:, None, :] - T[None, :, :], axis=2), axis=1)
    out = np.zeros((T.shape[0], S.shape[1] + 1))
    np.add.at(out, labels, np.column_stack([np.ones(len(S)), S]))
    return out


def brute_cost(T: np.ndarray, centers: np.ndarray, weights: np.ndarray | None = None) -> float:
    w = np.ones(len(T)) if weights is None else weights
    return float(sum(wi * min(np.linalg.norm(x - c) for c in centers) for wi, x in zip(w, T)) / w.sum())


# --- the docstring examples ------------------------------------------------------------------


@pytest.mark.parametrize("module", [coreset_module, release_module, scaling_module, solver_module, synthetic_module])
def test_docstring_examples_hold(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


# --- public scaling --------------------------------------------------------------------------


def test_scaling_puts_points_within_the_public_bound_in_the_half_ball():
    X = np.random.default_rng(1).uniform(-3, 5, size=(500, 4))
    scaling = stc.public_scaling(bound=math.sqrt(4 * 4**2), center=1.0)  # |x_j - 1| <= 4
    Y = scaling.apply(X)
    assert np.linalg.norm(Y, axis=1).max() <= stc.RADIUS
    assert np.allclose(scaling.invert(Y), X)


def test_scaling_multiplies_every_distance_by_the_public_factor():
    X = np.random.default_rng(2).uniform(0, 1, size=(30, 3))
    scaling = stc.PublicScaling.for_box([0, 0, 0], [1, 1, 1])
    Y = scaling.apply(X)
    assert np.allclose(
        np.linalg.norm(Y[:, None] - Y[None], axis=2), scaling.factor * np.linalg.norm(X[:, None] - X[None], axis=2)
    )


def test_scaling_refuses_points_beyond_the_bound_unless_told_to_clip():
    scaling = stc.public_scaling(bound=1.0)
    X = np.array([[0.5, 0.0], [3.0, 4.0]])
    with pytest.raises(ValueError, match="1 of the 2 points .* outside the public bound"):
        scaling.apply(X)
    Y = scaling.apply(X, clip=True)
    assert np.allclose(Y, [[0.25, 0.0], [0.3, 0.4]])  # the far point lands on the sphere, same direction


def test_clipping_a_point_far_beyond_float_range_keeps_its_direction_without_overflow():
    """Squaring 1e200 overflows: a naive norm is inf, and the point used to land on the centre."""
    import warnings

    scaling = stc.public_scaling(bound=1e-3)  # factor 500: 1e306 * 500 overflows too
    X = np.array([[1e200, 1e200], [-1e306, 0.0], [3e-4, 4e-4], [0.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Y = scaling.apply(X, clip=True)
    half = 0.5 / np.sqrt(2)
    assert np.allclose(Y, [[half, half], [-0.5, 0.0], [0.15, 0.2], [0.0, 0.0]])
    with pytest.raises(ValueError, match="2 of the 4 points"):
        scaling.apply(X)


def test_releases_refuse_a_source_that_was_not_scaled():
    S, T = np.array([[0.6, 0.0], [0.0, 0.1]]), np.zeros((2, 2))
    with pytest.raises(ValueError, match="'source' parameter of nna_release must have every row of norm <= 0.5"):
        stc.nna_release(S, T, eps=1.0, rng=seeded())
    with pytest.raises(ValueError, match="'source' parameter of nas_release must have every row of norm <= 0.5"):
        stc.nas_release(S, T, t=1, eps=1.0, rng=seeded())


# --- the coreset -----------------------------------------------------------------------------


@pytest.mark.parametrize("d, C", [(2, 0.05), (2, 0.2), (5, 0.3)])
def test_coreset_cells_have_diameter_at_most_C_and_represent_every_target_point_once(d, C):
    T = np.vstack([in_ball(1500, d, seed=d), np.repeat(in_ball(5, d, seed=9), 20, axis=0)])  # with duplicates
    core = stc.kdtree_coreset(T, C=C)
    n = T.shape[0]
    assert core.assignment.shape == (n,) and core.weights.sum() == n
    assert np.array_equal(np.bincount(core.assignment, minlength=core.size), core.weights)
    assert np.array_equal(core.assignment[core.indices], np.arange(core.size))  # a representative is in its cell
    assert np.array_equal(core.points, T[core.indices])
    for cell in range(core.size):
        members = T[core.assignment == cell]
        pairwise = np.linalg.norm(members[:, None] - members[None], axis=2).max()
        assert pairwise <= core.diameters[cell] + 1e-12 <= C + 1e-12
    assert np.linalg.norm(T - core.points[core.assignment], axis=1).max() <= C
    assert core.size < n


def test_coreset_of_identical_points_is_one_cell():
    core = stc.kdtree_coreset(np.full((50, 3), 0.1), C=0.05)
    assert core.size == 1 and core.weights.tolist() == [50] and core.diameters.tolist() == [0.0]


# --- NNA -------------------------------------------------------------------------------------


def test_nna_partition_puts_each_source_point_in_exactly_the_h_x_of_its_nearest_target():
    S, T = in_ball(700, 3, seed=1), in_ball(120, 3, seed=2)
    labels = stc.nna_partition(S, T)
    brute = np.argmin(np.linalg.norm(S[:, None] - T[None], axis=2), axis=1)
    assert labels.shape == (700,) and np.array_equal(labels, brute)
    members = [set(np.flatnonzero(labels == x).tolist()) for x in range(120)]
    assert sum(len(h) for h in members) == 700 and set().union(*members) == set(range(700))


def test_nna_at_huge_eps_keeps_the_exact_mean_of_every_nonempty_h_x():
    S, T = in_ball(300, 2, seed=3), in_ball(80, 2, seed=4)
    release = stc.nna_release(S, T, eps=1e9, threshold=0.5, rng=seeded())
    exact = exact_nna(S, T)
    nonempty = np.flatnonzero(exact[:, 0] > 0)
    assert np.array_equal(release.kept, nonempty)
    assert np.allclose(release.centers, exact[nonempty, 1:] / exact[nonempty, :1], atol=1e-6)


def test_nna_keeps_exactly_the_noisy_means_whose_noisy_count_reaches_the_threshold():
    S, T = in_ball(400, 4, seed=5), in_ball(150, 4, seed=6)
    release = stc.nna_release(S, T, eps=1.0, gamma=0.1, rng=seeded(7))
    assert release.threshold == pytest.approx(1 + math.log((math.sqrt(4) + 1) / 0.1) / 1.0)
    assert release.threshold == stc.nna_threshold(d=4, gamma=0.1, eps=1.0)
    passed = release.noisy_counts >= release.threshold
    assert np.array_equal(release.kept, np.flatnonzero(passed)) and 0 < passed.sum() < 150
    assert np.allclose(release.centers, release.noisy_sums[passed] / release.noisy_counts[passed, None])


def test_nna_zcdp_threshold_is_the_one_sided_gaussian_tail_of_its_noise():
    assert stc.nna_threshold(d=8, gamma=0.05, rho=3.0) == pytest.approx(
        1 + math.sqrt(2 / 3.0) * math.sqrt(2 * math.log(1 / 0.05))
    )


def test_nna_laplace_noise_has_scale_sqrt_d_plus_1_over_eps():
    S, T, eps = in_ball(2000, 2, seed=8), in_ball(1500, 2, seed=9), 3.0
    release = stc.nna_release(S, T, eps=eps, rng=seeded(10))
    b = (math.sqrt(2) + 1) / eps
    assert release.scale == pytest.approx(b) and release.sensitivity == pytest.approx(math.sqrt(2) + 1)
    noise = (np.column_stack([release.noisy_counts, release.noisy_sums]) - exact_nna(S, T)).ravel()
    assert stats.kstest(noise / b, "laplace").pvalue > 1e-3
    # E|Lap(b)| = b and sd |Lap(b)| = b: the mean of N draws is within 5 b / sqrt(N) of b
    assert abs(np.abs(noise).mean() - b) < 5 * b / math.sqrt(noise.size)


def test_nna_gaussian_noise_has_sigma_sqrt_2_over_rho():
    S, T, rho = in_ball(2000, 8, seed=11), in_ball(1000, 8, seed=12), 3.0
    release = stc.nna_release(S, T, rho=rho, rng=seeded(13))
    sigma = math.sqrt(2 / rho)
    assert release.scale == pytest.approx(sigma) and release.rho == rho and release.epsilon is None
    noise = (np.column_stack([release.noisy_counts, release.noisy_sums]) - exact_nna(S, T)).ravel()
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-3
    # E[Z^2] = sigma^2 and sd Z^2 = sqrt(2) sigma^2
    assert abs((noise**2).mean() - sigma**2) < 5 * math.sqrt(2) * sigma**2 / math.sqrt(noise.size)


def test_nna_sensitivity_holds_on_every_neighbouring_dataset():
    # removing any one point changes one (count, sum) row, by 1 and the point: L1 <= 1 + sqrt(d)/2
    # and L2 <= sqrt(5)/2 at norm <= 1/2, within the sqrt(d) + 1 and 2 the noise is calibrated for
    d = 3
    S, T = in_ball(60, d, seed=14), in_ball(12, d, seed=15)
    full = exact_nna(S, T)
    for i in range(len(S)):
        diff = full - exact_nna(np.delete(S, i, axis=0), T)
        assert np.count_nonzero(np.abs(diff).sum(axis=1) > 1e-12) == 1
        assert np.abs(diff).sum() <= 1 + math.sqrt(d) / 2 + 1e-12 <= math.sqrt(d) + 1
        assert np.linalg.norm(diff) <= math.sqrt(5) / 2 + 1e-12 <= release_module.NNA_L2_SENSITIVITY


# --- NAS -------------------------------------------------------------------------------------


def test_t_nearest_means_match_brute_force():
    S, T, t = in_ball(200, 3, seed=16), in_ball(40, 3, seed=17), 7
    order = np.argsort(np.linalg.norm(T[:, None] - S[None], axis=2), axis=1)[:, :t]
    assert np.allclose(stc.t_nearest_means(S, T, t), S[order].mean(axis=1))


def tied_source(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Eight source points on a circle around the one target point (all tied), more outside."""
    angles = np.arange(8) * np.pi / 4
    outside = in_ball(40, 2, seed=seed)
    outside = outside[np.linalg.norm(outside, axis=1) > 0.45]
    return np.vstack([0.4 * np.column_stack([np.cos(angles), np.sin(angles)]), outside]), np.zeros((1, 2))


def nas_neighbours(S: np.ndarray, T: np.ndarray, t: int, seed: int = 0) -> list[np.ndarray]:
    """t_nearest_means on S minus each point, and on S plus a point inserted at a random row (fresh
    points and duplicates), minus its value on S."""
    data = np.random.default_rng(seed)
    base = stc.t_nearest_means(S, T, t)
    extra = np.vstack([in_ball(20, S.shape[1], seed=99), S[:5]])
    removed = [stc.t_nearest_means(np.delete(S, i, axis=0), T, t) - base for i in range(len(S))]
    added = [stc.t_nearest_means(np.insert(S, data.integers(0, len(S) + 1), s, axis=0), T, t) - base for s in extra]
    return removed + added


@pytest.mark.parametrize("tied", [False, True])
def test_nas_sensitivity_holds_on_neighbouring_datasets(tied):
    # each average moves by <= 1/t in L2 (so sqrt(d)/t in L1), the whole release by <= n sqrt(d)/t
    # in L1 and sqrt(n)/t in L2
    d, t = 2, 3
    S, T = tied_source(seed=18) if tied else (in_ball(40, d, seed=18), in_ball(15, d, seed=19))
    n = T.shape[0]
    for diff in nas_neighbours(S, T, t):
        assert np.linalg.norm(diff, axis=1).max() <= 1 / t + 1e-12
        assert np.abs(diff).sum() <= n * math.sqrt(d) / t + 1e-12
        assert np.linalg.norm(diff) <= math.sqrt(n) / t + 1e-12


def test_t_nearest_means_depend_on_the_source_as_a_set_even_with_ties():
    # the one-point argument needs the t nearest to be a function of the set: ties at the t-th
    # distance follow a fixed order. Left to the KD-tree, reordering the rows of this source moves
    # the average of the 3 nearest by up to 0.49, more than the 1/t the noise is calibrated for.
    S, T = tied_source(seed=20)
    base = stc.t_nearest_means(S, T, 3)
    data = np.random.default_rng(21)
    for _ in range(50):
        assert np.array_equal(stc.t_nearest_means(S[data.permutation(len(S))], T, 3), base)


def test_nas_laplace_noise_has_scale_n_sqrt_d_over_t_eps():
    S, T, t, eps = in_ball(600, 2, seed=20), in_ball(2000, 2, seed=21), 150, 3.0
    release = stc.nas_release(S, T, t=t, eps=eps, rng=seeded(22))
    b = 2000 * math.sqrt(2) / (t * eps)
    assert release.scale == pytest.approx(b) and release.epsilon == eps and release.t == t
    noise = (release.centers - stc.t_nearest_means(S, T, t)).ravel()
    assert stats.kstest(noise / b, "laplace").pvalue > 1e-3
    assert abs(np.abs(noise).mean() - b) < 5 * b / math.sqrt(noise.size)


def test_nas_gaussian_noise_has_sigma_sqrt_n_over_2_rho_over_t():
    S, T, t, rho = in_ball(600, 8, seed=23), in_ball(800, 8, seed=24), 150, 3.0
    release = stc.nas_release(S, T, t=t, rho=rho, rng=seeded(25))
    sigma = math.sqrt(800 / (2 * rho)) / t
    assert release.scale == pytest.approx(sigma) and release.mechanism == "gaussian_zcdp"
    noise = (release.centers - stc.t_nearest_means(S, T, t)).ravel()
    assert stats.kstest(noise / sigma, "norm").pvalue > 1e-3
    assert abs((noise**2).mean() - sigma**2) < 5 * math.sqrt(2) * sigma**2 / math.sqrt(noise.size)


def test_releases_are_frozen_records_of_their_privacy_cost():
    S, T = in_ball(50, 2, seed=26), in_ball(10, 2, seed=27)
    nna = stc.nna_release(S, T, eps=0.5, rng=seeded())
    nas = stc.nas_release(S, T, t=5, rho=0.25, rng=seeded())
    with pytest.raises(dataclasses.FrozenInstanceError):
        nna.epsilon = 10.0
    with pytest.raises(ValueError):
        nas.centers[0, 0] = 1.0  # read-only
    assert nna.privacy_step().to_dict() == {"mechanism": "stc.nna", "eps": 0.5, "delta": 0.0, "count": 1}
    assert nas.privacy_step().to_dict() == {"mechanism": "stc.nas", "rho": 0.25, "count": 1}
    ledger = PrivacyLedger("owner-1", neighbouring=ROW, theorem="basic")
    assert ledger.spend(nna.epsilon, mechanism="stc.nna").eps == 0.5
    assert nna.privacy_cost()["epsilon"] == 0.5 and nas.privacy_cost()["rho"] == 0.25


def test_secure_mode_takes_the_noise_from_opendp_and_records_it():
    S, T = in_ball(40, 2, seed=38), in_ball(8, 2, seed=39)
    release = stc.nna_release(S, T, eps=3.0, rng=make_rng(seed=None, secure=True), secure=True)
    assert release.secure and release.privacy_cost()["secure"] and release.noisy_sums.shape == (8, 2)
    assert np.abs(release.noisy_counts - exact_nna(S, T)[:, 0]).max() > 0


def test_same_seed_gives_the_same_release():
    S, T = in_ball(80, 2, seed=28), in_ball(20, 2, seed=29)
    first = stc.nna_release(S, T, eps=1.0, rng=seeded(3))
    again = stc.nna_release(S, T, eps=1.0, rng=seeded(3))
    assert np.array_equal(first.noisy_sums, again.noisy_sums) and np.array_equal(first.kept, again.kept)


# --- the objective ---------------------------------------------------------------------------


def test_stc_cost_is_the_mean_distance_to_the_nearest_centre():
    data = np.random.default_rng(30)
    T, centers, w = data.uniform(size=(25, 3)), data.uniform(size=(6, 3)), data.uniform(0, 2, size=25)
    assert stc.stc_cost(T, centers) == pytest.approx(brute_cost(T, centers), rel=1e-12)
    assert stc.stc_cost(T, centers, weights=w) == pytest.approx(brute_cost(T, centers, w), rel=1e-12)
    S, chosen = centers[:4], np.array([3, 11])
    assert stc.selection_cost(T, S, chosen) == pytest.approx(brute_cost(T, np.vstack([S, T[chosen]])), rel=1e-12)


# --- the solver ------------------------------------------------------------------------------


def tiny_instances(count: int):
    data = np.random.default_rng(31)
    for case in range(count):
        n, d = int(data.integers(3, 9)), int(data.integers(1, 4))
        T = data.uniform(-0.5, 0.5, size=(n, d))
        F = data.uniform(-0.5, 0.5, size=(int(data.integers(0, 3)), d))
        w = data.uniform(0, 2, size=n) if case % 3 == 0 else None
        yield T, F, w


def brute_optimum(T, F, w, k) -> float:
    return min(brute_cost(T, np.vstack([F, T[list(c)]]), w) for c in itertools.combinations(range(len(T)), k))


def test_solver_finds_the_optimum_on_tiny_cases():
    for T, F, w in tiny_instances(40):
        for k in (1, 2):
            solution = stc.solve_stc(T, F, k, weights=w)
            assert solution.cost == pytest.approx(brute_optimum(T, F, w, k), rel=1e-9, abs=1e-12)
            assert solution.cost == pytest.approx(stc.selection_cost(T, F, solution.indices, weights=w), rel=1e-12)


def test_greedy_and_swaps_alone_are_exact_for_k_1_and_reach_a_swap_local_optimum_for_k_2():
    # k-medoids is NP-hard: local search can stop in a local optimum for k >= 2 (in 27 of 900
    # random tiny cases it did); what it guarantees is that no single swap improves the result
    for T, F, w in tiny_instances(40):
        one = stc.solve_stc(T, F, 1, weights=w, exhaustive_limit=0)
        assert one.method == "greedy+swap"
        assert one.cost == pytest.approx(brute_optimum(T, F, w, 1), rel=1e-9, abs=1e-12)
        two = stc.solve_stc(T, F, 2, weights=w, exhaustive_limit=0)
        assert two.cost <= two.greedy_cost + 1e-12
        chosen = set(two.indices.tolist())
        for out, into in itertools.product(chosen, set(range(len(T))) - chosen):
            swapped = np.array(sorted(chosen - {out} | {into}))
            assert stc.selection_cost(T, F, swapped, weights=w) >= two.cost - 1e-12


def test_float32_blocks_still_end_at_a_swap_local_optimum(monkeypatch):
    monkeypatch.setattr(solver_module, "FLOAT32_ABOVE", 0)  # the large-problem path, on a small problem
    data = np.random.default_rng(32)
    T, F = data.normal(0, 0.1, size=(120, 2)), data.normal(0.1, 0.1, size=(30, 2))
    solution = stc.solve_stc(T, F, 4, exhaustive_limit=0)
    assert solution.converged and solution.swaps > 0
    chosen = set(solution.indices.tolist())
    best_swap = min(
        stc.selection_cost(T, F, np.array(sorted(chosen - {out} | {into})))
        for out in chosen
        for into in set(range(120)) - chosen
    )
    assert best_swap >= solution.cost * (1 - 1e-5)  # float32 screening may miss only a negligible swap


def test_free_centres_change_which_targets_are_chosen():
    T = np.array([[0.0, 0.0], [0.02, 0.0], [0.4, 0.0], [0.42, 0.0]])
    assert stc.cluster_t(T, 1).cost > stc.nonprivate_stc(np.array([[0.41, 0.0]]), T, 1).cost
    assert stc.nonprivate_stc(np.array([[0.41, 0.0]]), T, 1).indices.tolist() in ([0], [1])
    assert stc.nonprivate_stc(np.array([[0.01, 0.0]]), T, 1).indices.tolist() in ([2], [3])


def test_solver_with_coreset_weights_equals_the_solver_on_repeated_points():
    data = np.random.default_rng(33)
    points = data.uniform(-0.5, 0.5, size=(7, 2))
    counts = np.array([1, 4, 2, 1, 3, 1, 2])
    F = data.uniform(-0.5, 0.5, size=(2, 2))
    weighted = stc.solve_stc(points, F, 2, weights=counts)
    repeated = stc.solve_stc(np.repeat(points, counts, axis=0), F, 2)
    assert weighted.cost == pytest.approx(repeated.cost, rel=1e-12)


def test_nna_with_a_coreset_beats_cluster_t_on_the_grid_set():
    # the paper's claim on its synthetic set 2: using the released S' lowers the true cost
    data = stc.synthetic_dataset("grid", seed=0, n_source=540, n_target=360)
    scaling = stc.PublicScaling.for_box(*data.bounds)
    S, T = scaling.apply(data.source), scaling.apply(data.target)
    core, k = stc.kdtree_coreset(T), 10
    cluster_t = stc.selection_cost(T, S, stc.cluster_t(T, k).indices)
    nonprivate = stc.selection_cost(T, S, stc.nonprivate_stc(S, T, k).indices)
    nna = np.mean(
        [
            stc.selection_cost(
                T, S, stc.solve_stc(T, stc.nna_release(S, core.points, eps=3.0, rng=seeded(run)).centers, k).indices
            )
            for run in range(3)
        ]
    )
    assert nonprivate <= nna < cluster_t


# --- the synthetic sets ----------------------------------------------------------------------


@pytest.mark.parametrize("which, source_clusters, target_clusters", [(1, 1, 1), (2, 27, 18), (3, 6, 12)])
def test_synthetic_sets_are_pure_functions_of_the_seed(which, source_clusters, target_clusters):
    first = stc.synthetic_dataset(which, seed=5, n_source=540, n_target=360)
    again = stc.synthetic_dataset(stc.SYNTHETIC_NAMES[which - 1], seed=5, n_source=540, n_target=360)
    other = stc.synthetic_dataset(which, seed=6, n_source=540, n_target=360)
    assert np.array_equal(first.source, again.source) and np.array_equal(first.target, again.target)
    assert not np.array_equal(first.target, other.target)
    assert first.source.shape == (540, 2) and first.target.shape == (360, 2)
    assert len(np.unique(first.source_clusters)) == source_clusters
    assert len(np.unique(first.target_clusters)) == target_clusters


def test_grid_set_shares_its_bottom_right_clusters_between_source_and_target():
    data = stc.synthetic_dataset("grid", seed=1)
    bottom_right = lambda X: (X[:, 0] > 0.5) & (X[:, 1] < 0.5)  # noqa: E731
    assert bottom_right(data.source).sum() == pytest.approx(1000 / 3, abs=1)
    assert bottom_right(data.target).sum() == (data.target_clusters >= 9).sum() == 496  # 1000 over 18 clusters
    assert (data.target[:, 1] < 0.5).all() and (data.source[~bottom_right(data.source), 1] > 0.5).all()


# --- bad input -------------------------------------------------------------------------------


def test_nan_and_wrong_shapes_are_refused():
    S, T = in_ball(20, 2, seed=34), in_ball(10, 2, seed=35)
    bad = T.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="'target' parameter of solve_stc must be finite. Got NaN"):
        stc.solve_stc(bad, S, 2)
    with pytest.raises(ValueError, match="'target' parameter of nna_release must be finite"):
        stc.nna_release(S, bad, eps=1.0, rng=seeded())
    with pytest.raises(ValueError, match="'target' parameter of nas_release must have d = 2 columns"):
        stc.nas_release(S, in_ball(5, 3), t=2, eps=1.0, rng=seeded())
    with pytest.raises(ValueError, match="'target' parameter of stc_cost must be a non-empty 2-D array"):
        stc.stc_cost(T[0], S)
    with pytest.raises(ValueError, match="'weights' parameter of solve_stc must have shape \\(10,\\)"):
        stc.solve_stc(T, S, 2, weights=np.ones(9))


def test_bad_parameters_are_refused_with_what_was_expected():
    S, T = in_ball(20, 2, seed=36), in_ball(10, 2, seed=37)
    with pytest.raises(
        ValueError,
        match="The 'k' parameter of solve_stc must be at most the number of candidate "
        "target points \\(10\\). Got 11 instead.",
    ):
        stc.solve_stc(T, S, 11)
    with pytest.raises(ValueError, match="The 'k' parameter of solve_stc must be an integer >= 1. Got 0 instead."):
        stc.cluster_t(T, 0)
    with pytest.raises(
        ValueError, match="The 'eps' parameter of nna_release must be a positive finite real number. Got 0 instead."
    ):
        stc.nna_release(S, T, eps=0, rng=seeded())
    with pytest.raises(
        ValueError, match="'eps' parameter of nas_release must be a positive finite real number. Got -1.0 instead."
    ):
        stc.nas_release(S, T, t=3, eps=-1.0, rng=seeded())
    with pytest.raises(ValueError, match="exactly one of 'eps'.* and 'rho'"):
        stc.nna_release(S, T, eps=1.0, rho=1.0, rng=seeded())
    with pytest.raises(
        ValueError,
        match="The 't' parameter of nas_release must be at most the number of source points \\(20\\). Got 21 instead.",
    ):
        stc.nas_release(S, T, t=21, eps=1.0, rng=seeded())
    with pytest.raises(ValueError, match="The 'gamma' parameter of nna_release must be in the open interval"):
        stc.nna_release(S, T, eps=1.0, gamma=1.5, rng=seeded())
    with pytest.raises(ValueError, match="The 'C' parameter of kdtree_coreset must be a positive"):
        stc.kdtree_coreset(T, C=0.0)
    with pytest.raises(TypeError, match="The 'rng' parameter of Laplace must be a numpy.random.Generator"):
        stc.nna_release(S, T, eps=1.0, rng=None)
    with pytest.raises(ValueError, match="The 'which' parameter of synthetic_dataset must be 1, 2, 3"):
        stc.synthetic_dataset(4, seed=0)
