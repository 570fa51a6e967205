"""The `sketch` protocol's core (M²M): feature maps, DP sketches, merging, files, M²M estimates,
implicit-M²M logistic regression and owner ranking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from marketplace.privacy.mechanisms import analytic_gaussian_sigma
from marketplace.privacy.rng import make_rng
from marketplace.protocols.sketch import (
    RACE,
    RFF,
    Box,
    Histogram,
    M2MDesign,
    Prior,
    SketchFileError,
    SketchRelease,
    exact_sketch,
    fit_m2m,
    mean_embedding,
    merge_sketches,
    private_sketch,
    rank_owners,
    sketch_mmd2,
    spearman_agreement,
    weighted_logistic_regression,
)
from marketplace.protocols.summarize.kernel import mmd2 as exact_mmd2


def rng(seed: int = 0) -> np.random.Generator:
    return make_rng(seed=seed, secure=False)


def uniform(rows: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((rows, dim))


def every_map(box: Box) -> list:
    return [
        RFF.draw(box, n_features=40, sigma=1.0, seed=1),
        RACE.draw(box, repetitions=6, buckets=8, bandwidth=0.3, seed=2),
        Histogram(box, bins=5),
    ]


# --- feature maps against their definitions


def test_rff_features_are_the_cosines_then_the_sines_of_the_projections():
    box = Box(np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    rff = RFF(box=box, frequencies=np.array([[1.0, 1.0], [0.0, 2.0]]), sigma=1.0)  # omega_1 = (1, 0), omega_2 = (1, 2)
    x = np.array([[0.5, 0.25]])  # angles 0.5 and 0.5 + 0.5 = 1.0
    expected = [math.cos(0.5), math.cos(1.0), math.sin(0.5), math.sin(1.0)]
    assert np.allclose(rff.transform(x), [expected], rtol=0, atol=1e-15)
    assert rff.n_features == 4 and rff.n_frequencies == 2
    assert rff.l1_sensitivity == pytest.approx(2 * math.sqrt(2)) and rff.l2_sensitivity == pytest.approx(math.sqrt(2))


def test_rff_sums_agree_with_the_transform_in_float64_and_within_1e7_per_value_in_float32():
    rff = RFF.draw(Box.unit(10), n_features=200, sigma=1.0, seed=3)
    X = uniform(5000, 10)  # more than two blocks, and a short last one
    dense = rff.transform(X).sum(axis=0)
    assert np.allclose(rff.sum_features(X), dense, rtol=0, atol=1e-10)
    assert np.abs(rff.sum_features(X, precision="float32") - dense).max() / X.shape[0] < 1e-7


def test_rff_inner_products_estimate_the_gaussian_kernel_of_bandwidth_sigma():
    rff = RFF.draw(Box.unit(3), n_features=40_000, sigma=0.5, seed=4)
    x, y = np.array([[0.1, 0.2, 0.3]]), np.array([[0.4, 0.1, 0.5]])
    kernel = math.exp(-np.sum((x - y) ** 2) / (2 * 0.5**2))
    estimate = float(rff.transform(x)[0] @ rff.transform(y)[0]) / rff.n_frequencies
    assert abs(estimate - kernel) < 0.02  # sd of the estimate ~ 1/sqrt(2 m') = 0.005


def test_a_map_is_rebuilt_identically_from_its_seed_and_box():
    box = Box.unit(4)
    assert (
        RFF.draw(box, n_features=20, sigma=2.0, seed=5).fingerprint
        == RFF.draw(box, n_features=20, sigma=2.0, seed=5).fingerprint
    )
    assert (
        RFF.draw(box, n_features=20, sigma=2.0, seed=5).fingerprint
        != RFF.draw(box, n_features=20, sigma=2.0, seed=6).fingerprint
    )
    wider = Box(np.zeros(4), np.full(4, 2.0))  # same frequencies, another box: another map
    assert (
        RFF.draw(box, n_features=20, sigma=2.0, seed=5).fingerprint
        != RFF.draw(wider, n_features=20, sigma=2.0, seed=5).fingerprint
    )
    frequencies = RFF.draw(box, n_features=20_000, sigma=2.0, seed=5).frequencies
    assert abs(frequencies.std() - 0.5) < 0.01  # N(0, sigma^-2)


def test_race_hashes_each_repetition_to_its_slab_modulo_the_buckets():
    box = Box(np.array([0.0]), np.array([1.0]))
    race = RACE(box=box, projections=np.array([[1.0, -1.0]]), offsets=np.array([0.5, 0.0]), buckets=3, bandwidth=0.25)
    x = np.array([[0.0], [0.2], [0.4], [0.7], [1.0]])
    # repetition 1: floor(x / 0.25 + 0.5) mod 3; repetition 2: floor((1 - x) / 0.25) mod 3, then + 3
    assert race.indices(x).tolist() == [[0, 4], [1, 3], [2, 5], [0, 4], [1, 3]]
    onehot = race.transform(x)
    assert onehot.shape == (5, 6) and onehot.sum(axis=1).tolist() == [2.0] * 5
    assert onehot[2].tolist() == [0, 0, 1, 0, 0, 1]
    assert race.sum_features(x).tolist() == [2, 2, 1, 2, 2, 1]


def test_histogram_puts_each_attribute_in_its_bin_and_the_upper_edge_in_the_last_bin():
    hist = Histogram(Box(np.array([0.0, -1.0]), np.array([1.0, 1.0])), bins=4)
    x = np.array([[0.3, 0.5], [1.0, 1.0], [0.0, -1.0]])
    assert hist.indices(x).tolist() == [[1, 7], [3, 7], [0, 4]]
    assert hist.sum_features(x).tolist() == [1, 1, 0, 1, 1, 0, 0, 2]
    assert hist.n_features == 8 and hist.l1_sensitivity == 2 and hist.l2_sensitivity == pytest.approx(math.sqrt(2))


@pytest.mark.parametrize("index", [0, 1, 2], ids=["rff", "race", "hist"])
def test_no_record_moves_the_sum_by_more_than_the_sensitivities(index):
    box = Box(np.full(3, -2.0), np.full(3, 2.0))
    fmap = every_map(box)[index]
    records = box.uniform(20_000, rng(index))
    features = fmap.transform(records)
    l1, l2 = np.abs(features).sum(axis=1), np.sqrt((features**2).sum(axis=1))
    # add/remove one record: the sum moves by Phi(x)
    assert l1.max() <= fmap.l1_sensitivity * (1 + 1e-12) and l2.max() <= fmap.l2_sensitivity * (1 + 1e-12)
    # the L2 bound is reached by every record for all three maps; the L1 bound by every record for
    # the one-hot maps and within 10% for RFF (m' = 20 > d = 3: no record hits pi/4 everywhere)
    assert np.allclose(l2, fmap.l2_sensitivity, rtol=1e-12)
    assert l1.max() >= fmap.l1_sensitivity * (0.9 if index == 0 else 1.0)
    # the same through neighbouring datasets D and D + {x}, on random pairs
    D = records[:50]
    for x in records[50:60]:
        change = fmap.sum_features(np.vstack([D, x])) - fmap.sum_features(D)
        assert np.abs(change).sum() <= fmap.l1_sensitivity * (1 + 1e-12)
    # replace-one (a pair of records) can move it twice as far, which is why the count is released too
    pairs = np.abs(features[:10_000] - features[10_000:]).sum(axis=1)
    assert pairs.max() <= 2 * fmap.l1_sensitivity * (1 + 1e-12)


def test_the_rff_l1_bound_is_attained_where_every_projection_is_pi_over_4():
    box = Box(np.full(2, -5.0), np.full(2, 5.0))
    omega = np.array([[1.0, 0.3], [0.2, 1.0]])
    rff = RFF(box=box, frequencies=omega, sigma=1.0)
    x = np.linalg.solve(omega.T, [math.pi / 4, math.pi / 4 + math.pi / 2])  # m' = d: solvable
    assert np.abs(rff.transform(x[None, :])).sum() == pytest.approx(rff.l1_sensitivity, rel=1e-12)


# --- DP sketches: noise, merging, files


def test_merging_two_sketches_is_the_sketch_of_the_union():
    fmap = RFF.draw(Box.unit(4), n_features=30, sigma=1.0, seed=1)
    A, B = uniform(300, 4, seed=1), uniform(200, 4, seed=2)
    exact = merge_sketches([exact_sketch(A, fmap), exact_sketch(B, fmap)])
    union = exact_sketch(np.vstack([A, B]), fmap)
    assert np.allclose(exact.numerator, union.numerator, rtol=0, atol=1e-10) and exact.count == 500
    assert np.allclose(exact.z, union.z, rtol=0, atol=1e-13)
    a = private_sketch(A, fmap, epsilon=1.0, rng=rng(1), precision="float64")
    b = private_sketch(B, fmap, epsilon=0.5, rng=rng(2), precision="float64")
    noise_a, noise_b = a.numerator - fmap.sum_features(A), b.numerator - fmap.sum_features(B)
    merged = merge_sketches([a, b])
    assert np.allclose(merged.numerator - noise_a - noise_b, union.numerator, rtol=0, atol=1e-9)
    assert merged.count - (a.count - 300) - (b.count - 200) == pytest.approx(500)
    assert merged.numerator_variance == pytest.approx(a.numerator_variance + b.numerator_variance)
    assert merged.epsilon == 1.0 and merged.parts == 2  # disjoint datasets: parallel composition


def test_merge_refuses_sketches_of_different_maps():
    box = Box.unit(2)
    a = exact_sketch(uniform(5, 2), RFF.draw(box, n_features=10, sigma=1.0, seed=1))
    b = exact_sketch(uniform(5, 2), RFF.draw(box, n_features=10, sigma=1.0, seed=2))
    with pytest.raises(ValueError, match="one feature map"):
        merge_sketches([a, b])
    with pytest.raises(ValueError, match="at least one"):
        merge_sketches([])


@pytest.mark.parametrize("index", [0, 1, 2], ids=["rff", "race", "hist"])
def test_laplace_noise_has_scale_sensitivity_over_eps_num_and_the_count_one_over_eps_den(index):
    box = Box.unit(2)
    fmap = every_map(box)[index]
    X, eps, repeats = uniform(50, 2), 0.5, 300
    sums = fmap.sum_features(X)
    generator = rng(10 + index)
    releases = [private_sketch(X, fmap, epsilon=eps, rng=generator, precision="float64") for _ in range(repeats)]
    noise = np.concatenate([r.numerator - sums for r in releases])
    b = fmap.l1_sensitivity / (0.98 * eps)
    # E|Lap(b)| = b and sd(|Lap(b)|) = b: 5 standard errors of the mean
    assert abs(np.mean(np.abs(noise)) / b - 1) < 5 / math.sqrt(noise.size)
    assert abs(np.mean(noise)) / b < 5 * math.sqrt(2) / math.sqrt(noise.size)
    count_noise = np.array([r.count - 50 for r in releases])
    assert abs(np.mean(np.abs(count_noise)) / (1 / (0.02 * eps)) - 1) < 5 / math.sqrt(repeats)
    assert releases[0].numerator_variance == pytest.approx(2 * b**2)


def test_the_gaussian_option_adds_the_analytic_gaussian_noise_for_the_l2_sensitivity():
    fmap = RFF.draw(Box.unit(2), n_features=50, sigma=1.0, seed=1)
    X, eps, delta = uniform(40, 2), 1.0, 1e-5
    generator = rng(3)
    releases = [
        private_sketch(X, fmap, epsilon=eps, delta=delta, mechanism="gaussian", rng=generator, precision="float64")
        for _ in range(200)
    ]
    noise = np.concatenate([r.numerator - fmap.sum_features(X) for r in releases])
    sigma = analytic_gaussian_sigma(epsilon=0.98 * eps, delta=delta, sensitivity=5.0)  # sqrt(m') = 5
    assert abs(noise.std() / sigma - 1) < 5 / math.sqrt(2 * noise.size)
    assert releases[0].numerator_variance == pytest.approx(sigma**2)
    assert releases[0].delta == delta and releases[0].mechanism == "gaussian"


def test_secure_mode_draws_the_noise_from_opendp_without_a_seeded_generator():
    fmap = Histogram(Box.unit(2), bins=5)
    X = uniform(100, 2)
    release = private_sketch(X, fmap, epsilon=1.0, rng=None, secure=True)
    assert release.mechanism == "laplace" and release.n_features == 10
    assert not np.array_equal(release.numerator, fmap.sum_features(X))  # noise was added
    assert release.numerator_variance == pytest.approx(2 * (2 / 0.98) ** 2, rel=1e-6)


def test_a_sketch_survives_a_save_and_load_round_trip(tmp_path):
    fmap = Histogram(Box.unit(3), bins=4)
    release = private_sketch(uniform(30, 3), fmap, epsilon=2.0, rng=rng())
    path = release.save(tmp_path / "owner-1.npz")
    loaded = SketchRelease.load(path)
    assert np.array_equal(loaded.numerator, release.numerator) and loaded.count == release.count
    assert (loaded.map_fingerprint, loaded.epsilon, loaded.mechanism) == (fmap.fingerprint, 2.0, "laplace")
    assert loaded.numerator_variance == release.numerator_variance and loaded.parts == 1


def test_loading_a_missing_or_invalid_file_says_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="No sketch file"):
        SketchRelease.load(tmp_path / "absent.npz")
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"not a zip archive")
    with pytest.raises(SketchFileError, match="not a sketch file"):
        SketchRelease.load(garbage)
    other = tmp_path / "other.npz"
    np.savez(other, numerator=np.zeros(3))
    with pytest.raises(SketchFileError, match="'format' field"):
        SketchRelease.load(other)
    release = exact_sketch(uniform(5, 2), Histogram(Box.unit(2), bins=3))
    broken = tmp_path / "broken.npz"
    release.save(broken)
    fields = dict(np.load(broken))
    fields["numerator"] = np.array([np.nan, 1.0])
    np.savez(broken, **fields)
    with pytest.raises(SketchFileError, match="invalid sketch"):
        SketchRelease.load(broken)


# --- bad inputs


@pytest.mark.parametrize(
    ("X", "message"),
    [
        (np.array([[0.5, np.nan]]), "finite"),
        (np.array([0.5, 0.5]), "2-D array with 2 columns"),
        (np.zeros((3, 3)), "2-D array with 2 columns"),
        (np.array([[0.5, 0.5], [0.2, 1.5]]), "row 1 with attribute 1 = 1.5 outside"),
    ],
)
def test_bad_records_are_refused_with_the_reason(X, message):
    fmap = RFF.draw(Box.unit(2), n_features=10, sigma=1.0, seed=1)
    with pytest.raises(ValueError, match=message):
        private_sketch(X, fmap, epsilon=1.0, rng=rng())
    with pytest.raises(ValueError, match=message):
        fmap.sum_features(X)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"epsilon": 0.0}, ValueError, "'epsilon' parameter of private_sketch must be a positive finite"),
        ({"epsilon": -1.0}, ValueError, "'epsilon' parameter"),
        ({"epsilon": math.inf}, ValueError, "'epsilon' parameter"),
        ({"epsilon": "1"}, TypeError, "'epsilon' parameter"),
        ({"epsilon": 1.0, "mechanism": "gaussian"}, ValueError, "'delta' parameter"),
        ({"epsilon": 1.0, "delta": 1e-5}, ValueError, "'delta' parameter"),
        ({"epsilon": 1.0, "mechanism": "exponential"}, ValueError, "'mechanism' parameter"),
        ({"epsilon": 1.0, "numerator_share": 1.0}, ValueError, "'numerator_share' parameter"),
        ({"epsilon": 1.0, "precision": "float16"}, ValueError, "'precision' parameter"),
        ({"epsilon": 1.0, "rng": None}, TypeError, "'rng' parameter"),
    ],
)
def test_bad_privacy_parameters_are_refused(kwargs, error, message):
    fmap = Histogram(Box.unit(2), bins=3)
    arguments = {"rng": rng(), **kwargs}
    with pytest.raises(error, match=message):
        private_sketch(uniform(5, 2), fmap, **arguments)


def test_bad_map_and_box_parameters_are_refused():
    with pytest.raises(ValueError, match="'n_features' parameter of RFF.draw must be even"):
        RFF.draw(Box.unit(2), n_features=11, sigma=1.0, seed=0)
    with pytest.raises(ValueError, match="'sigma' parameter"):
        RFF.draw(Box.unit(2), n_features=10, sigma=0.0, seed=0)
    with pytest.raises(ValueError, match="above 'lower'"):
        Box(np.array([0.0, 1.0]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="'buckets' parameter"):
        RACE.draw(Box.unit(2), repetitions=2, buckets=1, bandwidth=0.1, seed=0)
    with pytest.raises(TypeError, match="'bins' parameter"):
        Histogram(Box.unit(2), bins=2.5)


# --- M²M


def test_m2m_recovers_exactly_the_mean_of_a_function_in_the_span_of_the_rff_features():
    """f = 2 cos(w_1.x) - sin(w_3.x) + 0.5 cos(w_5.x) is a linear combination of features, so the
    ridge fit is f itself up to the shrinkage of the 1e-9 lambda floor (no noise: eps = inf): the
    estimate is exact up to ~1e-8, whatever n_s, and not limited by the Monte-Carlo floor below."""
    fmap = RFF.draw(Box.unit(5), n_features=100, sigma=1.0, seed=1)
    X = uniform(3000, 5, seed=2)
    W = fmap.frequencies

    def f(Z: np.ndarray) -> np.ndarray:
        return 2 * np.cos(Z @ W[:, 0]) - np.sin(Z @ W[:, 2]) + 0.5 * np.cos(Z @ W[:, 4])

    fit = fit_m2m(fmap, exact_sketch(X, fmap), rng=rng(), n_samples=20_000)
    assert abs(fit.mean(f) - f(X).mean()) < 1e-6


def test_m2m_estimates_the_mean_of_each_attribute_to_1e4_from_an_exact_histogram_sketch():
    """x_j is not in the span of HIST, but its bin's centre is: the residual is uniform on +-w/2
    (w = 1/100), so its mean over n = 20,000 uniform records has sd (w/sqrt 12)/sqrt(n) = 2e-5;
    the fit's own sampling error (n_s = 100,000, 1,000 points per bin) adds ~1e-5. Over 8 seeds
    the largest error was 4.7e-5. (With RFF, m = 200, sigma = 1 the residual is ~10x larger: see
    the M²M module and benchmarks/bench_sketch.py --accuracy.)"""
    fmap = Histogram(Box.unit(2), bins=100)
    X = uniform(20_000, 2, seed=3)
    fit = fit_m2m(fmap, exact_sketch(X, fmap), rng=rng(1), n_samples=100_000)
    assert np.abs(fit.moments(1) - X.mean(axis=0)).max() < 1e-4
    # a CDF at bin edges is in the span: exact
    edges = np.linspace(0.1, 1.0, 10)
    truth = (X[:, :, None] <= edges).mean(axis=0)
    assert np.abs(fit.cdf(edges) - truth).max() < 1e-6


def test_implicit_weights_and_explicit_coefficients_give_the_same_estimates():
    fmap = RFF.draw(Box.unit(3), n_features=60, sigma=1.0, seed=2)
    release = private_sketch(uniform(500, 3), fmap, epsilon=5.0, rng=rng(), precision="float64")
    design = M2MDesign.build(fmap, rng=rng(1), n_samples=5000)
    for intercept in (False, True):
        fit = design.fit(release, intercept=intercept)
        a, a0 = fit.coefficients(lambda Z: Z**2)
        assert np.allclose(a.T @ release.z + a0, fit.moments(2), rtol=0, atol=1e-10)


def test_m2m_counts_covariance_and_cdf_have_the_expected_shapes_and_values():
    fmap = Histogram(Box.unit(3), bins=20)
    X = uniform(4000, 3, seed=4)
    fit = fit_m2m(fmap, exact_sketch(X, fmap), rng=rng(2), n_samples=20_000)
    lower = np.array([[0.2, -np.inf, -np.inf], [-np.inf, -np.inf, 0.5]])
    upper = np.array([[np.inf, np.inf, np.inf], [np.inf, 0.35, np.inf]])  # x_0 >= 0.2; x_2 >= 0.5 and x_1 <= 0.35
    counts = fit.count(lower, upper)
    assert counts.shape == (2,)
    assert counts[0] == pytest.approx(np.sum(X[:, 0] >= 0.2), abs=1e-3)  # one attribute, on bin edges: exact
    assert fit.count(lower[0], upper[0]) == pytest.approx(counts[0])
    assert counts[1] == pytest.approx(np.sum((X[:, 2] >= 0.5) & (X[:, 1] <= 0.35)), rel=0.1)  # HIST is additive
    assert fit.cdf(np.array([[0.5], [0.25], [1.0]])).shape == (3, 1)
    covariance = fit.covariance()
    assert covariance.shape == (3, 3) and np.allclose(covariance, covariance.T)
    assert np.abs(covariance - np.cov(X.T, bias=True)).max() < 5e-3


def test_regularisation_rules_follow_their_formulas_and_the_floor():
    fmap = RFF.draw(Box.unit(2), n_features=20, sigma=1.0, seed=1)
    release = private_sketch(uniform(1000, 2), fmap, epsilon=1.0, rng=rng())
    design = M2MDesign.build(fmap, rng=rng(1), n_samples=4000)
    variance, n = release.numerator_variance, release.count
    assert variance == pytest.approx(2 * (10 * math.sqrt(2) / 0.98) ** 2)
    assert design.regularization(release, "averaged") == pytest.approx(variance / n)  # 2 D1^2 / (eps_num^2 (n + zeta))
    assert design.regularization(release, "summed") == pytest.approx(variance / (n * 4000))
    assert design.regularization(release, "theorem") == pytest.approx(variance / n**2)
    floor = 1e-9 * np.trace(design.gram) / 20
    assert design.regularization(exact_sketch(uniform(10, 2), fmap), "summed") == pytest.approx(floor)
    with pytest.raises(ValueError, match="'regularization' parameter"):
        design.fit(release, regularization="huge")


def test_m2m_on_a_private_sketch_is_close_and_the_averaged_lambda_shrinks_the_estimate():
    fmap = Histogram(Box.unit(4), bins=20)
    X = uniform(20_000, 4, seed=5)
    release = private_sketch(X, fmap, epsilon=1.0, rng=rng(3))
    design = M2MDesign.build(fmap, rng=rng(4), n_samples=20_000)
    summed = design.fit(release, regularization="summed").moments(1)
    averaged = design.fit(release, regularization="averaged").moments(1)
    assert np.abs(summed / X.mean(axis=0) - 1).max() < 0.03
    assert np.all(averaged < summed)  # lambda 20,000 times larger: the estimate is pulled towards 0


def test_m2m_refuses_a_sketch_of_another_map_and_bad_queries():
    box = Box.unit(2)
    fmap = RFF.draw(box, n_features=10, sigma=1.0, seed=1)
    release = exact_sketch(uniform(20, 2), RFF.draw(box, n_features=10, sigma=1.0, seed=2))
    with pytest.raises(ValueError, match="the map the sketch was made with"):
        fit_m2m(fmap, release, rng=rng(), n_samples=100)
    fit = fit_m2m(fmap, exact_sketch(uniform(20, 2), fmap), rng=rng(), n_samples=100)
    with pytest.raises(ValueError, match="one value"):
        fit.mean(lambda Z: Z[:10, 0])
    with pytest.raises(ValueError, match="finite"):
        fit.mean(lambda Z: np.where(Z[:, 0] > 0.5, np.nan, 1.0))
    with pytest.raises(ValueError, match="'lower' parameter"):
        fit.count(np.zeros(3), np.ones(3))
    with pytest.raises(ValueError, match="draws from"):
        fit.logistic_regression(label=1)


# --- implicit-M²M logistic regression


def test_weighted_logistic_regression_matches_scikit_learn_for_positive_weights():
    from sklearn.linear_model import LogisticRegression

    data = np.random.default_rng(6)
    X = data.normal(size=(400, 3))
    y = (X @ [1.0, -2.0, 0.5] + data.logistic(size=400) > 0).astype(float)
    w = data.uniform(0.5, 2.0, size=400)
    ours = weighted_logistic_regression(X, y, w, l2=0.01)
    theirs = LogisticRegression(C=1 / (0.01 * 400), tol=1e-10, max_iter=10_000).fit(X, y, sample_weight=w)
    assert ours.converged
    assert np.allclose(ours.coef, theirs.coef_[0], atol=1e-4) and ours.intercept == pytest.approx(
        theirs.intercept_[0], abs=1e-4
    )


def test_signed_weights_still_give_a_finite_model_and_l2_must_be_positive():
    data = np.random.default_rng(7)
    X, y, w = data.normal(size=(200, 2)), data.integers(0, 2, size=200).astype(float), data.normal(size=200)
    model = weighted_logistic_regression(X, y, w, l2=0.1)
    assert np.all(np.isfinite(model.coef)) and math.isfinite(model.intercept)
    with pytest.raises(ValueError, match="'l2' parameter"):
        weighted_logistic_regression(X, y, w, l2=0.0)


def test_implicit_m2m_learns_a_logistic_classifier_from_a_private_sketch():
    box = Box.unit(3)  # x_0, x_1 in [0, 1] and a 0/1 label as attribute 2
    data = np.random.default_rng(8)
    features = data.random((6000, 2))
    labels = (features.sum(axis=1) + 0.1 * data.normal(size=6000) > 1.0).astype(float)
    X = np.column_stack([features, labels])
    fmap = RFF.draw(box, n_features=200, sigma=0.5, seed=9)
    release = private_sketch(X[:5000], fmap, epsilon=10.0, rng=rng(5))
    design = M2MDesign.build(fmap, rng=rng(6), n_samples=20_000, prior=Prior(box, discrete={2: (0.0, 1.0)}))
    model = design.fit(release).logistic_regression(label=2)
    accuracy = np.mean(model.predict(X[5000:, :2]) == X[5000:, 2])
    assert accuracy > 0.85  # the Bayes rule x_0 + x_1 > 1 scores ~0.95


# --- owner ranking


def test_owner_ranking_from_sketches_agrees_with_the_exact_mmd_ranking():
    box = Box.unit(2)
    fmap = RFF.draw(box, n_features=400, sigma=0.3, seed=10)
    data = np.random.default_rng(11)
    target = box.clip(data.normal(0.3, 0.1, size=(500, 2)))
    centres = [0.3, 0.4, 0.5, 0.6, 0.7]
    owners = [box.clip(data.normal(c, 0.1, size=(2000, 2))) for c in centres]
    releases = [private_sketch(X, fmap, epsilon=2.0, rng=rng(20 + i)) for i, X in enumerate(owners)]
    ranking = rank_owners(mean_embedding(fmap, target), releases, fmap)
    truth = [exact_mmd2(target, X[:600], gamma=1 / (2 * 0.3**2)) for X in owners]
    assert ranking.order.tolist() == [0, 1, 2, 3, 4]
    assert spearman_agreement(ranking.mmd2, truth) == pytest.approx(1.0)
    # the sketch's MMD^2 is the RFF kernel's (m' = 200 frequencies), the truth the exact kernel's
    assert np.allclose(ranking.mmd2, truth, rtol=0.1, atol=0.01)


def test_debiasing_removes_the_noise_term_from_a_small_owners_mmd():
    box = Box.unit(2)
    fmap = RFF.draw(box, n_features=200, sigma=0.5, seed=12)
    X = uniform(300, 2, seed=13)
    target = mean_embedding(fmap, X)
    generator = rng(14)
    releases = [private_sketch(X, fmap, epsilon=1.0, rng=generator) for _ in range(40)]
    raw = np.mean([sketch_mmd2(target, r, fmap, debias=False) for r in releases])
    debiased = np.mean([sketch_mmd2(target, r, fmap) for r in releases])
    assert raw > 0.5  # the same data: MMD^2 is 0, the noise alone makes it look far
    assert abs(debiased) < 0.1 * raw


def test_a_shared_design_is_the_design_build_draws_and_is_built_once_per_setting():
    fmap = RFF.draw(Box.unit(3), n_features=40, sigma=1.0, seed=3)
    seed = np.random.SeedSequence(entropy=11, spawn_key=(5,))
    prior = Prior(fmap.box, discrete={2: (0.0, 1.0)})
    shared = M2MDesign.shared(fmap, seed=seed, n_samples=3000, prior=prior)
    built = M2MDesign.build(fmap, rng=np.random.default_rng(seed), n_samples=3000, prior=prior)
    assert np.array_equal(shared.samples, built.samples) and np.array_equal(shared.gram, built.gram)
    assert (
        M2MDesign.shared(fmap, seed=np.random.SeedSequence(entropy=11, spawn_key=(5,)), n_samples=3000, prior=prior)
        is shared
    )
    # any public setting that changes the design gives another one
    others = [
        M2MDesign.shared(fmap, seed=np.random.SeedSequence(entropy=12, spawn_key=(5,)), n_samples=3000, prior=prior),
        M2MDesign.shared(fmap, seed=seed, n_samples=3001, prior=prior),
        M2MDesign.shared(fmap, seed=seed, n_samples=3000),
        M2MDesign.shared(RFF.draw(Box.unit(3), n_features=40, sigma=1.0, seed=4), seed=seed, n_samples=3000),
    ]
    assert all(other is not shared for other in others)
    assert not np.array_equal(others[0].samples, shared.samples)


def test_a_release_whose_noise_swamps_it_is_flagged_collapsed_and_one_that_carries_its_data_is_not():
    """The signal-to-noise ratios against their definitions, and the flag over many draws: at eps = 5
    on 2,000 rows no draw collapses; at eps = 0.001 every draw does (its count noise alone has sd
    ~ 2,800, more than the rows); an exact sketch never does."""
    from marketplace.protocols.sketch.release import exact_sketch
    from marketplace.protocols.sketch.signal import release_signal

    fmap = RFF.draw(Box.unit(3), n_features=100, sigma=1.0, seed=5)
    X = uniform(2000, 3)
    exact = release_signal(exact_sketch(X, fmap))
    assert exact == {"count_snr": None, "numerator_snr": None, "collapsed": False, "why": None}
    release = private_sketch(X, fmap, epsilon=1.0, rng=rng(3), precision="float64")
    signal = release_signal(release)
    m, var = release.numerator.size, release.numerator_variance
    assert signal["count_snr"] == pytest.approx(release.count / math.sqrt(release.count_variance))
    energy = float(release.numerator @ release.numerator) - m * var
    assert signal["numerator_snr"] == pytest.approx(math.sqrt(max(0.0, energy) / (m * var)))
    generator = rng(9)
    loud = [release_signal(private_sketch(X, fmap, epsilon=5.0, rng=generator)) for _ in range(50)]
    quiet = [release_signal(private_sketch(X, fmap, epsilon=0.001, rng=generator)) for _ in range(50)]
    assert not any(s["collapsed"] for s in loud)
    assert all(s["collapsed"] and s["why"] for s in quiet)
