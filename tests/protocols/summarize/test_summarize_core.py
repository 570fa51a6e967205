"""Behaviour of the pure `summarize` core: h1, the derived bid, greedy rules, baselines, scores."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from marketplace.protocols.summarize import (
    RandomFourierFeatures,
    best_offer,
    bid_direction,
    bid_value,
    exact_kernel_greedy,
    mmd2,
    protocol_greedy,
    rbf_kernel,
    rff_greedy_bruteforce,
    rff_mmd2_gain,
    svm_accuracy,
    uniform_selection,
)

GAMMA = 0.1


# --- helpers: objectives written out by hand --------------------------------------------------


def exact_rbf(a: np.ndarray, b: np.ndarray, gamma: float) -> float:
    return math.exp(-gamma * float(np.sum((a - b) ** 2)))


def j_exact_loops(target: np.ndarray, summary: np.ndarray, gamma: float) -> float:
    """J(S) with plain Python double loops and the exact kernel."""
    m, q = len(target), len(summary)
    cross = sum(exact_rbf(v, s, gamma) for v in target for s in summary)
    within = sum(exact_rbf(s, t, gamma) for s in summary for t in summary)
    return 2.0 * cross / (m * q) - within / q**2


def j_rff_loops(target_f: np.ndarray, summary_f: np.ndarray) -> float:
    """J(S) with k~(a,b) = h1(a).h1(b) for distinct points and k~(a,a) = 1."""
    m, q = len(target_f), len(summary_f)
    cross = sum(float(v @ s) for v in target_f for s in summary_f)
    within = sum(1.0 if i == j else float(summary_f[i] @ summary_f[j]) for i in range(q) for j in range(q))
    return 2.0 * cross / (m * q) - within / q**2


def brute_exact_greedy(pool, target, seed, p, gamma) -> list[int]:
    chosen: list[int] = []
    for _ in range(p):
        best, best_value = -1, -np.inf
        for y in range(len(pool)):
            if y in chosen:
                continue
            summary = np.vstack([seed, pool[chosen + [y]]])
            value = j_exact_loops(target, summary, gamma)
            if value > best_value:
                best, best_value = y, value
        chosen.append(best)
    return chosen


def random_features(rng: np.random.Generator, rows: int, d: int = 16) -> np.ndarray:
    """Rows that look like h1 outputs: coordinates in [-sqrt(2/d), sqrt(2/d)]."""
    return math.sqrt(2.0 / d) * np.cos(rng.uniform(0, 2 * math.pi, size=(rows, d)))


# --- h1: random Fourier features --------------------------------------------------------------


@pytest.mark.parametrize("d", [500, 20_000])
def test_rff_inner_products_approximate_the_rbf_kernel(d):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 5)) * 1.5
    h1 = RandomFourierFeatures.draw(dim=5, n_features=d, gamma=GAMMA, seed=7)
    F = h1.transform(X)
    error = np.abs(F @ F.T - rbf_kernel(X, X, GAMMA))
    assert error.max() < 5.0 / math.sqrt(d)


def test_rff_error_shrinks_like_one_over_sqrt_d():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(25, 4))
    exact = rbf_kernel(X, X, GAMMA)

    def rms_error(d: int) -> float:
        F = RandomFourierFeatures.draw(dim=4, n_features=d, gamma=GAMMA, seed=3).transform(X)
        return float(np.sqrt(np.mean((F @ F.T - exact) ** 2)))

    ratio = rms_error(400) / rms_error(25_600)  # sqrt(64) = 8 expected
    assert 4.0 < ratio < 16.0


def test_rff_coordinates_lie_in_the_public_bound():
    h1 = RandomFourierFeatures.draw(dim=3, n_features=140, gamma=GAMMA, seed=0)
    F = h1.transform(np.random.default_rng(0).normal(size=(1000, 3)) * 10)
    bound = math.sqrt(2.0 / 140)
    assert h1.n_features == 140 and h1.bound == pytest.approx(bound)
    assert F.shape == (1000, 140) and F.dtype == np.float64
    assert np.all(np.abs(F) <= bound)


def test_rff_draw_is_deterministic_for_a_seed():
    a = RandomFourierFeatures.draw(4, 32, GAMMA, seed=11)
    b = RandomFourierFeatures.draw(4, 32, GAMMA, seed=np.random.SeedSequence(11))
    c = RandomFourierFeatures.draw(4, 32, GAMMA, seed=12)
    X = np.random.default_rng(0).normal(size=(5, 4))
    assert np.array_equal(a.transform(X), b.transform(X))
    assert not np.array_equal(a.W, c.W)


def test_rff_transform_in_chunks_equals_one_shot():
    h1 = RandomFourierFeatures.draw(2, 8, GAMMA, seed=5)
    X = np.random.default_rng(0).normal(size=(20_000, 2))
    expected = math.sqrt(2.0 / 8) * np.cos(X @ h1.W + h1.b)
    np.testing.assert_allclose(h1.transform(X), expected, rtol=0, atol=1e-12)


def test_rff_parameters_are_read_only_and_checked():
    h1 = RandomFourierFeatures.draw(2, 8, GAMMA, seed=5)
    with pytest.raises(ValueError):
        h1.W[0, 0] = 1.0
    with pytest.raises(ValueError, match="gamma"):
        RandomFourierFeatures.draw(2, 8, 0.0, seed=5)
    with pytest.raises(ValueError, match="shape"):
        h1.transform(np.zeros((3, 5)))


# --- the derived bid ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
def test_bid_is_the_y_dependent_part_of_the_j_gain(seed):
    rng = np.random.default_rng(seed)
    target, summary, candidates = random_features(rng, 7), random_features(rng, 4), random_features(rng, 9)
    q = len(summary)
    direction = bid_direction(target.mean(axis=0), summary.mean(axis=0), q)

    j_before = j_rff_loops(target, summary)
    gains = np.array([j_rff_loops(target, np.vstack([summary, y])) - j_before for y in candidates])
    scaled_bids = np.array([2.0 / (q + 1) * bid_value(y, direction) for y in candidates])

    offsets = gains - scaled_bids  # must be one constant c for every candidate
    np.testing.assert_allclose(offsets - offsets[0], 0.0, atol=1e-10)
    assert int(np.argmax(gains)) == best_offer(candidates, direction, np.ones(9, bool))[0]


def test_bid_direction_with_an_empty_summary_is_the_target_mean():
    target_mean = np.array([0.1, -0.2])
    np.testing.assert_array_equal(bid_direction(target_mean, np.zeros(2), 0), target_mean)


def test_bid_direction_weights_the_summary_by_q_over_q_plus_one():
    out = bid_direction(np.array([1.0, 1.0]), np.array([1.0, -1.0]), 3)
    np.testing.assert_allclose(out, [0.25, 1.75])


def test_best_offer_skips_unavailable_rows():
    features = np.array([[3.0], [2.0], [1.0]])
    assert best_offer(features, np.array([1.0]), np.array([False, True, True])) == (1, 2.0)


def test_best_offer_breaks_ties_by_lowest_index():
    features = np.array([[0.0], [5.0], [1.0], [5.0]])
    assert best_offer(features, np.array([1.0]), np.ones(4, bool)) == (1, 5.0)
    assert best_offer(features, np.array([1.0]), np.array([True, False, True, True])) == (3, 5.0)


def test_best_offer_is_none_when_nothing_is_available():
    assert best_offer(np.ones((3, 2)), np.ones(2), np.zeros(3, bool)) is None


def test_best_offer_handles_negative_bids():
    features = np.array([[-3.0], [-1.0], [-2.0]])
    assert best_offer(features, np.array([1.0]), np.ones(3, bool)) == (1, -1.0)


def test_best_offer_reports_exactly_the_bid_value_of_its_row():
    rng = np.random.default_rng(3)
    features, direction = random_features(rng, 2000, d=140), random_features(rng, 1, d=140)[0]
    for mask_seed in range(20):
        available = np.random.default_rng(mask_seed).random(2000) < 0.5
        row, bid = best_offer(features, direction, available)
        assert available[row]
        assert bid == bid_value(features[row], direction)
        assert bid == pytest.approx(np.max(features[available] @ direction), abs=1e-15)


def test_bid_value_is_the_dot_product():
    assert bid_value(np.array([1.0, 2.0]), np.array([0.5, -1.0])) == pytest.approx(-1.5)


@pytest.mark.parametrize("q", [0, 1, 6])
def test_rff_mmd2_gain_is_the_drop_of_the_squared_mean_distance(q):
    rng = np.random.default_rng(q)
    target_mean = random_features(rng, 5).mean(axis=0)
    summary = random_features(rng, q)
    phi = random_features(rng, 1)[0]
    before = summary.mean(axis=0) if q else np.zeros_like(target_mean)
    after = np.vstack([summary, phi]).mean(axis=0)
    expected = np.sum((before - target_mean) ** 2) - np.sum((after - target_mean) ** 2)
    assert rff_mmd2_gain(target_mean, summary.sum(axis=0), q, phi) == pytest.approx(expected, abs=1e-14)


def test_rff_mmd2_gain_is_positive_for_the_target_mean_itself():
    rng = np.random.default_rng(0)
    target_mean = random_features(rng, 5).mean(axis=0)
    far_summary = random_features(rng, 3)
    assert rff_mmd2_gain(target_mean, far_summary.sum(axis=0), 3, target_mean) > 0


# --- greedy rules --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
def test_exact_kernel_greedy_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    pool = rng.normal(size=(30, 3))
    target = rng.normal(0.5, 1, size=(10, 3))
    seed_set = rng.normal(size=(3, 3))
    chosen = exact_kernel_greedy(pool, target, seed_set, 5, GAMMA)
    assert chosen.tolist() == brute_exact_greedy(pool, target, seed_set, 5, GAMMA)


def test_exact_kernel_greedy_with_empty_seed_matches_brute_force():
    rng = np.random.default_rng(9)
    pool, target = rng.normal(size=(20, 2)), rng.normal(1.0, 1, size=(8, 2))
    chosen = exact_kernel_greedy(pool, target, np.empty((0, 2)), 4, GAMMA)
    assert chosen.tolist() == brute_exact_greedy(pool, target, np.empty((0, 2)), 4, GAMMA)


def test_exact_kernel_greedy_never_picks_a_point_twice():
    rng = np.random.default_rng(4)
    pool = np.vstack([np.zeros((3, 2)), rng.normal(5, 1, size=(7, 2))])  # three copies of the best point
    chosen = exact_kernel_greedy(pool, np.zeros((4, 2)), np.empty((0, 2)), 10, GAMMA)
    assert sorted(chosen.tolist()) == list(range(10))
    assert chosen[:3].tolist() == [0, 1, 2]


def test_exact_kernel_greedy_refuses_more_points_than_the_pool():
    with pytest.raises(ValueError, match="p=4"):
        exact_kernel_greedy(np.zeros((3, 2)), np.zeros((1, 2)), np.empty((0, 2)), 4, GAMMA)


@pytest.mark.parametrize("seed", range(4))
def test_protocol_greedy_matches_rff_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    h1 = RandomFourierFeatures.draw(dim=3, n_features=24, gamma=GAMMA, seed=seed)
    owners = [h1.transform(rng.normal(loc=i, size=(15, 3))) for i in range(3)]
    target = h1.transform(rng.normal(loc=1.0, size=(10, 3)))
    seed_features = h1.transform(rng.normal(loc=-1.0, size=(4, 3)))

    fast = protocol_greedy(owners, target.mean(axis=0), seed_features, 6)
    slow = rff_greedy_bruteforce(owners, target, seed_features, 6)
    assert fast == slow
    assert len(set(fast)) == 6


def test_protocol_greedy_matches_rff_brute_force_without_seed():
    rng = np.random.default_rng(7)
    owners = [random_features(rng, 5) for _ in range(3)]
    target = random_features(rng, 6)
    empty = np.empty((0, 16))
    fast = protocol_greedy(owners, target.mean(axis=0), empty, 8)
    assert fast == rff_greedy_bruteforce(owners, target, empty, 8)


def test_protocol_greedy_breaks_cross_owner_ties_by_lowest_owner():
    row = np.array([[0.3, 0.1]])
    owners = [np.vstack([row, -row]), np.vstack([row, -row])]
    order = protocol_greedy(owners, np.array([0.3, 0.1]), np.empty((0, 2)), 2)
    assert order == [(0, 0), (1, 0)]


# --- uniform baseline ----------------------------------------------------------------------------


def _per_owner(picks: list[tuple[int, int]], k: int) -> list[int]:
    return [sum(1 for owner, _ in picks if owner == i) for i in range(k)]


def test_uniform_selection_gives_p_over_k_with_remainder_to_first_owners():
    picks = uniform_selection([50, 50, 50, 50], 10, np.random.default_rng(0))
    assert _per_owner(picks, 4) == [3, 3, 2, 2]
    assert len(set(picks)) == 10
    assert all(0 <= row < 50 for _, row in picks)


def test_uniform_selection_spreads_a_small_owners_shortfall():
    picks = uniform_selection([1, 40, 40], 12, np.random.default_rng(1))
    assert _per_owner(picks, 3) == [1, 6, 5]
    assert len(set(picks)) == 12


def test_uniform_selection_can_take_everything():
    picks = uniform_selection([2, 3], 5, np.random.default_rng(2))
    assert sorted(picks) == [(0, 0), (0, 1), (1, 0), (1, 1), (1, 2)]


def test_uniform_selection_refuses_more_than_all_rows():
    with pytest.raises(ValueError):
        uniform_selection([2, 3], 6, np.random.default_rng(0))


# --- scores --------------------------------------------------------------------------------------


def test_svm_accuracy_is_one_on_separable_data():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(-3, 0.5, size=(50, 2)), rng.normal(3, 0.5, size=(50, 2))])
    y = np.repeat([0, 1], 50)
    assert svm_accuracy(X[::2], y[::2], X[1::2], y[1::2]) == 1.0


def test_svm_accuracy_with_one_training_class_predicts_that_class():
    X = np.zeros((4, 2))
    assert svm_accuracy(X, np.array([1, 1, 1, 1]), X, np.array([1, 0, 1, 1])) == 0.75


def test_svm_accuracy_refuses_an_empty_training_set():
    with pytest.raises(ValueError, match="training"):
        svm_accuracy(np.empty((0, 2)), np.empty(0), np.zeros((1, 2)), np.zeros(1))


def test_mmd2_is_zero_for_identical_sets():
    X = np.random.default_rng(0).normal(size=(30, 3))
    assert mmd2(X, X.copy(), GAMMA) == pytest.approx(0.0, abs=1e-12)


def test_mmd2_is_symmetric_and_matches_a_double_loop():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(6, 2)), rng.normal(1.0, size=(4, 2))

    def mean_k(A, B):
        return np.mean([exact_rbf(a, b, GAMMA) for a, b in itertools.product(A, B)])

    expected = mean_k(X, X) + mean_k(Y, Y) - 2 * mean_k(X, Y)
    assert mmd2(X, Y, GAMMA) == pytest.approx(expected, abs=1e-12)
    assert mmd2(Y, X, GAMMA) == pytest.approx(mmd2(X, Y, GAMMA), abs=1e-15)


def test_mmd2_in_blocks_equals_one_shot(monkeypatch):
    import marketplace.protocols.summarize.kernel as kernel

    rng = np.random.default_rng(2)
    X, Y = rng.normal(size=(50, 3)), rng.normal(0.5, size=(40, 3))
    one_shot = mmd2(X, Y, GAMMA)
    monkeypatch.setattr(kernel, "KERNEL_BLOCK_ELEMENTS", 100)  # forces blocks of 2 rows
    assert mmd2(X, Y, GAMMA) == pytest.approx(one_shot, abs=1e-13)
