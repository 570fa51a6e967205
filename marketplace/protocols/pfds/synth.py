"""optPrivateGen (the paper's Algorithm 5): noisy node counts, consistency, synthetic records.

1. **Noisy node counts** (:func:`noisy_node_counts`): the number of rows at every node of levels
   1..p-1, plus Laplace noise with epsilon/(p-1) per level (a level's nodes hold disjoint rows, so
   one level's vector of counts has L1 sensitivity 1, or 2 when a row is replaced). The leaves'
   counts are the tree's noisy class counts, summed: no new query.
2. **Consistency** (:func:`consistent_counts`): find leaf counts x >= 0 minimising
   sum_levels lambda_i sum_nodes (S_k(x) - c~_k)^2 + lambda_leaf sum_leaves (x_j - c~_j)^2,
   S_k(x) the sum of the leaves under node k, lambda_i = 1/m_i (m_i nodes on level i) as in the
   paper. Counts above the leaves are sums of leaves, so parent = sum of children holds by
   construction and the leaves are the only variables: a non-negative least-squares problem.
   It is post-processing, so it costs nothing.
3. **Synthesis** (:func:`synthesize`): round(x_j) records per leaf, each drawn uniformly in the
   leaf's public region (uniform on its numeric intervals and on the public values of the
   categorical attributes that no split above it fixed).

**Solvers.** ``solver="nnls"`` hands the weighted design (rows sqrt(lambda) x indicator of the
leaves under each node, and sqrt(lambda_leaf) x identity) to ``scipy.optimize.nnls``: exact, but
dense and cubic in the number of leaves, so only for small trees (it is the reference in the tests).
``solver="newton"`` (default) solves the same problem through its dual, which is unconstrained and
has one variable per node of levels 1..p-1 only: by the KKT conditions every leaf is
x_j = max(c~_j - t_j / (2 lambda_leaf), 0), t_j the sum of the dual variables of j's counted
ancestors, and the dual is a smooth, strongly concave, piecewise-quadratic function of them.
Newton's method with a backtracking line search and a sparse solve (the Hessian couples a node with
its ancestors only) reaches the optimum in a handful of steps, in time linear in the number of
leaves. Both return leaves that are >= 0 and node counts that are exact sums of leaves.

**PFDS^-** (the paper's ablation, ``consistency=False`` in :func:`opt_private_gen`): the leaves'
noisy totals, clipped at 0, are used directly and no node count is queried, so that stage spends
nothing.

Because the true counts satisfy the constraints, the consistent counts are the projection of the
noisy ones onto a convex set containing the truth (in the weighted norm), and so never further from
the truth than the noisy counts in that norm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike
from scipy.optimize import nnls
from scipy.sparse.linalg import spsolve

from marketplace.privacy.mechanisms import Laplace

from ._checks import (
    choice,
    count_sensitivity,
    generator,
    int_at_least,
    noise_generator,
    positive_real,
    real_vector,
)
from .budget import LevelEpsilon, Released, Spend, per_level_epsilon, release_name, total_epsilon, unchanged
from .tree import PrivateTree

__all__ = [
    "SOLVERS",
    "DEFAULT_MAX_RECORDS",
    "NNLS_MAX_LEAVES",
    "NoisyCounts",
    "ConsistentCounts",
    "SyntheticData",
    "exact_node_counts",
    "noisy_node_counts",
    "consistent_counts",
    "synthesize",
    "opt_private_gen",
]

SOLVERS = ("newton", "nnls")
DEFAULT_MAX_RECORDS = 5_000_000
""":func:`synthesize` refuses to draw more records than this unless told otherwise (PFDS^- at a small
eps can ask for millions: every leaf's positive noise becomes records)."""
NNLS_MAX_LEAVES = 4096
"""The largest tree ``solver="nnls"`` accepts (its dense design has (nodes + leaves) x leaves entries)."""

_DENSE_DUAL = 1500  # up to this many counted nodes the Newton system is solved densely
_ARMIJO = 1e-4


def _check_tree(tree: Any, where: str) -> PrivateTree:
    if not isinstance(tree, PrivateTree):
        raise TypeError(f"The 'tree' parameter of {where} must be a PrivateTree. Got {type(tree).__name__} instead.")
    return tree


def _subtree_sums(tree: PrivateTree, leaf_values: np.ndarray) -> np.ndarray:
    """For every node, the sum of ``leaf_values`` over the leaves under it."""
    values = np.zeros(tree.n_nodes)
    values[tree.leaves] = leaf_values
    parent = tree.parent
    for level in range(tree.depth, 1, -1):
        nodes = tree.level_nodes(level)
        values += np.bincount(parent[nodes], weights=values[nodes], minlength=tree.n_nodes)
    return values


def _counted_levels(tree: PrivateTree, p: int) -> list[np.ndarray]:
    return [tree.level_nodes(level) for level in range(1, min(p - 1, tree.depth) + 1)]


# ---------------------------------------------------------------------------------------------
# Step 1: noisy counts.


@dataclass(frozen=True, eq=False)
class NoisyCounts:
    """Noisy row counts of the nodes on levels 1..p-1 (``nodes``, ``values``) and the leaves' noisy
    totals taken from the tree (``leaf_values``). ``spends`` are this step's, one per level."""

    p: int
    nodes: np.ndarray
    levels: np.ndarray
    values: np.ndarray
    leaf_values: np.ndarray
    spends: tuple[Spend, ...]

    @property
    def epsilon(self) -> float:
        return total_epsilon(self.spends)


def exact_node_counts(tree: PrivateTree, X: Any, *, p: int = 4) -> tuple[np.ndarray, np.ndarray]:
    """The true (not private) row counts of the nodes on levels 1..p-1 and of the leaves, in the
    order of :func:`noisy_node_counts`. For evaluation and tests only: releasing them is not DP."""
    tree = _check_tree(tree, "exact_node_counts")
    p = int_at_least(p, 2, "p", "exact_node_counts")
    leaf_totals = np.bincount(tree.leaf_of(X), minlength=tree.n_leaves).astype(np.float64)
    sums = _subtree_sums(tree, leaf_totals)
    levels = _counted_levels(tree, p)
    return sums[np.concatenate(levels)], leaf_totals


def noisy_node_counts(
    tree: PrivateTree,
    X: Any,
    *,
    epsilon: float | None = None,
    rng: np.random.Generator,
    p: int = 4,
    secure: bool = False,
    level_epsilon: LevelEpsilon | None = None,
    released: Released = unchanged,
) -> NoisyCounts:
    """Laplace-noised counts of the nodes on levels 1..p-1 of ``tree`` over rows ``X``, epsilon/(p-1)
    per level (levels the tree does not have spend nothing), or ``level_epsilon("synth.counts", level)``
    on level ``level`` when that is given instead (a pfds sharer's release plan). Uses the tree's
    neighbouring relation. Each level's noisy counts leave through ``released`` as they are drawn
    (``pfds.synth.counts.level{i}``: a sharer passes its plan's
    :meth:`~marketplace.privacy.plan.ReleasePlan.released`)."""
    where = "noisy_node_counts"
    tree = _check_tree(tree, where)
    p = int_at_least(p, 2, "p", where)
    level_epsilon = per_level_epsilon(epsilon, level_epsilon, p - 1, where)
    rng, secure = noise_generator(rng, secure, where)
    if p > tree.h_max:
        raise ValueError(
            f"The 'p' parameter of {where} must be at most the tree's h_max ({tree.h_max}): the levels "
            f"counted are 1..p-1, above the leaves. Got {p} instead."
        )
    sensitivity = count_sensitivity(tree.neighbours, where)
    true_nodes, _ = exact_node_counts(tree, X, p=p)
    levels = _counted_levels(tree, p)
    values, spends, start = [], [], 0
    for level, nodes in enumerate(levels, start=1):
        eps = positive_real(level_epsilon("synth.counts", level), "level_epsilon", where)
        mechanism = Laplace(epsilon=eps, sensitivity=sensitivity, rng=rng, secure=secure)
        noisy = np.atleast_1d(mechanism.randomise(true_nodes[start : start + nodes.size]))
        values.append(np.atleast_1d(np.asarray(released(release_name("synth.counts", level), noisy), dtype=np.float64)))
        spends.append(Spend("synth.counts", level, eps, "laplace"))
        start += nodes.size
    node_levels = np.concatenate([np.full(nodes.size, level) for level, nodes in enumerate(levels, start=1)])
    return NoisyCounts(
        p=p,
        nodes=np.concatenate(levels),
        levels=node_levels,
        values=np.concatenate(values),
        leaf_values=tree.counts.sum(axis=1),
        spends=tuple(spends),
    )


# ---------------------------------------------------------------------------------------------
# Step 2: consistency.


@dataclass(frozen=True, eq=False)
class ConsistentCounts:
    """Leaf counts ``leaves`` >= 0 and the counts of the nodes on levels 1..p-1 they imply
    (``node_values``, exact sums of leaves), with the weights of the objective."""

    leaves: np.ndarray
    nodes: np.ndarray
    node_values: np.ndarray
    node_weights: np.ndarray
    leaf_weight: float
    solver: str
    iterations: int

    def weighted_distance(self, node_reference: Any, leaf_reference: Any) -> float:
        """sum lambda_k (S_k - ref_k)^2 + lambda_leaf sum (x_j - ref_j)^2: the objective's norm."""
        node_reference = real_vector(
            node_reference, "node_reference", "ConsistentCounts.weighted_distance", size=self.nodes.size
        )
        leaf_reference = real_vector(
            leaf_reference, "leaf_reference", "ConsistentCounts.weighted_distance", size=self.leaves.size
        )
        return weighted_distance(
            self.node_values, self.leaves, node_reference, leaf_reference, self.node_weights, self.leaf_weight
        )


def weighted_distance(
    node_values: ArrayLike,
    leaf_values: ArrayLike,
    node_reference: np.ndarray,
    leaf_reference: np.ndarray,
    node_weights: np.ndarray,
    leaf_weight: float,
) -> float:
    """The weighted squared distance of the consistency objective between two sets of counts."""
    return float(
        np.sum(node_weights * (np.asarray(node_values) - node_reference) ** 2)
        + leaf_weight * np.sum((np.asarray(leaf_values) - leaf_reference) ** 2)
    )


def _weights(tree: PrivateTree, noisy: NoisyCounts, weights: Sequence[float] | None) -> tuple[np.ndarray, float]:
    """lambda per counted node (by level) and lambda for the leaves: 1/m_i by default, as in the paper."""
    depth = int(noisy.levels.max()) if noisy.levels.size else 0
    if weights is None:
        per_level = np.array([1.0 / tree.level_nodes(level).size for level in range(1, depth + 1)])
        return per_level[noisy.levels - 1], 1.0 / tree.n_leaves
    values = list(weights) if isinstance(weights, (list, tuple, np.ndarray)) else None
    if values is None or len(values) != noisy.p:
        raise ValueError(
            f"The 'weights' parameter of consistent_counts must be a sequence of p = {noisy.p} positive "
            f"weights (levels 1..p-1, then the leaves). Got {weights!r} instead."
        )
    values = [positive_real(value, "weights", "consistent_counts") for value in values]
    return np.array(values[:-1])[noisy.levels - 1], values[-1]


def _groups(tree: PrivateTree, noisy: NoisyCounts) -> tuple[np.ndarray, sp.csr_matrix]:
    """For each leaf, the position (in ``noisy.nodes``) of its deepest counted ancestor-or-self; and
    the M x M matrix P with P[k, g] = 1 when counted node k is an ancestor-or-self of counted node g."""
    position = np.full(tree.n_nodes, -1, dtype=np.int64)
    position[noisy.nodes] = np.arange(noisy.nodes.size)
    parent = tree.parent
    group = position.copy()
    for level in range(2, tree.depth + 1):
        nodes = tree.level_nodes(level)
        unset = group[nodes] < 0
        group[nodes[unset]] = group[parent[nodes[unset]]]
    rows, cols, current = [], [], noisy.nodes.copy()
    columns = np.arange(noisy.nodes.size)
    while current.size:
        rows.append(position[current])
        cols.append(columns)
        keep = parent[current] >= 0
        current, columns = parent[current][keep], columns[keep]
    size = noisy.nodes.size
    ancestors = sp.csr_matrix(
        (np.ones(sum(r.size for r in rows)), (np.concatenate(rows), np.concatenate(cols))), shape=(size, size)
    )
    return group[tree.leaves], ancestors


def consistent_counts(
    tree: PrivateTree,
    noisy: NoisyCounts,
    *,
    weights: Sequence[float] | None = None,
    solver: str = "newton",
    tol: float = 1e-9,
    max_iter: int = 200,
) -> ConsistentCounts:
    """The weighted non-negative least-squares leaf counts (see the module docstring).

    ``weights``: p positive weights (levels 1..p-1, then the leaves); default 1/m_i per level.
    ``tol``: the Newton solver stops when every node's residual is below tol x (1 + largest |count|).
    """
    where = "consistent_counts"
    tree = _check_tree(tree, where)
    if not isinstance(noisy, NoisyCounts):
        raise TypeError(
            f"The 'noisy' parameter of {where} must be NoisyCounts (noisy_node_counts). "
            f"Got {type(noisy).__name__} instead."
        )
    if noisy.leaf_values.size != tree.n_leaves or (noisy.nodes.size and noisy.nodes.max() >= tree.n_nodes):
        raise ValueError(
            f"The 'noisy' parameter of {where} must hold counts of this tree's nodes and leaves. "
            f"Got counts for {noisy.leaf_values.size} leaves, the tree has {tree.n_leaves}."
        )
    solver = choice(solver, SOLVERS, "solver", where)
    tol = positive_real(tol, "tol", where)
    max_iter = int_at_least(max_iter, 1, "max_iter", where)
    node_weights, leaf_weight = _weights(tree, noisy, weights)
    group, ancestors = _groups(tree, noisy)
    if solver == "nnls":
        leaves, iterations = _solve_nnls(noisy, group, ancestors, node_weights, leaf_weight)
    else:
        leaves, iterations = _solve_dual_newton(noisy, group, ancestors, node_weights, leaf_weight, tol, max_iter)
    sums = ancestors @ np.bincount(group, weights=leaves, minlength=noisy.nodes.size)
    return ConsistentCounts(
        leaves=leaves,
        nodes=noisy.nodes,
        node_values=sums,
        node_weights=node_weights,
        leaf_weight=leaf_weight,
        solver=solver,
        iterations=iterations,
    )


def _solve_nnls(
    noisy: NoisyCounts, group: np.ndarray, ancestors: sp.csr_matrix, node_weights: np.ndarray, leaf_weight: float
) -> tuple[np.ndarray, int]:
    leaves = noisy.leaf_values.size
    if leaves > NNLS_MAX_LEAVES:
        raise ValueError(
            f"The 'solver' parameter of consistent_counts must be 'newton' for trees with more than "
            f"{NNLS_MAX_LEAVES} leaves (the nnls design is dense). Got 'nnls' for {leaves} leaves instead."
        )
    upper = (ancestors[:, group]).toarray() * np.sqrt(node_weights)[:, None]
    design = np.vstack([upper, np.sqrt(leaf_weight) * np.eye(leaves)])
    target = np.concatenate([np.sqrt(node_weights) * noisy.values, np.sqrt(leaf_weight) * noisy.leaf_values])
    solution, _ = nnls(design, target, maxiter=50 * max(leaves, 10))
    return np.maximum(solution, 0.0), 0


def _solve_dual_newton(
    noisy: NoisyCounts,
    group: np.ndarray,
    ancestors: sp.csr_matrix,
    node_weights: np.ndarray,
    leaf_weight: float,
    tol: float,
    max_iter: int,
) -> tuple[np.ndarray, int]:
    """Maximise the dual D(nu) = sum_j [lam_L (x_j - c_j)^2 + t_j x_j] - sum_k [nu_k^2/(4 lam_k) + nu_k c_k],
    x_j = max(c_j - t_j/(2 lam_L), 0), t = sums of nu over counted ancestors; grad_k = S_k - c_k - nu_k/(2 lam_k)."""
    c_nodes, c_leaves, size = noisy.values, noisy.leaf_values, noisy.values.size
    if size == 0:
        return np.maximum(c_leaves, 0.0), 0
    ancestors_t = ancestors.T.tocsr()

    def evaluate(nu: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        t = (ancestors_t @ nu)[group]
        x = np.maximum(c_leaves - t / (2 * leaf_weight), 0.0)
        sums = ancestors @ np.bincount(group, weights=x, minlength=size)
        value = (
            leaf_weight * np.sum((x - c_leaves) ** 2)
            + np.dot(t, x)
            - np.sum(nu * nu / (4 * node_weights) + nu * c_nodes)
        )
        return value, sums - c_nodes - nu / (2 * node_weights), x

    threshold = tol * (1.0 + max(np.abs(c_nodes).max(), np.abs(c_leaves).max()))
    nu = np.zeros(size)
    value, gradient, x = evaluate(nu)
    for iteration in range(1, max_iter + 1):
        if np.abs(gradient).max() <= threshold:
            return x, iteration - 1
        free = np.bincount(group, weights=(x > 0).astype(np.float64), minlength=size)
        hessian = ancestors @ sp.diags(free / (2 * leaf_weight)) @ ancestors_t + sp.diags(1 / (2 * node_weights))
        if size <= _DENSE_DUAL:
            direction = np.linalg.solve(hessian.toarray(), gradient)
        else:
            direction = spsolve(hessian.tocsc(), gradient)
        slope, step = float(np.dot(gradient, direction)), 1.0
        while True:
            new_value, new_gradient, new_x = evaluate(nu + step * direction)
            if new_value >= value + _ARMIJO * step * slope or np.abs(new_gradient).max() <= threshold:
                break
            step /= 2
            if step < 1e-12:  # no more progress in floating point
                return x, iteration
        nu, value, gradient, x = nu + step * direction, new_value, new_gradient, new_x
    if np.abs(gradient).max() > 1e3 * threshold:
        raise RuntimeError(
            f"consistent_counts did not converge in {max_iter} Newton steps "
            f"(largest residual {np.abs(gradient).max():.3g}); raise max_iter."
        )
    return x, max_iter


# ---------------------------------------------------------------------------------------------
# Step 3: synthesis.


@dataclass(frozen=True, eq=False)
class SyntheticData:
    """Unlabelled synthetic records (rows in schema order, categorical columns as codes), the leaf
    each came from, the leaf counts used, and every spend behind them: the tree's and the node
    counts' (``epsilon`` is the sharer's total for this release)."""

    X: np.ndarray
    leaf: np.ndarray
    leaf_counts: np.ndarray
    spends: tuple[Spend, ...]
    consistent: bool

    @property
    def epsilon(self) -> float:
        return total_epsilon(self.spends)


def synthesize(
    tree: PrivateTree, leaf_counts: Any, *, rng: np.random.Generator, max_records: int = DEFAULT_MAX_RECORDS
) -> tuple[np.ndarray, np.ndarray]:
    """round(x_j) records in leaf j (x_j >= 0), uniform in its public region. Returns (records, leaf index)."""
    tree = _check_tree(tree, "synthesize")
    rng = generator(rng, "synthesize")
    max_records = int_at_least(max_records, 0, "max_records", "synthesize")
    counts = real_vector(leaf_counts, "leaf_counts", "synthesize", size=tree.n_leaves)
    if (counts < 0).any():
        raise ValueError(
            f"The 'leaf_counts' parameter of synthesize must be non-negative. Got {float(counts.min())!r} instead."
        )
    sizes = np.floor(counts + 0.5).astype(np.int64)
    if sizes.sum() > max_records:
        raise ValueError(
            f"The 'leaf_counts' parameter of synthesize asks for {int(sizes.sum()):,} records, more than "
            f"max_records = {max_records:,}. Raise max_records if that many are wanted."
        )
    leaf = np.repeat(np.arange(tree.n_leaves), sizes)
    lo, hi, fixed = tree.leaf_regions()
    records = np.empty((leaf.size, tree.schema.d))
    for col, attribute in enumerate(tree.schema.attributes):
        if attribute.kind == "numeric":
            low, high = lo[leaf, col], hi[leaf, col]
            drawn = low + rng.random(leaf.size) * (high - low)
            records[:, col] = np.clip(drawn, low, np.nextafter(high, low))  # [lo, hi): a threshold belongs to the right
        else:
            value = fixed[leaf, col]
            free = value < 0
            value[free] = rng.integers(0, attribute.branching, size=int(free.sum()))
            records[:, col] = value
    return records, leaf


def opt_private_gen(
    tree: PrivateTree,
    X: Any,
    *,
    epsilon: float | None = None,
    rng: np.random.Generator,
    p: int = 4,
    consistency: bool = True,
    weights: Sequence[float] | None = None,
    solver: str = "newton",
    max_records: int = DEFAULT_MAX_RECORDS,
    secure: bool = False,
    level_epsilon: LevelEpsilon | None = None,
    released: Released = unchanged,
) -> SyntheticData:
    """Unlabelled synthetic data from ``tree`` and the sharer's rows ``X``, spending ``epsilon`` on
    the node counts of levels 1..p-1 (the paper's eps/2), or ``level_epsilon("synth.counts", level)``
    per level when that is given instead (:func:`noisy_node_counts`). ``consistency=False`` is
    PFDS^-: the leaves' clipped noisy totals are used as they are and nothing more is spent. The node
    counts leave through ``released`` (:func:`noisy_node_counts`); the records are post-processing."""
    where = "opt_private_gen"
    tree = _check_tree(tree, where)
    if not isinstance(consistency, bool):
        raise TypeError(
            f"The 'consistency' parameter of {where} must be a bool. Got {type(consistency).__name__} instead."
        )
    if consistency:
        noisy = noisy_node_counts(
            tree, X, epsilon=epsilon, rng=rng, p=p, secure=secure, level_epsilon=level_epsilon, released=released
        )
        counts = consistent_counts(tree, noisy, weights=weights, solver=solver).leaves
        spends = tree.spends + noisy.spends
    else:
        per_level_epsilon(epsilon, level_epsilon, 1, where)
        tree.schema.check_rows(X, "X", where)
        counts = np.maximum(tree.counts.sum(axis=1), 0.0)
        spends = tree.spends
    records, leaf = synthesize(tree, counts, rng=rng, max_records=max_records)
    return SyntheticData(X=records, leaf=leaf, leaf_counts=counts, spends=spends, consistent=consistency)
