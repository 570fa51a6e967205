"""The sharer's differentially private decision tree (the paper's Algorithm 3, makeTree): the grown
tree, its queries and its wire form. :mod:`.grow` grows one.

**Wire form.** :meth:`PrivateTree.to_plain` gives msgpack-ready dicts and lists: nodes in
breadth-first order as parallel lists (attribute, threshold, number of children; node i's children
follow one another, right after those of node i - 1), the leaves' noisy counts as one flat list, the
public schema and the spends. :meth:`PrivateTree.from_plain` checks all of it and raises
:class:`~marketplace.protocols.pfds._checks.MalformedPlain` naming the first bad field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._checks import NEIGHBOURS, MalformedPlain, int_at_least, is_int, is_real
from .budget import Spend, total_epsilon
from .schema import PublicSchema

__all__ = ["PLAIN_FORMAT", "PrivateTree"]

PLAIN_FORMAT, PLAIN_VERSION = "pfds.tree", 1
_PLAIN_KEYS = {
    "format",
    "version",
    "schema",
    "h_max",
    "t",
    "neighbours",
    "spends",
    "attribute",
    "threshold",
    "n_children",
    "counts",
}


# ---------------------------------------------------------------------------------------------
# The tree.


def _array(value: Any, dtype: type[np.generic], name: str) -> np.ndarray:
    """A read-only copy; integers must be whole numbers (no silent truncation)."""
    try:
        array = np.array(value, dtype=np.float64, copy=True)
    except (TypeError, ValueError):
        raise MalformedPlain(f"$.{name}", "an array of numbers", value) from None
    if dtype is np.int64:
        if not np.array_equal(array, np.floor(array)):  # also refuses NaN
            raise MalformedPlain(f"$.{name}", "an array of integers", value)
        array = array.astype(np.int64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False)
class PrivateTree:
    """A grown tree: nodes in breadth-first order (parallel arrays) and the leaves' noisy counts.

    ``attribute[i]`` is the column node i splits on (-1 at a leaf), ``threshold[i]`` its numeric
    threshold (NaN otherwise: a categorical node has one child per public value, in the order of the
    value list), ``n_children[i]`` its number of children. ``counts[j, c]`` is the noisy count of
    label code c in the j-th leaf (leaves in breadth-first order). ``spends`` say what growing it cost.
    Every construction is checked (:class:`MalformedPlain` names the first bad field).
    """

    schema: PublicSchema
    attribute: np.ndarray
    threshold: np.ndarray
    n_children: np.ndarray
    counts: np.ndarray
    h_max: int
    t: int
    spends: tuple[Spend, ...]
    neighbours: str = "add_remove"
    # the structure derived from the fields, set by _check_structure
    _first_child: np.ndarray = field(init=False, repr=False, compare=False)
    _levels: tuple[tuple[int, int], ...] = field(init=False, repr=False, compare=False)
    _leaves: np.ndarray = field(init=False, repr=False, compare=False)
    _leaf_index: np.ndarray = field(init=False, repr=False, compare=False)
    _leaf_lo: np.ndarray = field(init=False, repr=False, compare=False)
    _leaf_hi: np.ndarray = field(init=False, repr=False, compare=False)
    _leaf_fixed: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.schema, PublicSchema):
            raise MalformedPlain("$.schema", "a PublicSchema", self.schema)
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if not is_int(self.h_max) or self.h_max < 1:
            raise MalformedPlain("$.h_max", "an integer >= 1", self.h_max)
        if not is_int(self.t) or self.t < 1:
            raise MalformedPlain("$.t", "an integer >= 1", self.t)
        if self.neighbours not in NEIGHBOURS:
            raise MalformedPlain("$.neighbours", " or ".join(map(repr, NEIGHBOURS)), self.neighbours)
        spends = tuple(self.spends) if isinstance(self.spends, (tuple, list)) else None
        if spends is None:
            raise MalformedPlain("$.spends", "a tuple of Spend", self.spends)
        for i, spend in enumerate(spends):
            if not isinstance(spend, Spend) or not spend.purpose.startswith("tree."):
                raise MalformedPlain(f"$.spends[{i}]", "a tree spend (tree.split or tree.leaves)", spend)
        set_("spends", spends)
        set_("h_max", int(self.h_max))
        set_("t", int(self.t))
        attribute = _array(self.attribute, np.int64, "attribute")
        threshold = _array(self.threshold, np.float64, "threshold")
        n_children = _array(self.n_children, np.int64, "n_children")
        counts = _array(self.counts, np.float64, "counts")
        set_("attribute", attribute)
        set_("threshold", threshold)
        set_("n_children", n_children)
        set_("counts", counts)
        self._check_structure()

    # --- checks and derived structure

    def _check_structure(self) -> None:
        schema, attribute, threshold, n_children = self.schema, self.attribute, self.threshold, self.n_children
        size, leaf, column, categorical, numeric = _check_nodes(schema, attribute, threshold, n_children)
        first_child = np.where(leaf, -1, 1 + np.cumsum(n_children) - n_children)
        levels = _walk_levels(n_children, size, self.h_max)
        leaf_parts = _leaf_regions(schema, levels, (attribute, threshold, n_children), column, categorical, numeric)
        leaves = np.flatnonzero(leaf)
        _check_counts(self.counts, leaves.size, schema.n_codes)
        leaf_index = np.full(size, -1, dtype=np.int64)
        leaf_index[leaves] = np.arange(leaves.size)
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("_first_child", first_child)
        set_("_levels", tuple(levels))
        set_("_leaves", leaves)
        set_("_leaf_index", leaf_index)
        set_("_leaf_lo", np.vstack([part[0] for part in leaf_parts]))
        set_("_leaf_hi", np.vstack([part[1] for part in leaf_parts]))
        set_("_leaf_fixed", np.vstack([part[2] for part in leaf_parts]))

    # --- shape

    @property
    def n_nodes(self) -> int:
        return int(self.attribute.shape[0])

    @property
    def n_leaves(self) -> int:
        return int(self._leaves.size)

    @property
    def depth(self) -> int:
        """The number of levels (the root is level 1)."""
        return len(self._levels)

    @property
    def epsilon(self) -> float:
        """What growing the tree spent (sequential composition of its spends)."""
        return total_epsilon(self.spends)

    @property
    def leaves(self) -> np.ndarray:
        """Node ids of the leaves, in breadth-first order (row j of ``counts`` is leaf ``leaves[j]``)."""
        return self._leaves

    @property
    def parent(self) -> np.ndarray:
        """The parent of every node (-1 for the root)."""
        return np.concatenate([[-1], np.repeat(np.arange(self.n_nodes), self.n_children)])

    @property
    def leaf_labels(self) -> np.ndarray:
        """The label code of each leaf: the largest noisy count (the first one on a tie)."""
        return np.argmax(self.counts, axis=1)

    def level_nodes(self, level: int) -> np.ndarray:
        """Node ids on ``level`` (1 = root)."""
        level = int_at_least(level, 1, "level", "PrivateTree.level_nodes")
        if level > self.depth:
            return np.empty(0, dtype=np.int64)
        start, end = self._levels[level - 1]
        return np.arange(start, end)

    def node_level(self) -> np.ndarray:
        """The level of every node."""
        out = np.empty(self.n_nodes, dtype=np.int64)
        for level, (start, end) in enumerate(self._levels, start=1):
            out[start:end] = level
        return out

    def leaf_regions(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each leaf's public region: numeric intervals [lo, hi) (lo, hi: leaves x d) and the fixed
        value code of each categorical attribute (-1 where it is free)."""
        return self._leaf_lo, self._leaf_hi, self._leaf_fixed

    # --- use

    def route(self, X: Any) -> np.ndarray:
        """The node id of the leaf each row of X falls into."""
        rows = self.schema.check_rows(X, "X", "PrivateTree.route", allow_empty=True)
        return self._route(rows)

    def _route(self, rows: np.ndarray) -> np.ndarray:
        node = np.zeros(rows.shape[0], dtype=np.int64)
        is_cat = self.schema.is_categorical
        for _ in range(self.depth - 1):
            inner = np.flatnonzero(self._first_child[node] >= 0)
            if inner.size == 0:
                break
            at = node[inner]
            a = self.attribute[at]
            value = rows[inner, a]
            offset = np.where(is_cat[a], value, value >= self.threshold[at]).astype(np.int64)
            node[inner] = self._first_child[at] + offset
        return node

    def _predict_rows(self, rows: np.ndarray) -> np.ndarray:
        return self.leaf_labels[self._leaf_index[self._route(rows)]]

    def leaf_of(self, X: Any) -> np.ndarray:
        """The leaf index (row of ``counts``) of each row of X."""
        return self._leaf_index[self.route(X)]

    def predict_codes(self, X: Any) -> np.ndarray:
        """The label code the tree predicts for each row of X (its leaf's label)."""
        return self.leaf_labels[self.leaf_of(X)]

    # --- plain form

    def to_plain(self) -> dict[str, Any]:
        """The tree as msgpack-ready dicts and lists (see the module docstring)."""
        return {
            "format": PLAIN_FORMAT,
            "version": PLAIN_VERSION,
            "schema": self.schema.to_plain(),
            "h_max": self.h_max,
            "t": self.t,
            "neighbours": self.neighbours,
            "spends": [spend.to_plain() for spend in self.spends],
            "attribute": self.attribute.tolist(),
            "threshold": [None if np.isnan(v) else v for v in self.threshold.tolist()],
            "n_children": self.n_children.tolist(),
            "counts": self.counts.ravel().tolist(),
        }

    @classmethod
    def from_plain(cls, plain: Any, *, schema: PublicSchema | None = None) -> PrivateTree:
        """Read back :meth:`to_plain`'s output, checking every field. With ``schema``, the tree must
        have been grown on that public schema."""
        if not isinstance(plain, dict):
            raise MalformedPlain("$", "a map (a plain pfds tree)", plain)
        if set(plain) != _PLAIN_KEYS:
            extra, missing = sorted(set(plain) - _PLAIN_KEYS, key=str), sorted(_PLAIN_KEYS - set(plain))
            raise MalformedPlain(
                "$",
                f"a map with keys {', '.join(sorted(_PLAIN_KEYS))}",
                f"unknown key {extra[0]!r}" if extra else f"missing key {missing[0]!r}",
            )
        if plain["format"] != PLAIN_FORMAT:
            raise MalformedPlain("$.format", repr(PLAIN_FORMAT), plain["format"])
        if plain["version"] != PLAIN_VERSION or not is_int(plain["version"]):
            raise MalformedPlain("$.version", f"{PLAIN_VERSION}", plain["version"])
        own = PublicSchema.from_plain(plain["schema"], "$.schema")
        if schema is not None and own != schema:
            raise MalformedPlain(
                "$.schema", "the receiver's public schema (the tree was grown on another one)", "a different schema"
            )
        spends = plain["spends"]
        if not isinstance(spends, list):
            raise MalformedPlain("$.spends", "a list", spends)
        spends = tuple(Spend.from_plain(item, f"$.spends[{i}]") for i, item in enumerate(spends))
        attribute = _int_list(plain["attribute"], "$.attribute")
        n_children = _int_list(plain["n_children"], "$.n_children")
        threshold = _threshold_list(plain["threshold"], "$.threshold")
        counts = _real_list(plain["counts"], "$.counts")
        leaves = sum(1 for n in n_children if n == 0)
        if counts.size != leaves * own.n_codes:
            raise MalformedPlain(
                "$.counts",
                f"{leaves} x {own.n_codes} = {leaves * own.n_codes} counts (leaves x label codes, row by row)",
                f"{counts.size} values",
            )
        return cls(
            schema=own,
            attribute=attribute,
            threshold=threshold,
            n_children=n_children,
            counts=counts.reshape(leaves, own.n_codes),
            h_max=plain["h_max"],
            t=plain["t"],
            spends=spends,
            neighbours=plain["neighbours"],
        )


def _check_nodes(
    schema: PublicSchema, attribute: np.ndarray, threshold: np.ndarray, n_children: np.ndarray
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each node's fields on their own: one entry per node, children adding up, a leaf's attribute -1,
    a split's a public column, thresholds exactly at numeric splits, children per split kind. Returns
    the node count and, per node, whether it is a leaf, its column (0 at leaves) and whether it splits
    on a categorical or a numeric attribute."""
    size = attribute.shape[0] if attribute.ndim == 1 else -1
    for name, array in (("attribute", attribute), ("threshold", threshold), ("n_children", n_children)):
        if array.ndim != 1 or array.shape[0] != size or size < 1:
            raise MalformedPlain(
                f"$.{name}",
                "a non-empty list with one entry per node (as many as attribute)",
                f"shape {array.shape}",
            )
    _first_bad("n_children", n_children < 0, n_children, "a non-negative number of children")
    if 1 + int(n_children.sum()) != size:
        raise MalformedPlain(
            "$.n_children", f"numbers of children adding up to {size - 1} (nodes - 1)", int(n_children.sum())
        )
    leaf = n_children == 0
    _first_bad("attribute", leaf & (attribute != -1), attribute, "-1 at a leaf (a node with no children)")
    _first_bad(
        "attribute",
        ~leaf & ((attribute < 0) | (attribute >= schema.d)),
        attribute,
        f"the column (0..{schema.d - 1}) of a public attribute",
    )
    column = np.where(leaf, 0, attribute)
    categorical = ~leaf & schema.is_categorical[column]
    numeric = ~leaf & ~categorical
    _first_bad("threshold", ~numeric & ~np.isnan(threshold), threshold, "null (no threshold) off numeric splits")
    _first_bad("threshold", numeric & ~np.isfinite(threshold), threshold, "a finite threshold at a numeric split")
    _first_bad("n_children", numeric & (n_children != 2), n_children, "2 children at a numeric split")
    _first_bad(
        "n_children",
        categorical & (n_children != schema.branching[column]),
        n_children,
        "one child per public value at a categorical split",
    )
    return size, leaf, column, categorical, numeric


def _walk_levels(n_children: np.ndarray, size: int, h_max: int) -> list[tuple[int, int]]:
    """The levels as (first, end) node ranges: node i's children follow those of node i - 1, so levels
    are contiguous. Every node must be reachable from the root, within ``h_max`` levels."""
    levels, start, end = [], 0, 1
    while start < end:
        levels.append((start, end))
        start, end = end, end + int(n_children[start:end].sum())
    if end != size or start != size:
        raise MalformedPlain(
            "$.n_children", "a tree in which every node is reachable from the root", "unreachable nodes"
        )
    if len(levels) > h_max:
        raise MalformedPlain("$.h_max", f"at least the depth of the tree ({len(levels)})", h_max)
    return levels


def _leaf_regions(
    schema: PublicSchema,
    levels: list[tuple[int, int]],
    nodes_fields: tuple[np.ndarray, np.ndarray, np.ndarray],
    column: np.ndarray,
    categorical: np.ndarray,
    numeric: np.ndarray,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each level's leaves' public regions (a numeric interval per attribute, a fixed value code per
    categorical one), checking on the way that every threshold lies strictly inside its node's interval
    and that no categorical attribute is used twice on a path."""
    attribute, threshold, n_children = nodes_fields
    size = attribute.shape[0]
    leaf = n_children == 0
    lo, hi = schema.lower[None, :].copy(), schema.upper[None, :].copy()
    fixed = np.full((1, schema.d), -1, dtype=np.int64)
    leaf_parts = []
    for start, end in levels:
        nodes = np.arange(start, end)
        a = column[nodes]
        rows = np.arange(nodes.size)
        inside = (lo[rows, a] < threshold[nodes]) & (threshold[nodes] < hi[rows, a])
        _first_bad(
            "threshold",
            _scatter(size, nodes, numeric[nodes] & ~inside),
            threshold,
            "a threshold strictly inside the node's public interval",
        )
        _first_bad(
            "attribute",
            _scatter(size, nodes, categorical[nodes] & (fixed[rows, a] >= 0)),
            attribute,
            "a categorical attribute not already used above this node",
        )
        leaf_parts.append((lo[leaf[nodes]], hi[leaf[nodes]], fixed[leaf[nodes]]))
        parent = np.repeat(rows, n_children[nodes])
        if parent.size == 0:
            break
        offset = np.arange(parent.size) - np.repeat(np.cumsum(n_children[nodes]) - n_children[nodes], n_children[nodes])
        lo, hi, fixed = lo[parent], hi[parent], fixed[parent]
        pa, child = a[parent], np.arange(parent.size)
        is_num = numeric[nodes][parent]
        cut = threshold[nodes][parent]
        left, right = is_num & (offset == 0), is_num & (offset == 1)
        hi[child[left], pa[left]] = cut[left]
        lo[child[right], pa[right]] = cut[right]
        is_cat = categorical[nodes][parent]
        fixed[child[is_cat], pa[is_cat]] = offset[is_cat]
    return leaf_parts


def _check_counts(counts: np.ndarray, leaves: int, n_codes: int) -> None:
    """One finite noisy count per leaf and label code."""
    if counts.ndim != 2 or counts.shape != (leaves, n_codes):
        raise MalformedPlain(
            "$.counts", f"{leaves} x {n_codes} noisy counts (leaves x label codes)", f"shape {counts.shape}"
        )
    if not np.isfinite(counts).all():
        raise MalformedPlain("$.counts", "finite counts", "NaN or infinity")


def _scatter(size: int, nodes: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = np.zeros(size, dtype=bool)
    out[nodes[mask]] = True
    return out


def _first_bad(name: str, bad: np.ndarray, values: np.ndarray, expected: str) -> None:
    if bad.any():
        i = int(np.argmax(bad))
        value = values[i].item()
        raise MalformedPlain(
            f"$.{name}[{i}]", expected, None if isinstance(value, float) and np.isnan(value) else value
        )


def _int_list(value: Any, path: str) -> np.ndarray:
    if not isinstance(value, list):
        raise MalformedPlain(path, "a list of integers", value)
    for i, item in enumerate(value):
        if not is_int(item):
            raise MalformedPlain(f"{path}[{i}]", "an integer", item)
    return np.array(value, dtype=np.int64)


def _threshold_list(value: Any, path: str) -> np.ndarray:
    if not isinstance(value, list):
        raise MalformedPlain(path, "a list of numbers and nulls", value)
    out = np.empty(len(value), dtype=np.float64)
    for i, item in enumerate(value):
        if item is None:
            out[i] = np.nan
        elif is_real(item) and np.isfinite(item):
            out[i] = item
        else:
            raise MalformedPlain(f"{path}[{i}]", "a finite number or null", item)
    return out


def _real_list(value: Any, path: str) -> np.ndarray:
    if not isinstance(value, list):
        raise MalformedPlain(path, "a list of numbers", value)
    for i, item in enumerate(value):
        if not is_real(item) or not np.isfinite(item):
            raise MalformedPlain(f"{path}[{i}]", "a finite number", item)
    return np.array(value, dtype=np.float64)
