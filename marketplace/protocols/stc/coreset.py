"""An optional coreset of the target set: kd-tree cells of diameter <= C (docs/design.md §6, paper §6).

NAS adds noise that grows with n = |T| (its scale is n sqrt(d) / (t eps)), so the paper releases
S' against a smaller set T' in which every target point has a representative at most C away
(Bentley & Friedman's kd-tree, stopped at C = 0.05); Corollary B.1 then bounds the extra cost by C.
T is public, so building T' costs no privacy.

Construction: split a cell at the median of its widest coordinate (kd-tree style) until the
bounding box of its points has a diagonal <= C, which bounds the distance between any two of its
points by C. Each cell is represented by one of its own points (the one nearest the cell's mean),
so T' is a subset of T and a centre chosen in T' is a centre in T; each cell's weight is its number
of target points, so the weighted cost over T' approximates the cost over T.

>>> T = np.array([[0.0, 0.0], [0.01, 0.0], [0.4, 0.4], [0.41, 0.4]])
>>> core = kdtree_coreset(T, C=0.05)
>>> core.size, core.weights.tolist(), bool(core.assignment[0] == core.assignment[1] != core.assignment[2])
(2, [2, 2], True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import _checks

__all__ = ["DEFAULT_C", "Coreset", "kdtree_coreset"]

DEFAULT_C = 0.05
"""The paper's cell diameter, in the scaled space (points of norm <= 1/2)."""


@dataclass(frozen=True, eq=False)
class Coreset:
    """Target points grouped into cells of diameter <= C, one representative per cell.

    ``indices``: the representatives' rows in the target (n',), so ``points = target[indices]``;
    ``assignment``: for each target point, the position of its cell's representative (n,);
    ``weights``: the number of target points of each cell (n',), summing to n;
    ``diameters``: the bounding-box diagonal of each cell (n',), all <= C.
    """

    indices: np.ndarray
    points: np.ndarray
    assignment: np.ndarray
    weights: np.ndarray
    diameters: np.ndarray
    C: float

    def __post_init__(self) -> None:
        for name in ("indices", "points", "assignment", "weights", "diameters"):
            array = np.array(getattr(self, name))
            array.setflags(write=False)
            object.__setattr__(self, name, array)

    @property
    def size(self) -> int:
        """n', the number of cells."""
        return int(self.indices.size)


def _cells(X: np.ndarray, C: float) -> list[np.ndarray]:
    """Row indices of each kd-tree cell whose bounding-box diagonal is <= C."""
    cells, stack = [], [np.arange(X.shape[0])]
    while stack:
        rows = stack.pop()
        P = X[rows]
        extent = P.max(axis=0) - P.min(axis=0)
        if np.sqrt(extent @ extent) <= C:
            cells.append(rows)
            continue
        values = P[:, int(np.argmax(extent))]  # the widest coordinate has a positive extent
        left = values <= np.median(values)
        if left.all():  # the median is the maximum: split below it (the minimum is smaller)
            left = values < values.max()
        stack.extend([rows[~left], rows[left]])
    return cells


def kdtree_coreset(target: np.ndarray, C: float = DEFAULT_C) -> Coreset:
    """The kd-tree coreset of ``target`` with cells of diameter <= C (see the module docstring)."""
    X = _checks.points(target, "target", "kdtree_coreset")
    C = _checks.positive_real(C, "C", "kdtree_coreset")
    n, d = X.shape
    cells = _cells(X, C)
    assignment = np.empty(n, dtype=np.intp)
    for cell, rows in enumerate(cells):
        assignment[rows] = cell
    weights = np.bincount(assignment, minlength=len(cells))
    # np.bincount's stub says intp even with float weights: the sums are float64
    means: np.ndarray = np.stack(
        [np.bincount(assignment, weights=X[:, j], minlength=len(cells)) for j in range(d)], axis=1
    )
    means /= weights[:, None]
    spread = np.linalg.norm(X - means[assignment], axis=1)
    order = np.lexsort((np.arange(n), spread, assignment))  # by cell, then distance to its mean
    first = np.flatnonzero(np.r_[True, np.diff(assignment[order]) != 0])
    indices = order[first]  # cell c's representative is indices[c]
    low = np.full((len(cells), d), np.inf)
    high = np.full((len(cells), d), -np.inf)
    np.minimum.at(low, assignment, X)
    np.maximum.at(high, assignment, X)
    diameters = np.linalg.norm(high - low, axis=1)
    return Coreset(indices=indices, points=X[indices], assignment=assignment, weights=weights, diameters=diameters, C=C)
