"""pfds core: the private tree, its budget and wire form, optPrivateGen, labelling, DP-Pred baselines."""

from __future__ import annotations

import copy
import math

import msgpack
import numpy as np
import pytest
from scipy.stats import chisquare

from marketplace.privacy.accountant import PrivacyLedger
from marketplace.privacy.neighbouring import replace_one
from marketplace.privacy.rng import make_rng
from marketplace.protocols.pfds import (
    CategoricalAttribute,
    ClassLabels,
    MalformedPlain,
    NumericAttribute,
    PrivateTree,
    PublicSchema,
    RegressionLabels,
    Spend,
    average_regressors,
    bucket_of,
    consistent_counts,
    draw_in_bucket,
    erm_classifier,
    erm_regressor,
    exact_node_counts,
    functional_mechanism,
    functional_mechanism_sensitivity,
    grow_tree,
    label_synthetic,
    ledger_steps,
    majority_vote,
    max_operator_utilities,
    noisy_node_counts,
    objective_perturbation,
    opt_private_gen,
    partition_agents,
    select_split,
    share_data,
    share_predictor,
    split_budget,
    synthesize,
    vote_classifiers,
    vote_codes,
)
from marketplace.protocols.pfds.synth import weighted_distance

ROW = replace_one("a row")

HUGE_EPS = 1e7


def rng(seed: int = 0) -> np.random.Generator:
    return make_rng(seed=seed, secure=False)


NUMERIC_SCHEMA = PublicSchema(
    attributes=(NumericAttribute("a", 0.0, 1.0), NumericAttribute("b", -5.0, 5.0)),
    label=ClassLabels((0, 1)),
)
MIXED_SCHEMA = PublicSchema(
    attributes=(
        NumericAttribute("age", 0.0, 100.0),
        CategoricalAttribute("colour", ("red", "green", "blue")),
        NumericAttribute("score", 0.0, 1.0),
        CategoricalAttribute("flag", ("no", "yes")),
    ),
    label=ClassLabels(("low", "high")),
)


def numeric_data(n: int = 600, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    data = np.random.default_rng(seed)
    X = np.column_stack([data.random(n), data.uniform(-5, 5, n)])
    return X, (X[:, 0] + X[:, 1] / 10 > 0.5).astype(int)


def mixed_data(n: int = 800, seed: int = 2) -> tuple[np.ndarray, np.ndarray]:
    data = np.random.default_rng(seed)
    X = np.column_stack([data.uniform(0, 100, n), data.integers(0, 3, n), data.random(n), data.integers(0, 2, n)])
    y = np.where((X[:, 0] > 40) & (X[:, 1] != 2), "high", "low")
    return X, y


# --- budget bookkeeping


def test_split_budget_gives_half_to_the_tree_and_half_to_the_counts():
    budget = split_budget(0.7, h_max=8, p=4)
    assert budget.tree_level * 8 == pytest.approx(0.35) and budget.counts_level * 3 == pytest.approx(0.35)
    assert budget.tree + budget.counts == pytest.approx(0.7)


def test_tree_spends_epsilon_over_h_max_on_every_level_and_eps_in_total():
    X, y = numeric_data()
    tree = grow_tree(X, y, NUMERIC_SCHEMA, epsilon=0.8, rng=rng(), h_max=5)
    assert [s.level for s in tree.spends] == [1, 2, 3, 4, 5]
    assert [s.purpose for s in tree.spends] == ["tree.split"] * 4 + ["tree.leaves"]
    assert all(s.epsilon == pytest.approx(0.8 / 5) for s in tree.spends)
    assert tree.epsilon == pytest.approx(0.8)


def test_a_level_that_branches_on_categorical_values_only_spends_nothing():
    schema = PublicSchema(
        attributes=(CategoricalAttribute("c", ("x", "y")), CategoricalAttribute("k", (1, 2, 3))),
        label=ClassLabels((0, 1)),
    )
    X = np.array([[0, 0], [1, 2], [0, 1], [1, 1]])
    tree = grow_tree(X, [0, 1, 0, 1], schema, epsilon=0.9, rng=rng(), h_max=3)
    assert [s.purpose for s in tree.spends] == ["tree.leaves"]  # two categorical levels read no row
    assert tree.epsilon == pytest.approx(0.3) and tree.n_leaves == 6


def test_whole_sharer_spends_exactly_its_eps_and_the_ledger_agrees():
    X, y = numeric_data()
    tree = share_predictor(X, y, NUMERIC_SCHEMA, epsilon=1.0, rng=rng(1), h_max=6)
    shared = share_data(tree, X, [tree], epsilon=1.0, rng=rng(2), p=4)
    assert tree.epsilon == pytest.approx(0.5)
    assert sum(s.epsilon for s in shared.spends if s.purpose == "synth.counts") == pytest.approx(0.5)
    assert shared.epsilon == pytest.approx(1.0)
    ledger = PrivacyLedger("sharer", neighbouring=ROW, budget=(1.0 + 1e-12, 0.0), theorem="basic")
    for step in ledger_steps(shared.spends):
        ledger.spend(step.eps, mechanism=step.mechanism)
    assert ledger.total().eps == pytest.approx(1.0)


def test_pfds_minus_reads_no_further_data():
    X, y = numeric_data()
    tree = grow_tree(X, y, NUMERIC_SCHEMA, epsilon=0.5, rng=rng(), h_max=4)
    synthetic = opt_private_gen(tree, X, epsilon=0.5, rng=rng(1), consistency=False)
    assert synthetic.spends == tree.spends and not synthetic.consistent


def test_replace_neighbours_double_the_leaf_noise():
    X, y = numeric_data(30)
    spread = {}
    for neighbours in ("add_remove", "replace"):
        generator = rng(12)
        trees = [
            grow_tree(X, y, NUMERIC_SCHEMA, epsilon=1.0, rng=generator, h_max=1, neighbours=neighbours)
            for _ in range(400)
        ]
        true = np.bincount(y, minlength=2)
        spread[neighbours] = np.mean([np.abs(tree.counts[0] - true).mean() for tree in trees])  # E|Lap(b)| = b
    assert spread["add_remove"] == pytest.approx(1.0, rel=0.15)
    assert spread["replace"] == pytest.approx(2.0, rel=0.15)


# --- the split selection


def test_max_operator_counts_the_majority_class_on_each_side():
    values = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9])
    labels = np.array([0, 0, 1, 1, 1, 0])
    utilities = max_operator_utilities(values, labels, [0.25, 0.5, 0.95], n_classes=2)
    # v=0.25: left {0,0} -> 2, right {1,1,1,0} -> 3; v=0.5: {0,0,1} -> 2, {1,1,0} -> 2; v=0.95: all left -> 3 + 0
    assert utilities.tolist() == [5.0, 4.0, 3.0]


def test_exponential_split_selection_follows_exp_eps_u_over_2():
    data = np.random.default_rng(5)
    values = data.random(40)
    labels = (values + data.normal(0, 0.2, 40) > 0.5).astype(int)
    candidates = np.array([0.05, 0.2, 0.35, 0.5, 0.65, 0.8])
    epsilon, draws = 0.6, 12_000
    utilities = max_operator_utilities(values, labels, candidates, n_classes=2)
    weights = np.exp(epsilon * utilities / 2)  # sensitivity 1: P(v) ∝ exp(eps u(v) / (2 * 1))
    expected = draws * weights / weights.sum()
    generator = rng(11)
    picks = [
        select_split(values, labels, candidates, n_classes=2, epsilon=epsilon, rng=generator) for _ in range(draws)
    ]
    observed = np.bincount(picks, minlength=candidates.size)
    assert len(set(utilities.tolist())) > 2 and expected.min() > 50  # a test with power
    assert chisquare(observed, expected).pvalue > 1e-3


def test_with_huge_eps_the_root_split_separates_separable_classes():
    schema = PublicSchema(attributes=(NumericAttribute("a", 0.0, 1.0),), label=ClassLabels((0, 1)))
    X = np.linspace(0, 1, 400)[:, None]
    y = (X[:, 0] >= 0.5).astype(int)
    tree = grow_tree(X, y, schema, epsilon=HUGE_EPS, rng=rng(3), h_max=2, t=200)
    assert tree.attribute[0] == 0 and abs(tree.threshold[0] - 0.5) < 0.02
    assert (tree.predict_codes(X) == y).mean() > 0.98


def test_tree_respects_max_leaves_and_uses_a_categorical_attribute_once_per_path():
    X, y = mixed_data()
    for choice_mode in ("level", "node"):
        tree = grow_tree(
            X, y, MIXED_SCHEMA, epsilon=1.0, rng=rng(4), h_max=8, max_leaves=40, attribute_choice=choice_mode
        )
        assert tree.n_leaves <= 40
        _, _, fixed = tree.leaf_regions()
        assert fixed.shape == (tree.n_leaves, 4)  # construction checks each categorical attribute once per path


def test_numeric_candidates_come_from_the_public_interval_not_the_data():
    X = np.column_stack([np.full(50, 0.5), np.zeros(50)])  # every row has a = 0.5
    tree = grow_tree(X, np.zeros(50, int), NUMERIC_SCHEMA, epsilon=1.0, rng=rng(6), h_max=6)
    numeric = tree.attribute >= 0
    assert np.unique(tree.threshold[numeric]).size == numeric.sum()  # fresh public draws, not data values
    assert not np.any(tree.threshold[tree.attribute == 0] == 0.5)


# --- wire form


def test_tree_survives_plain_form_and_msgpack():
    X, y = mixed_data()
    tree = grow_tree(X, y, MIXED_SCHEMA, epsilon=1.0, rng=rng(), h_max=5)
    back = PrivateTree.from_plain(msgpack.unpackb(msgpack.packb(tree.to_plain())), schema=MIXED_SCHEMA)
    assert np.array_equal(back.counts, tree.counts) and back.spends == tree.spends
    assert np.array_equal(back.predict_codes(X), tree.predict_codes(X))
    assert np.array_equal(back.attribute, tree.attribute) and back.h_max == tree.h_max


def _plain_tree() -> dict:
    X, y = mixed_data()
    return grow_tree(X, y, MIXED_SCHEMA, epsilon=1.0, rng=rng(7), h_max=4, attribute_choice="node").to_plain()


def _first(plain: dict, key: str, predicate) -> int:
    return next(i for i, v in enumerate(plain[key]) if predicate(i, v))


def _break(plain: dict, how: str) -> None:
    numeric = _first(plain, "threshold", lambda i, v: v is not None)
    categorical = _first(plain, "attribute", lambda i, v: v in (1, 3))
    leaf = _first(plain, "n_children", lambda i, v: v == 0)
    if how == "missing key":
        del plain["counts"]
    elif how == "unknown key":
        plain["extra"] = 1
    elif how == "version":
        plain["version"] = 2
    elif how == "threshold outside region":
        plain["threshold"][numeric] = 1e9
    elif how == "threshold on a categorical split":
        plain["threshold"][categorical] = 0.5
    elif how == "string attribute":
        plain["attribute"][0] = "age"
    elif how == "unknown attribute column":
        plain["attribute"][numeric] = 17
    elif how == "children do not add up":
        plain["n_children"][leaf] = 2
    elif how == "counts too short":
        plain["counts"].pop()
    elif how == "nan count":
        plain["counts"][0] = float("nan")
    elif how == "not a map":
        plain.clear()
    elif how == "bad schema":
        plain["schema"]["attributes"][0]["lo"] = 500.0
    elif how == "bad spend":
        plain["spends"][0]["epsilon"] = -1


@pytest.mark.parametrize(
    "how",
    [
        "missing key",
        "unknown key",
        "version",
        "threshold outside region",
        "threshold on a categorical split",
        "string attribute",
        "unknown attribute column",
        "children do not add up",
        "counts too short",
        "nan count",
        "not a map",
        "bad schema",
        "bad spend",
    ],
)
def test_malformed_plain_tree_is_refused_with_the_path_of_the_bad_field(how):
    plain = _plain_tree()
    _break(plain, how)
    with pytest.raises(MalformedPlain, match=r"Malformed plain input at \$"):
        PrivateTree.from_plain(plain)


def test_plain_tree_of_another_schema_is_refused():
    plain = _plain_tree()
    other = PublicSchema(attributes=MIXED_SCHEMA.attributes, label=ClassLabels(("low", "high", "mid")))
    with pytest.raises(MalformedPlain, match=r"\$\.schema"):
        PrivateTree.from_plain(plain, schema=other)


def test_malformed_threshold_error_names_the_node():
    plain = _plain_tree()
    node = _first(plain, "threshold", lambda i, v: v is not None)
    plain["threshold"][node] = -3.0
    with pytest.raises(MalformedPlain, match=rf"\$\.threshold\[{node}\]"):
        PrivateTree.from_plain(plain)


# --- optPrivateGen: noisy counts and consistency


def _counts_case(seed: int, p: int, n: int = 300):
    data = np.random.default_rng(seed)
    X = np.column_stack(
        [data.uniform(0, 100, n) ** 0.5 * 10, data.integers(0, 3, n), data.random(n) ** 3, data.integers(0, 2, n)]
    )
    y = np.where(data.random(n) < 0.3, "high", "low")
    tree = grow_tree(X, y, MIXED_SCHEMA, epsilon=0.3, rng=rng(seed), h_max=6, attribute_choice="node")
    noisy = noisy_node_counts(tree, X, epsilon=0.3, rng=rng(seed + 100), p=p)
    return tree, X, noisy


@pytest.mark.parametrize("seed,p", [(0, 2), (1, 3), (2, 4), (3, 6)])
def test_consistent_counts_are_sums_of_non_negative_leaves(seed, p):
    tree, _, noisy = _counts_case(seed, p)
    result = consistent_counts(tree, noisy)
    assert (result.leaves >= 0).all()
    values = np.zeros(tree.n_nodes)  # every node's value, summed up from the leaves
    values[tree.leaves] = result.leaves
    parent = tree.parent
    for level in range(tree.depth, 1, -1):
        nodes = tree.level_nodes(level)
        np.add.at(values, parent[nodes], values[nodes])
    assert np.allclose(result.node_values, values[result.nodes], rtol=0, atol=1e-9)
    children_sum = np.bincount(parent[1:], weights=values[1:], minlength=tree.n_nodes)
    inner = tree.n_children > 0
    assert np.allclose(values[inner], children_sum[inner], rtol=0, atol=1e-9)  # parent = sum of children


@pytest.mark.parametrize("seed,p", [(0, 2), (1, 3), (2, 4), (3, 6), (4, 4)])
def test_consistent_counts_are_never_further_from_the_truth_than_the_noisy_ones(seed, p):
    tree, X, noisy = _counts_case(seed, p)
    result = consistent_counts(tree, noisy)
    true_nodes, true_leaves = exact_node_counts(tree, X, p=p)
    noisy_error = weighted_distance(
        noisy.values, noisy.leaf_values, true_nodes, true_leaves, result.node_weights, result.leaf_weight
    )
    assert result.weighted_distance(true_nodes, true_leaves) <= noisy_error * (1 + 1e-9)


@pytest.mark.parametrize("seed,p", [(0, 2), (1, 4), (5, 6)])
def test_dual_newton_solver_matches_scipy_nnls_on_the_weighted_design(seed, p):
    tree, _, noisy = _counts_case(seed, p)
    newton = consistent_counts(tree, noisy, solver="newton")
    reference = consistent_counts(tree, noisy, solver="nnls")
    assert (noisy.leaf_values < 0).any()  # the bound is active somewhere
    assert np.allclose(newton.leaves, reference.leaves, atol=1e-6)
    objective = lambda r: r.weighted_distance(noisy.values, noisy.leaf_values)  # noqa: E731
    assert objective(newton) <= objective(reference) + 1e-8


def test_default_weights_are_one_over_the_number_of_nodes_of_each_level():
    tree, _, noisy = _counts_case(2, 4)
    result = consistent_counts(tree, noisy)
    for level in (1, 2, 3):
        on_level = noisy.levels == level
        assert np.allclose(result.node_weights[on_level], 1 / tree.level_nodes(level).size)
    assert result.leaf_weight == pytest.approx(1 / tree.n_leaves)


def test_noisy_counts_refuse_p_above_h_max():
    tree, X, _ = _counts_case(0, 2)
    with pytest.raises(ValueError, match="'p' parameter of noisy_node_counts"):
        noisy_node_counts(tree, X, epsilon=1.0, rng=rng(), p=tree.h_max + 1)


# --- synthesis


def test_synthetic_records_lie_inside_their_leaf_regions():
    X, y = mixed_data()
    tree = grow_tree(X, y, MIXED_SCHEMA, epsilon=1.0, rng=rng(8), h_max=6, attribute_choice="node")
    counts = np.random.default_rng(0).uniform(0, 6, tree.n_leaves)
    records, leaf = synthesize(tree, counts, rng=rng(9))
    assert np.array_equal(np.bincount(leaf, minlength=tree.n_leaves), np.floor(counts + 0.5))
    assert np.array_equal(tree.leaf_of(records), leaf)  # routing each record leads back to its leaf
    lo, hi, fixed = tree.leaf_regions()
    numeric = ~MIXED_SCHEMA.is_categorical
    assert (records[:, numeric] >= lo[leaf][:, numeric]).all() and (records[:, numeric] < hi[leaf][:, numeric]).all()
    pinned = fixed[leaf] >= 0
    assert np.array_equal(records[pinned], fixed[leaf][pinned])
    MIXED_SCHEMA.check_rows(records, "records", "test")  # inside the public domain


def test_synthetic_data_size_tracks_the_consistent_counts():
    X, y = numeric_data(2000)
    tree = grow_tree(X, y, NUMERIC_SCHEMA, epsilon=1.0, rng=rng(), h_max=6)
    synthetic = opt_private_gen(tree, X, epsilon=1.0, rng=rng(1), p=4)
    assert abs(synthetic.X.shape[0] - 2000) < 100
    assert np.array_equal(tree.leaf_of(synthetic.X), synthetic.leaf)


# --- labelling


def test_majority_vote_on_hand_built_votes():
    votes = np.array([[0, 1, 2, 1], [1, 1, 0, 2], [1, 0, 2, 0]])
    assert majority_vote(votes, n_classes=3).tolist() == [1, 1, 2, 0]  # last column: 1-1-1 tie -> smallest
    tied = np.array([[0] * 400, [1] * 400])
    broken = majority_vote(tied, n_classes=2, rng=rng())
    assert set(broken.tolist()) == {0, 1}


def _stump(schema: PublicSchema, threshold: float, left: int, right: int) -> PrivateTree:
    counts = np.zeros((2, schema.n_codes))
    counts[0, left], counts[1, right] = 5.0, 5.0
    return PrivateTree(
        schema=schema,
        attribute=[0, -1, -1],
        threshold=[threshold, np.nan, np.nan],
        n_children=[2, 0, 0],
        counts=counts,
        h_max=2,
        t=1,
        spends=(Spend("tree.leaves", 2, 0.1, "laplace"),),
    )


def test_records_get_the_label_most_trees_give():
    trees = [_stump(NUMERIC_SCHEMA, 0.5, 0, 1), _stump(NUMERIC_SCHEMA, 0.3, 0, 1), _stump(NUMERIC_SCHEMA, 0.7, 1, 0)]
    X = np.array([[0.1, 0.0], [0.4, 0.0], [0.6, 0.0], [0.9, 0.0]])
    # tree votes: a=0.1 -> 0,0,1; 0.4 -> 0,1,1; 0.6 -> 1,1,1; 0.9 -> 1,1,0
    assert vote_codes(trees, X).tolist() == [0, 1, 1, 1]
    synthetic = opt_private_gen(trees[0], np.zeros((1, 2)), epsilon=1.0, rng=rng(), consistency=False)
    labelled = label_synthetic(trees, synthetic, rng=rng())
    assert np.array_equal(labelled.codes, vote_codes(trees, synthetic.X))
    assert labelled.epsilon == pytest.approx(0.1)


def test_regression_labels_are_drawn_inside_the_winning_bucket():
    labels = RegressionLabels(0.0, 10.0)
    assert bucket_of([0.0, 0.99, 1.0, 9.5, 10.0], labels).tolist() == [0, 0, 1, 9, 9]
    drawn = draw_in_bucket(np.array([3] * 500), labels, rng=rng())
    assert drawn.min() >= 3.0 and drawn.max() <= 4.0 and drawn.std() > 0.2


def test_regression_pipeline_labels_lie_in_the_public_range():
    schema = PublicSchema(attributes=(NumericAttribute("a", 0, 1),), label=RegressionLabels(-1.0, 1.0))
    data = np.random.default_rng(3)
    X = data.random((500, 1))
    y = np.clip(2 * X[:, 0] - 1 + data.normal(0, 0.1, 500), -1, 1)
    trees = [share_predictor(X, y, schema, epsilon=2.0, rng=rng(s), h_max=4) for s in range(3)]
    shared = share_data(trees[0], X, trees, epsilon=2.0, rng=rng(5), p=3)
    assert shared.y.dtype == np.float64 and (-1 <= shared.y).all() and (shared.y <= 1).all()
    edges = schema.label.edges
    assert ((shared.y >= edges[shared.codes]) & (shared.y <= edges[shared.codes + 1])).all()


# --- DP-Pred baselines


def _classification(n=3000, seed=0):
    data = np.random.default_rng(seed)
    X = data.normal(size=(n, 4))
    y = np.where(X @ np.array([1.5, -2.0, 0.5, 0.0]) + 0.3 + data.normal(0, 0.5, n) > 0, 1, -1)
    return X, y


@pytest.mark.parametrize("loss", ["logistic", "huber"])
def test_objective_perturbation_is_finite_and_approaches_the_non_private_fit(loss):
    X, y = _classification()
    reference = erm_classifier(X, y, loss=loss, regularization=1e-3, norm_bound=4.0)
    private = objective_perturbation(X, y, loss=loss, epsilon=HUGE_EPS, regularization=1e-3, norm_bound=4.0, rng=rng())
    assert np.allclose(private.coef, reference.coef, atol=1e-3) and private.intercept == pytest.approx(
        reference.intercept, abs=1e-3
    )
    noisy = objective_perturbation(
        X[:50], y[:50], loss=loss, epsilon=0.1, regularization=1e-4, norm_bound=4.0, rng=rng(1)
    )
    assert np.isfinite(noisy.coef).all() and math.isfinite(noisy.intercept) and noisy.epsilon == 0.1
    assert (reference.predict(X) == y).mean() > 0.85 and reference.epsilon == math.inf


def test_dp_pred_ensembles_vote_and_average():
    X, y = _classification()
    models = [
        objective_perturbation(
            X[i::3], y[i::3], loss="logistic", epsilon=5.0, regularization=1e-3, norm_bound=4.0, rng=rng(i)
        )
        for i in range(3)
    ]
    votes = np.vstack([m.predict(X) for m in models])
    assert np.array_equal(vote_classifiers(models, X), np.where(votes.sum(axis=0) > 0, 1, -1))
    Xr = np.random.default_rng(1).random((200, 2))
    regressors = [erm_regressor(Xr, Xr @ [1.0, 2.0], x_bounds=[(0, 1)] * 2, y_bounds=(0, 3)) for _ in range(2)]
    assert np.allclose(average_regressors(regressors, Xr), regressors[0].predict(Xr))


def test_functional_mechanism_approaches_least_squares_with_huge_eps():
    data = np.random.default_rng(2)
    X = data.uniform(0, 2, size=(4000, 3))
    y = np.clip(X @ np.array([0.5, -0.2, 0.1]) + 0.3 + data.normal(0, 0.05, 4000), -1, 2)
    bounds = [(0.0, 2.0)] * 3
    reference = erm_regressor(X, y, x_bounds=bounds, y_bounds=(-1, 2), regularization=1e-6)
    private = functional_mechanism(
        X, y, epsilon=HUGE_EPS, x_bounds=bounds, y_bounds=(-1, 2), regularization=1e-6, rng=rng()
    )
    assert np.allclose(private.coef, reference.coef, atol=1e-3) and np.allclose(
        reference.coef, [0.5, -0.2, 0.1], atol=0.02
    )
    noisy = functional_mechanism(X[:30], y[:30], epsilon=0.1, x_bounds=bounds, y_bounds=(-1, 2), rng=rng(1))
    assert np.isfinite(noisy.coef).all() and math.isfinite(noisy.intercept)


def test_functional_mechanism_sensitivity_counts_features_bounded_at_zero():
    # diffprivlib#105 gives the x^2 coefficient sensitivity 0 on [0, 100]; its true range is 10,000
    assert functional_mechanism_sensitivity([(0.0, 100.0)], (0.0, 1.0), fit_intercept=False) == 100.0 + 10_000.0
    assert functional_mechanism_sensitivity([(0.0, 100.0)], (0.0, 1.0)) == 100.0 + 10_000.0 + 1.0 + 100.0


def test_functional_mechanism_sensitivity_bounds_every_pair_of_rows():
    x_bounds, y_bounds = np.array([(-1.0, 2.0), (0.0, 3.0)]), (-1.0, 0.5)
    bound = functional_mechanism_sensitivity(x_bounds, y_bounds, fit_intercept=False)
    grid = np.array(
        [(a, b, c) for a in np.linspace(-1, 2, 7) for b in np.linspace(0, 3, 7) for c in np.linspace(-1, 0.5, 4)]
    )
    coefficients = np.column_stack(
        [grid[:, 2] * grid[:, 0], grid[:, 2] * grid[:, 1], grid[:, 0] ** 2, grid[:, 0] * grid[:, 1], grid[:, 1] ** 2]
    )
    largest = np.abs(coefficients[:, None, :] - coefficients[None, :, :]).sum(axis=2).max()
    assert largest <= bound + 1e-12


# --- partition among agents


def test_partition_agents_splits_every_row_once_by_a_numeric_attribute():
    X, _ = mixed_data()
    shares = partition_agents(X, MIXED_SCHEMA, attribute="age", agents=4, rng=rng())
    assert np.array_equal(np.sort(np.concatenate(shares)), np.arange(X.shape[0]))
    with pytest.raises(ValueError, match="numeric attribute"):
        partition_agents(X, MIXED_SCHEMA, attribute="colour", agents=4, rng=rng())


# --- bad input


def test_nan_in_the_rows_is_refused_naming_the_attribute():
    X, y = numeric_data()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="Attribute 'b' must be finite"):
        grow_tree(X, y, NUMERIC_SCHEMA, epsilon=1.0, rng=rng())


def test_unknown_and_missing_attributes_are_refused():
    with pytest.raises(ValueError, match="Unknown attribute 'height'"):
        MIXED_SCHEMA.encode({"age": [1], "colour": ["red"], "score": [0.1], "flag": ["no"], "height": [2]})
    with pytest.raises(ValueError, match="Missing attribute 'flag'"):
        MIXED_SCHEMA.encode({"age": [1], "colour": ["red"], "score": [0.1]})
    with pytest.raises(ValueError, match="Unknown attribute 'height'"):
        MIXED_SCHEMA.index("height")


def test_values_outside_the_public_domain_are_refused():
    with pytest.raises(ValueError, match=r"'age' must lie in its public domain \[0.0, 100.0\]. Got 130.0 at row 1"):
        MIXED_SCHEMA.encode({"age": [1, 130], "colour": ["red", "blue"], "score": [0.1, 0.2], "flag": ["no", "no"]})
    with pytest.raises(ValueError, match="'colour' must take a value of its public domain"):
        MIXED_SCHEMA.encode({"age": [1], "colour": ["purple"], "score": [0.1], "flag": ["no"]})
    with pytest.raises(ValueError, match="'colour' must hold the code"):
        MIXED_SCHEMA.check_rows([[1.0, 3.0, 0.1, 0.0]], "X", "test")
    with pytest.raises(ValueError, match="public classes"):
        grow_tree(*numeric_data(10)[:1], [0, 1, 2, 0, 1, 0, 1, 0, 1, 0], NUMERIC_SCHEMA, epsilon=1.0, rng=rng())


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"epsilon": 0}, "'epsilon' parameter of grow_tree must be a positive finite real number. Got 0 instead."),
        ({"h_max": 0}, "'h_max' parameter of grow_tree must be an integer >= 1. Got 0 instead."),
        ({"t": 2.5}, "'t' parameter of grow_tree must be an integer. Got float instead."),
        ({"attribute_choice": "path"}, "'attribute_choice' parameter of grow_tree must be one of 'level', 'node'"),
        ({"neighbours": "swap"}, "'neighbours' parameter of grow_tree must be one of"),
        ({"rng": 3}, "'rng' parameter of grow_tree must be a numpy.random.Generator"),
    ],
)
def test_bad_parameters_are_named_in_the_error(kwargs, message):
    X, y = numeric_data(20)
    arguments = {"epsilon": 1.0, "rng": rng(), **kwargs}
    with pytest.raises((TypeError, ValueError), match=message.replace("(", r"\(").replace(")", r"\)")):
        grow_tree(X, y, NUMERIC_SCHEMA, **arguments)


def test_bad_schemas_are_refused():
    with pytest.raises(ValueError, match="'hi' parameter of NumericAttribute must be greater than lo"):
        NumericAttribute("x", 1.0, 1.0)
    with pytest.raises(ValueError, match="distinct"):
        CategoricalAttribute("c", ("a", "a"))
    with pytest.raises(ValueError, match="distinct names"):
        PublicSchema(attributes=(NumericAttribute("x", 0, 1), NumericAttribute("x", 0, 2)), label=ClassLabels((0, 1)))


def test_schema_plain_form_round_trips_and_is_checked():
    schema = PublicSchema(attributes=MIXED_SCHEMA.attributes, label=RegressionLabels(0.0, 5.0, buckets=7))
    assert PublicSchema.from_plain(msgpack.unpackb(msgpack.packb(schema.to_plain()))) == schema
    plain = copy.deepcopy(schema.to_plain())
    plain["attributes"][1]["kind"] = "ordinal"
    with pytest.raises(MalformedPlain, match=r"\$\.attributes\[1\]"):
        PublicSchema.from_plain(plain)


def test_objective_perturbation_refuses_labels_other_than_plus_minus_one():
    X, y = _classification(50)
    with pytest.raises(ValueError, match="labels -1 and \\+1"):
        objective_perturbation(X, (y > 0).astype(int) * 2, loss="logistic", epsilon=1.0, regularization=1e-3, rng=rng())
    with pytest.raises(ValueError, match="'loss' parameter of objective_perturbation"):
        objective_perturbation(X, y, loss="hinge", epsilon=1.0, regularization=1e-3, rng=rng())
