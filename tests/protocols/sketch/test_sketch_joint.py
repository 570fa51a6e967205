"""Means, second moments, variances and the covariance from a sketch are projected together onto
answers some dataset in the box could give: checked on arbitrary noisy inputs, on the moments of
real datasets (left alone), against the nearest-point condition, on the audit's case of a second
moment below the squared mean, and on the answers of a whole sketch-quickstart run."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from conftest import ROOT
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from marketplace.protocols.sketch.joint import (
    FEASIBILITY_TOLERANCE,
    _nearest_in_region,
    consistency_gaps,
    project_jointly,
)
from marketplace.protocols.sketch.valid import ROUND_OFF, project_moment_answers

TOLERANCE = 1e-9
noisy = st.floats(-0.5, 1.5, allow_nan=False)


def stats(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, second moment and (biased) covariance of a dataset: consistent by construction."""
    return X.mean(axis=0), (X**2).mean(axis=0), np.cov(X.T, bias=True).reshape(X.shape[1], X.shape[1])


def assert_consistent(result, lower=0.0, upper=1.0):
    gaps = consistency_gaps(result.mean, result.second, result.covariance, lower=lower, upper=upper)
    assert max(gaps.values()) <= TOLERANCE, gaps


@st.composite
def noisy_answers(draw, with_second=True, with_covariance=True):
    d = draw(st.integers(1, 4))
    mean = draw(arrays(np.float64, d, elements=noisy))
    second = draw(arrays(np.float64, d, elements=noisy)) if with_second else None
    covariance = None
    if with_covariance:
        raw = draw(arrays(np.float64, (d, d), elements=st.floats(-0.3, 0.3, allow_nan=False)))
        covariance = (raw + raw.T) / 2
    return mean, second, covariance


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_noisy_answers_come_out_consistent(data):
    with_second, with_covariance = data.draw(st.sampled_from([(True, True), (True, False), (False, True)]))
    mean, second, covariance = data.draw(noisy_answers(with_second, with_covariance))
    result = project_jointly(mean, second, covariance)
    assert_consistent(result)
    assert ((result.mean >= -TOLERANCE) & (result.mean <= 1 + TOLERANCE)).all()
    assert (result.variance >= -TOLERANCE).all() and (
        result.variance <= result.mean * (1 - result.mean) + TOLERANCE
    ).all()
    if covariance is not None:
        assert np.linalg.eigvalsh(result.covariance).min() >= -TOLERANCE
        assert np.allclose(np.diag(result.covariance), result.variance, atol=0)
    if second is not None:
        assert (result.second >= result.mean**2 - TOLERANCE).all() and (result.second <= result.mean + TOLERANCE).all()


@settings(max_examples=60, deadline=None)
@given(
    noisy_answers(), arrays(np.float64, 4, elements=st.floats(-5, 5)), arrays(np.float64, 4, elements=st.floats(0.1, 5))
)
def test_answers_for_any_box_come_out_inside_that_box(answers, low, width):
    mean, second, covariance = answers
    d = mean.size
    lower, upper = low[:d], low[:d] + width[:d]
    result = project_jointly(lower + width[:d] * mean, second * width[:d] ** 2, covariance, lower=lower, upper=upper)
    assert_consistent(result, lower, upper)
    assert ((result.mean >= lower - TOLERANCE) & (result.mean <= upper + TOLERANCE)).all()
    assert (result.variance <= (upper - result.mean) * (result.mean - lower) + TOLERANCE).all()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(1, 40), st.integers(0, 2**32 - 1), st.sampled_from(["uniform", "ends", "one"]))
def test_the_moments_of_a_real_dataset_are_left_alone(d, n, seed, kind):
    rng = np.random.default_rng(seed)
    X = {
        "uniform": rng.random((n, d)),
        "ends": rng.integers(0, 2, (n, d)).astype(float),
        "one": np.repeat(rng.random((1, d)), n, axis=0),
    }[kind]
    mean, second, covariance = stats(X)
    result = project_jointly(mean, second, covariance)
    assert result.iterations == 0
    assert (result.mean == mean).all() and (result.second == second).all() and (result.covariance == covariance).all()
    answers, moved = project_moment_answers(
        {"1": mean.tolist(), "2": second.tolist(), "3": (X**3).mean(axis=0).tolist()},
        covariance,
        mean,
        lower=np.zeros(d),
        upper=np.ones(d),
    )
    for name in ("moments", "variances", "covariance"):
        assert moved[name]["changed"] is False and moved[name]["max_change"] == 0.0 and moved[name]["attributes"] == []
    assert answers["moments"]["2"] == second.tolist() and answers["covariance"] == covariance.tolist()


@settings(max_examples=80, deadline=None)
@given(noisy_answers())
def test_projecting_twice_changes_nothing_more(answers):
    once = project_jointly(*answers)
    twice = project_jointly(once.mean, once.second, once.covariance)
    assert twice.iterations == 0
    assert (twice.mean == once.mean).all() and (twice.second == once.second).all()
    assert (twice.covariance == once.covariance).all()


@settings(max_examples=80, deadline=None)
@given(noisy_answers(), st.integers(0, 3))
@example(answers=(np.array([0.0]), np.array([-3e-255]), np.array([[0.0]])), orders_above_two=0)
def test_changed_is_true_exactly_when_a_value_moved_by_more_than_round_off(answers, orders_above_two):
    mean, second, covariance = answers
    d = mean.size
    moments = {"1": mean.tolist(), "2": second.tolist()}
    for k in range(3, 3 + orders_above_two):
        moments[str(k)] = (second / k).tolist()
    out, moved = project_moment_answers(moments, covariance, mean, lower=np.zeros(d), upper=np.ones(d))

    def beyond_round_off(got, raw):
        delta = np.abs(np.asarray(got, dtype=float) - np.asarray(raw, dtype=float))
        return np.where(delta > ROUND_OFF * np.maximum(1.0, np.abs(np.asarray(raw, dtype=float))), delta, 0.0)

    for k, raw in moments.items():
        delta = beyond_round_off(out["moments"][k], raw)
        entry = moved["moments"]["orders"][k]
        assert entry["changed"] == bool((delta > 0).any()) and entry["max_change"] == delta.max()
        assert entry["attributes"] == np.flatnonzero(delta > 0).tolist() and entry["round_off"] == ROUND_OFF
    assert moved["moments"]["changed"] == any(o["changed"] for o in moved["moments"]["orders"].values())
    delta = beyond_round_off(out["covariance"], covariance)
    assert (
        moved["covariance"]["changed"] == bool((delta > 0).any()) and moved["covariance"]["max_change"] == delta.max()
    )
    delta = beyond_round_off(out["variances"], np.diag(covariance))
    assert moved["variances"]["changed"] == bool((delta > 0).any())
    higher = np.array([out["moments"][str(k)] for k in range(2, 3 + orders_above_two)])
    assert (np.diff(higher, axis=0) <= 1e-12).all() and higher.min() >= -TOLERANCE


def metric_inner(target, point, other):
    """<target - point, other - point> in the projection's metric (mean, variance, covariance)."""
    return sum(float(np.sum((t - p) * (o - p))) for t, p, o in zip(target, point, other) if t is not None)


def consistent_neighbours(point, rng):
    """Consistent answers around ``point`` = (m, v, C) in several directions: C scaled, C plus a
    rank-one term, one mean moved (those that stay consistent), and the statistics of datasets."""
    m, v, C = point
    d = m.size
    candidates = [(m, np.diag(C * f), C * f) for f in (0.0, 0.5, 0.9, 1.1, 2.0)]
    for _ in range(10):
        x = rng.normal(size=d)
        candidates.append((m, v + 0.01 * x**2, C + 0.01 * np.outer(x, x)))
    for j in range(d):
        for step in (-0.01, 0.01):
            moved = m.copy()
            moved[j] += step
            candidates.append((moved, v, C))
    for _ in range(20):
        X = rng.beta(*rng.uniform(0.2, 3, 2), size=(rng.integers(1, 30), d))
        mz, _, Cz = stats(X)
        candidates.append((mz, np.diag(Cz), Cz))
    return [z for z in candidates if max(consistency_gaps(z[0], z[1] + z[0] ** 2, z[2]).values()) <= 1e-12]


@settings(max_examples=40, deadline=None)
@given(noisy_answers(), st.integers(0, 2**32 - 1))
def test_the_answer_is_the_nearest_consistent_point_in_the_documented_metric(answers, seed):
    """A convex set's nearest point x* to t satisfies <t - x*, z - x*> <= 0 for every z in the set;
    we check it against consistent answers around x* and the statistics of random datasets."""
    mean, second, covariance = answers
    result = project_jointly(mean, second, covariance, tolerance=1e-13)
    assume(result.converged)
    target = (mean, second - mean**2, covariance)
    point = (result.mean, result.variance, result.covariance)
    for z in consistent_neighbours(point, np.random.default_rng(seed)):
        assert metric_inner(target, point, z) <= 1e-8


@settings(max_examples=300, deadline=None)
@given(st.floats(-2, 3), st.floats(-1, 1.5), st.sampled_from([1, 2]), st.floats(-1, 1), st.floats(0.05, 2))
def test_the_planar_step_finds_the_nearest_point_of_the_region(a, beta, k, low, width):
    lo, hi = np.array([low]), np.array([low + width])
    m, s = _nearest_in_region(np.array([a]), np.array([beta]), k, lo, hi)
    assert lo[0] <= m[0] <= hi[0] and -1e-15 <= s[0] <= (hi[0] - m[0]) * (m[0] - lo[0]) + 1e-12
    grid_m = np.linspace(lo[0], hi[0], 2001)
    grid_s = np.linspace(0, 1, 401)[:, None] * ((hi[0] - grid_m) * (grid_m - lo[0]))[None, :]
    best = ((grid_m[None, :] - a) ** 2 + k * (grid_s - beta) ** 2).min()
    found = (m[0] - a) ** 2 + k * (s[0] - beta) ** 2
    assert found <= best + 1e-12


def test_a_second_moment_below_the_squared_mean_is_raised_and_reported():
    """The audit's case (sketch-quickstart, attribute 0): E[x] = 0.4812, E[x^2] = 0.2242 < 0.4812^2."""
    mean, second = np.array([0.4812, 0.5123]), np.array([0.2242, 0.2626])
    assert second[0] < mean[0] ** 2
    covariance = np.array([[0.00567, -0.00156], [-0.00156, 0.00549]])
    out, moved = project_moment_answers(
        {"1": mean.tolist(), "2": second.tolist()}, covariance, mean, lower=np.zeros(2), upper=np.ones(2)
    )
    m, m2, C = np.array(out["moments"]["1"]), np.array(out["moments"]["2"]), np.array(out["covariance"])
    assert (m2 >= m**2).all() and np.allclose(np.diag(C), m2 - m**2, atol=1e-12)
    assert np.allclose(out["variances"], np.diag(C), atol=0)
    assert moved["moments"]["changed"] is True and 0 in moved["moments"]["attributes"]
    assert moved["moments"]["orders"]["2"]["changed"] is True and moved["moments"]["orders"]["1"]["changed"] is False
    # alone, attribute 0's two variance estimates (0.00567 and 0.2242 - 0.4812^2 = -0.0074) weigh
    # the same: their mean is negative, so the nearest consistent variance is 0
    alone, _ = project_moment_answers(
        {"1": mean[:1].tolist(), "2": second[:1].tolist()},
        covariance[:1, :1],
        mean[:1],
        lower=np.zeros(1),
        upper=np.ones(1),
    )
    assert alone["covariance"] == [[0.0]] and alone["moments"]["2"] == [mean[0] ** 2]


def test_moments_alone_are_projected_without_a_covariance():
    out, moved = project_moment_answers(
        {"1": [1.2, 0.3], "2": [0.5, 0.05]}, None, np.array([1.2, 0.3]), lower=np.zeros(2), upper=np.ones(2)
    )
    assert out["moments"]["1"][0] == 1.0 and out["moments"]["2"][0] == pytest.approx(1.0)  # mean 1: all mass at 1
    assert out["moments"]["2"][1] == pytest.approx(0.09) and out["variances"][1] == pytest.approx(0.0, abs=1e-15)
    assert "covariance" not in out and moved["moments"]["attributes"] == [0, 1]


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="'second' parameter of project_jointly must be a finite \\(2,\\)"):
        project_jointly([0.5, 0.5], [0.3])
    with pytest.raises(ValueError, match="'covariance' parameter"):
        project_jointly([0.5, 0.5], None, np.eye(3))
    with pytest.raises(ValueError, match="orders 1..K"):
        project_moment_answers({"1": [0.5], "3": [0.1]}, None, np.array([0.5]), lower=np.zeros(1), upper=np.ones(1))


def test_the_quickstart_run_reports_jointly_consistent_answers(tmp_path):
    from marketplace.runner.run import run_scenario
    from marketplace.scenario import parse_scenario

    raw = yaml.safe_load((ROOT / "scenarios" / "sketch-quickstart.yaml").read_text())
    report = run_scenario(
        parse_scenario(raw, source="sketch-quickstart", base_dir=tmp_path), tmp_path / "run", driver="inprocess"
    )
    assert report["status"] == "completed", report["failures"]
    est = report["estimates"]
    m, m2, C = (np.array(est["moments"]["1"]), np.array(est["moments"]["2"]), np.array(est["covariance"]))
    gaps = consistency_gaps(m, m2, C)
    assert max(gaps.values()) <= FEASIBILITY_TOLERANCE, gaps
    assert np.allclose(est["variances"], np.diag(C), atol=0)
    # this noisy sketch's raw second moments disagreed with its covariance: the report says so
    projections = est["projections"]
    assert projections["moments"]["changed"] and projections["moments"]["orders"]["2"]["changed"]
    assert projections["covariance"]["changed"] and projections["covariance"]["converged"]
    assert set(projections) == {"moments", "variances", "covariance", "cdf", "counts"}


def test_subnormal_covariance_entries_do_not_break_the_solver():
    """A falsifying example the property test found: entries of 2e-311 made the polishing step's
    eigen-solvers meet NaN. The answer must still be consistent and inside the box."""
    covariance = np.full((4, 4), 2.22507386e-311)
    covariance[0, 2] = covariance[2, 0] = 7.8125e-3
    low, width = np.array([4.0, 0.0, 0.0, 0.0]), np.full(4, 2.875)
    result = project_jointly(
        low + width * np.array([0.0, 0.0, 0.005, 0.0]), np.zeros(4), covariance, lower=low, upper=low + width
    )
    assert np.isfinite(result.covariance).all() and np.linalg.eigvalsh(result.covariance).min() >= -1e-12
    assert (result.mean >= low).all() and (result.mean <= low + width).all()
