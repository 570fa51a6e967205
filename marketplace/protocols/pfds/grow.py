"""Growing the sharer's differentially private decision tree (the paper's Algorithm 3, makeTree).

**Growth.** The tree grows level by level from the root (level 1) to the leaves (level h_max).

* Each level picks a random attribute among those still available (a fair coin, no data read):
  one attribute for the whole level by default (``attribute_choice="level"``, as docs/design.md §4
  says), or one per node (``"node"``, as the paper's Algorithm 3 calls selectAttribute at
  every node). A categorical attribute is used at most once on a path; numeric ones may repeat.
* A **numeric** split draws t candidate thresholds uniformly inside the node's public interval (the
  attribute's [lo, hi] narrowed by the splits above it) and picks one with the exponential mechanism
  on the **Max operator** u(v) = max_l |D_{a<v, y=l}| + max_l |D_{a>=v, y=l}| (Friedman & Schuster
  2010), whose sensitivity is 1. The candidates come from the public interval, not from the node's
  rows: drawing them from the values present in the data, one reading of the paper's "active
  domain", would reveal those values.
* A **categorical** attribute branches on every value of its public list, so the branch reads no row.
* A **leaf** holds Laplace-noised counts of each label code; its label is the code with the largest
  noisy count.

**Privacy.** Every level costs epsilon/h_max (``grow_tree``'s ``epsilon`` is what the whole tree may
spend: the paper's eps/2, so that a level costs eps/(2 h_max)). A level's nodes hold disjoint rows,
so the selections of one level together cost that once; a level that only branches on categorical
attributes costs nothing; the leaf counts form one more level. The tree records a
:class:`~marketplace.protocols.pfds.budget.Spend` per level that read data, and ``tree.epsilon`` is
their sum. Neighbouring datasets differ by one row added or removed (the paper's reading: a count
and the Max operator both have sensitivity 1). With ``neighbours="replace"`` a replaced row can leave
one node and join another of the same level, so both the leaf counts (L1 sensitivity 2) and the
level's split selections (two nodes' utilities move by 1 each) are calibrated with sensitivity 2,
which keeps the cost of a level at epsilon/h_max.

**Size.** Branching on every public value multiplies the number of leaves quickly (Adult's
native-country has 41 values). ``max_leaves`` is a public cap: a node may only take an attribute
whose branching keeps the tree within it (the choice depends on public quantities only), and a
level where no attribute fits ends the growth, its nodes becoming leaves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marketplace.privacy.mechanisms import Exponential, Laplace

from ._checks import choice, count_sensitivity, int_at_least, noise_generator, positive_real
from .budget import LevelEpsilon, Released, Spend, per_level_epsilon, release_name, unchanged
from .schema import PublicSchema
from .tree import PrivateTree

__all__ = [
    "ATTRIBUTE_CHOICES",
    "DEFAULT_MAX_LEAVES",
    "MAX_OPERATOR_SENSITIVITY",
    "grow_tree",
    "max_operator_utilities",
    "select_split",
]

ATTRIBUTE_CHOICES = ("level", "node")
DEFAULT_MAX_LEAVES = 65_536
MAX_OPERATOR_SENSITIVITY = 1.0


# ---------------------------------------------------------------------------------------------
# The split selection: Max operator utilities and the exponential mechanism.


def _utilities(
    values: np.ndarray, labels: np.ndarray, node: np.ndarray, candidates: np.ndarray, n_classes: int
) -> np.ndarray:
    """Max-operator utilities of k nodes at once: rows carry their node (0..k-1), candidates is k x t."""
    k, t = candidates.shape
    rows, column = np.nonzero(values[:, None] < candidates[node])
    left = np.bincount((node[rows] * t + column) * n_classes + labels[rows], minlength=k * t * n_classes)
    left = left.reshape(k, t, n_classes)
    total = np.bincount(node * n_classes + labels, minlength=k * n_classes).reshape(k, 1, n_classes)
    return (left.max(axis=2) + (total - left).max(axis=2)).astype(np.float64)


def _node_inputs(
    values: Any, labels: Any, candidates: Any, n_classes: Any, where: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    n_classes = int_at_least(n_classes, 1, "n_classes", where)
    values = np.asarray(values, dtype=np.float64)
    labels = np.asarray(labels)
    candidates = np.asarray(candidates, dtype=np.float64)
    if values.ndim != 1 or not np.isfinite(values).all():
        raise ValueError(
            f"The 'values' parameter of {where} must be a 1-D array of finite numbers. "
            f"Got shape {values.shape} instead."
        )
    if labels.shape != values.shape or (
        labels.size and (labels.dtype.kind not in "iu" or labels.min() < 0 or labels.max() >= n_classes)
    ):
        raise ValueError(
            f"The 'labels' parameter of {where} must be integer codes in [0, {n_classes}), one per value. "
            f"Got dtype {labels.dtype}, shape {labels.shape} instead."
        )
    if candidates.ndim != 1 or candidates.size == 0 or not np.isfinite(candidates).all():
        raise ValueError(
            f"The 'candidates' parameter of {where} must be a non-empty 1-D array of finite numbers. "
            f"Got shape {candidates.shape} instead."
        )
    return values, labels.astype(np.int64), candidates, n_classes


def max_operator_utilities(values: Any, labels: Any, candidates: Any, *, n_classes: int) -> np.ndarray:
    """The Max operator of each candidate threshold v for one node's rows:
    max_l #{a < v, y = l} + max_l #{a >= v, y = l}. Sensitivity 1."""
    values, labels, candidates, n_classes = _node_inputs(
        values, labels, candidates, n_classes, "max_operator_utilities"
    )
    return _utilities(values, labels, np.zeros(values.size, dtype=np.int64), candidates[None, :], n_classes)[0]


def select_split(
    values: Any,
    labels: Any,
    candidates: Any,
    *,
    n_classes: int,
    epsilon: float,
    rng: np.random.Generator,
    secure: bool = False,
) -> int:
    """The index of the candidate chosen by the exponential mechanism on the Max operator:
    P(v) ∝ exp(epsilon u(v) / 2). Costs epsilon (for this node; a level's nodes compose in parallel)."""
    utilities = max_operator_utilities(values, labels, candidates, n_classes=n_classes)
    mechanism = Exponential(epsilon=epsilon, sensitivity=MAX_OPERATOR_SENSITIVITY, rng=rng, secure=secure)
    return mechanism.randomise(utilities)


# ---------------------------------------------------------------------------------------------
# Growing a tree.


def _choose_attributes(allowed: np.ndarray, per_level: bool, rng: np.random.Generator) -> np.ndarray:
    """One allowed attribute per node, uniformly (-1 where none is allowed); the same one for every
    node with ``per_level``."""
    if per_level:
        options = np.flatnonzero(allowed[0])
        return np.full(allowed.shape[0], options[rng.integers(options.size)] if options.size else -1)
    count = allowed.sum(axis=1)
    pick = np.floor(rng.random(allowed.shape[0]) * count).astype(np.int64)
    chosen = np.argmax(np.cumsum(allowed, axis=1) > pick[:, None], axis=1)
    return np.where(count > 0, chosen, -1)


def _candidates(lo: np.ndarray, hi: np.ndarray, t: int, rng: np.random.Generator) -> np.ndarray:
    """t thresholds per node, uniform strictly inside (lo, hi)."""
    drawn = rng.uniform(lo[:, None], hi[:, None], size=(lo.size, t))
    return np.clip(drawn, np.nextafter(lo, hi)[:, None], np.nextafter(hi, lo)[:, None])


def _draw_thresholds(
    cuts: np.ndarray,
    a: int,
    chosen: np.ndarray,
    region: tuple[np.ndarray, np.ndarray],
    live_rows: tuple[np.ndarray, np.ndarray, np.ndarray],
    t: int,
    mechanism: Exponential,
    rng: np.random.Generator,
    n_classes: int,
) -> None:
    """The thresholds of the frontier's nodes that split on numeric attribute ``a``, into ``cuts``:
    ``t`` candidates drawn inside each node's region (``region``: lo, hi), one chosen by the exponential
    mechanism over their utilities on the rows still on the frontier (``live_rows``: their values, label
    codes and frontier-local node)."""
    lo, hi = region
    rows, codes, local = live_rows
    nodes = np.flatnonzero(chosen == a)
    candidates = _candidates(lo[nodes, a], hi[nodes, a], t, rng)
    position = np.full(chosen.size, -1, dtype=np.int64)
    position[nodes] = np.arange(nodes.size)
    inside = position[local] >= 0
    utilities = _utilities(rows[inside, a], codes[inside], position[local[inside]], candidates, n_classes)
    for i, at in enumerate(nodes):
        cuts[at] = candidates[i, mechanism.randomise(utilities[i])]


def _next_frontier(
    lo: np.ndarray,
    hi: np.ndarray,
    available: np.ndarray,
    children: np.ndarray,
    first: np.ndarray,
    column: np.ndarray,
    cuts: np.ndarray,
    is_cat: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The next frontier's regions and available attributes: every child inherits its parent's region,
    narrowed by the split (a numeric cut bounds the left child above and the right one below; a
    categorical attribute is used up)."""
    parent = np.repeat(np.arange(children.size), children)
    offset = np.arange(parent.size) - first[parent]
    lo, hi, available = lo[parent], hi[parent], available[parent]
    a, child = column[parent], np.arange(parent.size)
    numeric_child = ~is_cat[a]
    left, right = numeric_child & (offset == 0), numeric_child & (offset == 1)
    hi[child[left], a[left]] = cuts[parent[left]]
    lo[child[right], a[right]] = cuts[parent[right]]
    available[child[~numeric_child], a[~numeric_child]] = False
    return lo, hi, available


def _noisy_leaf_counts(
    n_children: np.ndarray, node: np.ndarray, codes: np.ndarray, n_classes: int, laplace: Laplace
) -> np.ndarray:
    """Every leaf's class counts of the rows that end in it (``node``: each row's node id), with
    Laplace noise: a (leaves, classes) array."""
    leaf_index = np.cumsum(n_children == 0) - 1
    true_counts = np.bincount(leaf_index[node] * n_classes + codes, minlength=int((n_children == 0).sum()) * n_classes)
    return laplace.randomise(true_counts.astype(np.float64)).reshape(-1, n_classes)


@dataclass
class _Levels:
    """The tree as it grows, level by level: each node's split attribute (-1: a leaf), threshold (NaN:
    none) and number of children."""

    attribute: list[np.ndarray] = field(default_factory=list)
    threshold: list[np.ndarray] = field(default_factory=list)
    n_children: list[np.ndarray] = field(default_factory=list)

    def add(self, attribute: np.ndarray, threshold: np.ndarray, n_children: np.ndarray) -> None:
        self.attribute.append(attribute)
        self.threshold.append(threshold)
        self.n_children.append(n_children)


def _checked_rows(X: Any, y: Any, schema: PublicSchema, where: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows checked against ``schema`` and their labels' codes, one per row."""
    if not isinstance(schema, PublicSchema):
        raise TypeError(
            f"The 'schema' parameter of {where} must be a PublicSchema. Got {type(schema).__name__} instead."
        )
    rows = schema.check_rows(X, "X", where)
    codes = schema.encode_labels(y)
    if codes.shape[0] != rows.shape[0]:
        raise ValueError(
            f"The 'y' parameter of {where} must have one label per row of X ({rows.shape[0]}). "
            f"Got {codes.shape[0]} instead."
        )
    return rows, codes


def _follow_splits(
    rows: np.ndarray,
    node: np.ndarray,
    active: np.ndarray,
    frontier_rows: tuple[np.ndarray, np.ndarray],
    split: np.ndarray,
    first: np.ndarray,
    column: np.ndarray,
    cuts: np.ndarray,
    is_cat: np.ndarray,
    next_start: int,
) -> int:
    """Rows follow their node's split into its children (``node``, in place); rows of a node that
    stopped stay in that leaf (no longer ``active``). Returns the next frontier's first node id."""
    live, local = frontier_rows
    moving = split[local]
    at, where_rows = local[moving], live[moving]
    value = rows[where_rows, column[at]]
    step = np.where(is_cat[column[at]], value, value >= cuts[at]).astype(np.int64)
    node[where_rows] = next_start + first[at] + step
    active[live[~moving]] = False
    return next_start


def grow_tree(
    X: Any,
    y: Any,
    schema: PublicSchema,
    *,
    epsilon: float | None = None,
    rng: np.random.Generator,
    h_max: int = 8,
    t: int = 10,
    max_leaves: int = DEFAULT_MAX_LEAVES,
    attribute_choice: str = "level",
    neighbours: str = "add_remove",
    secure: bool = False,
    level_epsilon: LevelEpsilon | None = None,
    released: Released = unchanged,
) -> PrivateTree:
    """Grow a private tree on rows ``X`` (checked against ``schema``) and labels ``y`` (classes or
    real values, as the schema's label says), spending at most ``epsilon``: epsilon/h_max per level.

    ``level_epsilon(purpose, level)``, given instead of ``epsilon``, is what level ``level``'s split
    selections (purpose ``"tree.split"``) or leaf counts (``"tree.leaves"``) are calibrated to and
    cost: a pfds sharer passes its release plan's (:func:`~marketplace.protocols.pfds.plan.level_epsilon`),
    where a level costs half its budget over h_max (:func:`~marketplace.protocols.pfds.budget.split_budget`).

    Each level's release leaves through ``released(name, output)`` as it is drawn (a sharer passes its
    plan's :meth:`~marketplace.privacy.plan.ReleasePlan.released`): a split level's thresholds (the
    exponential mechanism's choices, NaN at the nodes it did not split on a numeric attribute) under
    ``pfds.tree.split.level{i}``, the leaves' noisy class counts under ``pfds.tree.leaves.level{i}``.
    Everything after a release reads its output as ``released`` returns it.
    """
    where = "grow_tree"
    h_max = int_at_least(h_max, 1, "h_max", where)
    level_epsilon = per_level_epsilon(epsilon, level_epsilon, h_max, where)
    t = int_at_least(t, 1, "t", where)
    max_leaves = int_at_least(max_leaves, 1, "max_leaves", where)
    per_level = choice(attribute_choice, ATTRIBUTE_CHOICES, "attribute_choice", where) == "level"
    sensitivity = count_sensitivity(neighbours, where)  # 1 (add/remove) or 2 (replace): see the module docstring
    rng, secure = noise_generator(rng, secure, where)
    rows, codes = _checked_rows(X, y, schema, where)

    n_classes, is_cat, branching = schema.n_codes, schema.is_categorical, schema.branching
    levels, spends = _Levels(), []
    lo, hi = schema.lower[None, :].copy(), schema.upper[None, :].copy()  # the frontier's regions
    available = np.ones((1, schema.d), dtype=bool)
    # each row's global node id, and whether its node is still on the frontier
    node, active = np.zeros(rows.shape[0], dtype=np.int64), np.ones(rows.shape[0], dtype=bool)
    start, finished = 0, 0  # first node id of the frontier; leaves closed on earlier levels
    level = 1
    while level < h_max:
        frontier = lo.shape[0]
        room = (max_leaves - finished) // frontier
        chosen = _choose_attributes(available & (branching[None, :] <= room), per_level, rng)
        split = chosen >= 0
        if not split.any():
            break
        column = np.where(split, chosen, 0)
        live = np.flatnonzero(active)
        local = node[live] - start
        numeric_columns = np.unique(chosen[split & ~is_cat[column]])
        cuts = np.full(frontier, np.nan)
        if numeric_columns.size:
            split_epsilon = positive_real(level_epsilon("tree.split", level), "level_epsilon", where)
            mechanism = Exponential(
                epsilon=split_epsilon, sensitivity=MAX_OPERATOR_SENSITIVITY * sensitivity, rng=rng, secure=secure
            )
            live_rows = (rows[live], codes[live], local)
            for a in numeric_columns:
                _draw_thresholds(cuts, int(a), chosen, (lo, hi), live_rows, t, mechanism, rng, n_classes)
            cuts = np.asarray(released(release_name("tree.split", level), cuts), dtype=np.float64)
            spends.append(Spend("tree.split", level, split_epsilon, "exponential"))
        children = np.where(split, branching[column], 0)
        levels.add(np.where(split, chosen, -1), cuts, children)
        finished += int((~split).sum())

        first = np.cumsum(children) - children
        lo, hi, available = _next_frontier(lo, hi, available, children, first, column, cuts, is_cat)
        start = _follow_splits(rows, node, active, (live, local), split, first, column, cuts, is_cat, start + frontier)
        level += 1

    frontier = lo.shape[0]  # the last level: leaves only
    levels.add(np.full(frontier, -1), np.full(frontier, np.nan), np.zeros(frontier, dtype=np.int64))
    n_children_all = np.concatenate(levels.n_children)
    leaves_epsilon = positive_real(level_epsilon("tree.leaves", level), "level_epsilon", where)
    laplace = Laplace(epsilon=leaves_epsilon, sensitivity=sensitivity, rng=rng, secure=secure)
    noisy = released(
        release_name("tree.leaves", level), _noisy_leaf_counts(n_children_all, node, codes, n_classes, laplace)
    )
    spends.append(Spend("tree.leaves", level, leaves_epsilon, "laplace"))
    return PrivateTree(
        schema=schema,
        attribute=np.concatenate(levels.attribute),
        threshold=np.concatenate(levels.threshold),
        n_children=n_children_all,
        counts=np.asarray(noisy, dtype=np.float64),
        h_max=h_max,
        t=t,
        spends=tuple(spends),
        neighbours=neighbours,
    )
