"""Answers from a DP sketch are projected onto what a real dataset could give: CDFs, moments,
covariances and counts, each tested against its definition, and end to end through the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import ROOT, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from marketplace.protocols.sketch.valid import (
    ROUND_OFF,
    change,
    project_cdf,
    project_counts,
    project_covariance,
    project_higher_moments,
)

finite = st.floats(-2.0, 3.0, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, (3, 6), elements=finite), st.permutations(list(range(6))))
def test_a_projected_cdf_never_decreases_and_stays_in_0_1(values, order):
    points = np.linspace(0.05, 0.95, 6)[order]  # points in any order
    projected, change = project_cdf(values, points)
    by_point = projected[:, np.argsort(points)]
    assert (np.diff(by_point, axis=1) >= -1e-12).all()
    assert projected.min() >= 0 and projected.max() <= 1
    assert change == pytest.approx(np.abs(projected - values).max())
    again, second = project_cdf(projected, points)  # a projection: idempotent
    assert np.allclose(again, projected) and second < 1e-12


def test_a_valid_cdf_is_left_alone():
    values = np.array([[0.0, 0.2, 0.2, 0.9, 1.0]])
    projected, change = project_cdf(values, np.array([0.1, 0.2, 0.3, 0.4, 0.5]))
    assert change == 0.0 and (projected == values).all()


def test_the_cdf_projection_is_the_least_squares_one():
    """Pool adjacent violators on a hand example: (0.5, 0.3) is pooled to 0.4 each."""
    projected, _ = project_cdf(np.array([[0.1, 0.5, 0.3, 1.2]]), np.array([0.1, 0.2, 0.3, 0.4]))
    assert np.allclose(projected, [[0.1, 0.4, 0.4, 1.0]])


@settings(max_examples=200, deadline=None)
@given(arrays(np.float64, (4, 4), elements=finite))
def test_a_projected_covariance_is_symmetric_psd_and_nearest(matrix):
    projected, change = project_covariance(matrix)
    assert np.allclose(projected, projected.T)
    assert np.linalg.eigvalsh(projected).min() >= -1e-10
    symmetric = (matrix + matrix.T) / 2
    distance = np.linalg.norm(projected - symmetric)
    rng = np.random.default_rng(0)
    for _ in range(20):  # no other PSD matrix is closer to the symmetric part
        a = rng.normal(size=(4, 4))
        candidate = projected + 0.1 * (a @ a.T)
        assert np.linalg.norm(candidate - symmetric) >= distance - 1e-9


def test_a_psd_covariance_is_left_alone():
    a = np.random.default_rng(1).normal(size=(5, 5))
    matrix = a @ a.T
    projected, change = project_covariance(matrix)
    assert change < 1e-12 and np.allclose(projected, matrix)


def test_a_negative_variance_is_clipped_away():
    projected, change = project_covariance(np.array([[0.01, 0.0], [0.0, -0.002845]]))
    assert projected[1, 1] == pytest.approx(0.0, abs=1e-15) and change == pytest.approx(0.002845)


def test_higher_moments_of_unit_box_values_lie_below_the_second_and_do_not_grow_with_the_order():
    second = np.array([0.6, 0.2, 0.9])
    moments = project_higher_moments(second, {"3": [0.7, -0.1, 0.95], "4": [0.1, 0.1, 0.97]})
    table = np.array([second, moments["3"], moments["4"]])
    assert table.min() >= 0 and (np.diff(table, axis=0) <= 1e-12).all()
    assert moments["3"] == [0.6, 0.0, 0.9] and moments["4"][0] == 0.1
    same = project_higher_moments(np.array([0.3, 0.1]), {"3": [0.2, 0.05], "4": [0.1, 0.05]})
    assert same == {"3": [0.2, 0.05], "4": [0.1, 0.05]}


def test_counts_are_never_negative():
    fractions, counts, change = project_counts(np.array([-0.05, 0.3, 1.2]), 1000.0)
    assert fractions.tolist() == [0.0, 0.3, 1.0] and counts.tolist() == [0.0, 300.0, 1000.0]
    assert change == pytest.approx(0.2)


@pytest.mark.slow
def test_sketch_query_returns_only_valid_answers_and_says_what_it_projected(tmp_path):
    """A very noisy sketch (eps = 0.05) gives raw estimates that are not valid; the CLI's are."""
    out = tmp_path / "run"
    done = run_cli(
        "run",
        str(ROOT / "scenarios" / "sketch-quickstart.yaml"),
        "--driver",
        "inprocess",
        "--quiet",
        "--set",
        "sketch.epsilon=0.05",
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    answer = run_cli(
        "sketch",
        "query",
        str(out / "sketches" / "merged.npz"),
        "--scenario",
        str(out / "scenario.resolved.yaml"),
        "--cdf",
        "0.05,0.3,0.5,0.7,0.95",
        "--covariance",
        "--moments",
        "3",
        "--count",
        "0:0.9:1",
        "--json",
    )
    assert answer.returncode == 0, answer.stderr
    data = json.loads(answer.stdout)
    cdf = np.array(data["cdf"]["values"])
    assert (np.diff(cdf, axis=1) >= -1e-12).all() and cdf.min() >= 0 and cdf.max() <= 1
    assert np.linalg.eigvalsh(np.array(data["covariance"])).min() >= -1e-12
    assert min(data["counts"]["counts"]) >= 0
    moments, covariance = data["moments"], np.array(data["covariance"])
    assert np.allclose(np.diag(covariance), np.array(moments["2"]) - np.array(moments["1"]) ** 2, atol=1e-12)
    assert np.allclose(data["variances"], np.diag(covariance), atol=0)
    assert any(p["changed"] for p in data["projections"].values())  # this noisy sketch needed it
    text = run_cli(
        "sketch",
        "query",
        str(out / "sketches" / "merged.npz"),
        "--scenario",
        str(out / "scenario.resolved.yaml"),
        "--cdf",
        "0.05,0.3,0.5,0.7,0.95",
        "--covariance",
    )
    assert "note: projected onto the answers a dataset in the box could give" in text.stdout
    assert "covariance in f0, f1, f2, f3, f4" in text.stdout  # the data's column names


def test_a_move_of_round_off_is_no_change_and_the_report_says_so():
    """An already valid CDF row that an isotonic solver returns off by one ulp (scikit-learn 1.6 and
    1.9 differ on exactly this) is not reported as moved: which attributes a projection names must not
    depend on the library release."""
    raw = np.array([[0.1, 0.5, 0.9], [0.2, 0.6, 0.7], [0.5, 0.4, 1.2]])
    projected = raw.copy()
    projected[0, 1] = np.nextafter(0.5, 1.0)  # one ulp: round-off
    projected[1, 2] = 0.7 + 2e-12  # above round-off: a change, however small
    projected[2] = [0.45, 0.45, 1.0]  # a real projection
    moved = change(raw, projected)
    assert moved["attributes"] == [1, 2] and moved["changed"] and moved["round_off"] == ROUND_OFF
    assert moved["max_change"] == pytest.approx(0.2)
    unchanged = change(raw[:1], projected[:1])
    assert unchanged == {"changed": False, "max_change": 0.0, "attributes": [], "round_off": ROUND_OFF}
    big = np.array([[1e6]])  # relative above 1: round-off scales with the value
    assert change(big, big + 1e-7)["changed"] is False and change(big, big + 1e-5)["changed"] is True
