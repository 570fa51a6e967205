"""The consumer's side of stc: pick k target points as centres, given centres that come for free.

**Objective.** For target points T (n x d, optional weights w), free centres F (the released S',
the true S, or nothing) and chosen centres T_k = T[indices],

    Cost(T, F ∪ T_k) = sum_x w_x min_{c in F ∪ T_k} ||x - c|| / sum_x w_x,

the paper's Cost(T, S, T_k) (mean distance of T to its nearest centre) when w = 1. Weights let a
coreset stand for T: a representative weighted by the size of its cell. :func:`stc_cost` evaluates
it for any centre set with a KD-tree (never an n x |centres| matrix).

**Solver** (:func:`solve_stc`). k-medoids in which the free centres F are medoids that can never be
swapped out. Only each target point's distance to its nearest free centre matters (the paper's
Observation 5.1), so F enters as one extra, fixed "medoid column" f_x = min_{s in F} ||x - s||
(+inf when F is empty), computed once with a KD-tree.

1. *Greedy start*: add, k times, the candidate that lowers the cost most. With free centres the
   gain of c, sum_x w_x max(0, cur_x - d(x, c)), is submodular, so gains computed earlier are upper
   bounds: each step re-evaluates only the best stale candidates, a block at a time (lazy greedy).
   The first step (and the first two without free centres) looks at every candidate; with no free
   centres the first pick is the 1-medoid, so k = 1 is solved exactly (up to float32 rounding of
   the scores on large problems, see below).
2. *Swaps* in the manner of FasterPAM (Schubert & Rousseeuw 2021): every point keeps its nearest
   and second-nearest centre among the k medoids and the fixed column, and a candidate is scored
   against **all** k medoids at once in O(n + k) (:class:`_Medoids` gives the formula). A block of
   B candidates is scored together (an n x B distance block, B such that the block holds about
   ``BLOCK_ELEMENTS`` numbers; the per-medoid sums are one sparse product). The best swap of the
   block, if it improves, is applied at once (eager) after a check on exact float64 distances,
   re-examining only the points it can touch (those whose nearest or second-nearest medoid left,
   or whose distance to the new one beats their second); the block's other improving candidates
   are then re-scored. The search stops when every block has been scored against the current
   medoids without an improving swap (a local optimum for single swaps, like PAM's) or after
   ``max_passes`` passes over the candidates.
3. *Tiny problems*: when there are at most ``exhaustive_limit`` k-subsets of candidates, all are
   tried and the exact optimum is returned (local search alone can stop in a local optimum for
   k >= 2: k-medoids is NP-hard).

**Memory and time.** Never an n x n matrix (800 MB of float64 at n = 10,000): the largest arrays
are two n x B blocks (16 MiB each) and the n x (k + 1) distances to the medoids. Blocks are
float32 when n x |candidates| > ``FLOAT32_ABOVE`` (half the memory traffic; a swap is applied only
if exact float64 distances confirm it, so the cost never goes up and the search ends), float64
below. One pass over the candidates costs O(n |candidates| d) in BLAS and vectorised numpy; the
swaps take a few passes. Large problems run with one BLAS thread (the products are skinny and
memory-bound; a second OpenBLAS thread on two busy cores doubled the CPU time and the wall time
with it). ``max_candidates`` bounds the candidates (a random subset with ``rng``,
evenly spaced without) when that is still too slow; the default considers every target point.

Why not the ``kmedoids`` package (FasterPAM in Rust): it takes a full n x n dissimilarity matrix
and has no fixed medoids. Fixed centres could be emulated by the capped matrix
min(d(x, c), f_x), but only at the price of that matrix (and a new dependency).

Baselines' cores: :func:`cluster_t` (ignore S: plain k-medoids on T) and :func:`nonprivate_stc`
(the true S as free centres).

>>> T = np.array([[0.0, 0.0], [0.1, 0.0], [1.0, 0.0], [1.1, 0.0]])
>>> solution = solve_stc(T, np.array([[1.05, 0.0]]), 1)   # the right pair is covered for free
>>> solution.indices.tolist(), round(solution.cost, 6)
([0], 0.05)
"""

from __future__ import annotations

import contextlib
import itertools
import math
import numbers
from dataclasses import dataclass
from typing import TypedDict, Unpack

import numpy as np
from scipy import sparse
from sklearn.neighbors import KDTree
from threadpoolctl import threadpool_limits

from . import _checks

__all__ = [
    "BLOCK_ELEMENTS",
    "EXHAUSTIVE_LIMIT",
    "FLOAT32_ABOVE",
    "StcSolution",
    "nearest_distances",
    "stc_cost",
    "selection_cost",
    "solve_stc",
    "cluster_t",
    "nonprivate_stc",
]

BLOCK_ELEMENTS = 2**21
"""Entries of one n x B block of candidate distances (16 MiB in float64)."""

FLOAT32_ABOVE = 2**22
"""Blocks are float32 when n x |candidates| exceeds this (about 2,000 x 2,000), float64 below."""

EXHAUSTIVE_LIMIT = 5000
"""Default ``exhaustive_limit`` of :func:`solve_stc`: up to this many k-subsets, try them all."""

_TOLERANCE = 1e-12  # a swap must lower the total cost by more than this fraction of it


# ---------------------------------------------------------------------------------------------
# The objective.


def nearest_distances(points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """For each row of ``points``, the Euclidean distance to its nearest row of ``centers``
    (a KD-tree query); +inf for every point when ``centers`` has no row."""
    points = _checks.points(points, "points", "nearest_distances")
    centers = _checks.points(centers, "centers", "nearest_distances", d=points.shape[1], allow_empty=True)
    return _nearest(points, centers)


def _nearest(points: np.ndarray, centers: np.ndarray) -> np.ndarray:
    if centers.shape[0] == 0:
        return np.full(points.shape[0], np.inf)
    distances, _ = KDTree(centers).query(points, k=1)
    return distances[:, 0]


def stc_cost(target: np.ndarray, centers: np.ndarray, *, weights: np.ndarray | None = None) -> float:
    """Cost(T, centers): the (weighted) mean over target points of the distance to the nearest centre."""
    target = _checks.points(target, "target", "stc_cost")
    centers = _checks.points(centers, "centers", "stc_cost", d=target.shape[1])
    w = _checks.weights(weights, target.shape[0], "stc_cost")
    return float(w @ _nearest(target, centers) / w.sum())


def selection_cost(
    target: np.ndarray, fixed: np.ndarray | None, indices: np.ndarray, *, weights: np.ndarray | None = None
) -> float:
    """Cost(T, F, T_k) with T_k = target[indices]: the paper's Cost(T, S, T_k) for F = S. This is
    how a selection is scored, always against the true source set."""
    target = _checks.points(target, "target", "selection_cost")
    fixed = _checks.points(fixed, "fixed", "selection_cost", d=target.shape[1], allow_empty=True)
    chosen = _indices(indices, target.shape[0], "selection_cost")
    return stc_cost(target, np.vstack([fixed, target[chosen]]), weights=weights)


def _indices(value: object, n: int, where: str, name: str = "indices") -> np.ndarray:
    array = np.asarray(value)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(
            f"The '{name}' parameter of {where} must be a 1-D array of integers. "
            f"Got dtype {array.dtype}, shape {array.shape} instead."
        )
    if array.size and (array.min() < 0 or array.max() >= n):
        raise ValueError(
            f"The '{name}' parameter of {where} must index the {n} target points. "
            f"Got values in [{array.min()}, {array.max()}] instead."
        )
    return array.astype(np.intp)


# ---------------------------------------------------------------------------------------------
# The solution.


@dataclass(frozen=True, eq=False)
class StcSolution:
    """k chosen target points and what the search did.

    ``indices``: the chosen rows of the target (sorted); ``cost``: their Cost(T, F ∪ T_k) with the
    free centres the solver was given (for a private S' this is *not* the true cost: score with
    :func:`selection_cost` against S); ``greedy_cost``: the same after the greedy start;
    ``swaps``: swaps applied; ``passes``: passes over the candidates in the swap phase;
    ``converged``: False when ``max_passes`` stopped the search before a local optimum;
    ``candidates``: how many target rows were allowed as centres; ``method``: ``"exhaustive"``
    (every k-subset tried: the exact optimum) or ``"greedy+swap"``.
    """

    indices: np.ndarray
    cost: float
    greedy_cost: float
    swaps: int
    passes: float
    converged: bool
    candidates: int
    method: str

    def __post_init__(self) -> None:
        indices = np.array(self.indices, dtype=np.intp)
        indices.setflags(write=False)
        object.__setattr__(self, "indices", indices)

    @property
    def k(self) -> int:
        return int(self.indices.size)


# ---------------------------------------------------------------------------------------------
# The search.


class _Search:
    """Target points, weights, the fixed column and the candidates, and distance blocks on demand.

    A block holds the distances from every point to up to ``block`` candidates, as an (n, B)
    C-ordered array carved from one flat buffer (so a smaller block is still contiguous). Squared
    distances come from one BLAS product of augmented rows, [x, |x|^2, 1] . [-2c, 1, |c|^2], then
    max(., 0) and sqrt. Blocks are float32 when the problem is large (halving the memory traffic of
    the scan; every swap is then re-checked on exact float64 distances), float64 otherwise.
    """

    def __init__(self, X: np.ndarray, w: np.ndarray, fixed: np.ndarray, candidates: np.ndarray) -> None:
        n = X.shape[0]
        self.X, self.w, self.fixed, self.candidates = X, w, fixed, candidates
        self.dtype = np.float32 if n * candidates.size > FLOAT32_ABOVE else np.float64
        sq = np.einsum("ij,ij->i", X, X)
        self._rows = np.ascontiguousarray(np.hstack([X, sq[:, None], np.ones((n, 1))]), dtype=self.dtype)
        self._cols = np.hstack([-2.0 * X, np.ones((n, 1)), sq[:, None]])
        self.block = max(1, min(candidates.size, BLOCK_ELEMENTS // n))
        self._buffer = np.empty(n * self.block, dtype=self.dtype)
        self._scratch = np.empty(n * self.block, dtype=self.dtype)
        self.w_block = w.astype(self.dtype)

    def _view(self, flat: np.ndarray, size: int) -> np.ndarray:
        return flat[: self.X.shape[0] * size].reshape(self.X.shape[0], size)

    def distances(self, idx: np.ndarray) -> np.ndarray:
        """(n, len(idx)) distances from every point to the points ``idx``, in the block buffer
        (overwritten by the next call). len(idx) <= self.block."""
        out = self._view(self._buffer, idx.size)
        np.matmul(self._rows, self._cols[idx].T.astype(self.dtype), out=out)
        np.maximum(out, 0.0, out=out)
        return np.sqrt(out, out=out)

    def scratch(self, size: int) -> np.ndarray:
        return self._view(self._scratch, size)

    def column(self, j: int) -> np.ndarray:
        """Exact float64 distances from every point to point j (differences, no cancellation)."""
        diff = self.X - self.X[j]
        return np.sqrt(np.einsum("ij,ij->i", diff, diff))

    def blocks(self, order: np.ndarray) -> list[np.ndarray]:
        return [order[i : i + self.block] for i in range(0, order.size, self.block)]


def _exhaustive(search: _Search, k: int) -> np.ndarray:
    """The exact optimum over every k-subset of the candidates (tiny problems only)."""
    cand, w = search.candidates, search.w
    D = np.stack([search.column(int(j)) for j in cand], axis=1)  # n x p, exact
    best, best_cost = None, np.inf
    subsets = itertools.combinations(range(cand.size), k)
    chunk = max(1, BLOCK_ELEMENTS // (D.shape[0] * k))
    while True:
        combos = np.array(list(itertools.islice(subsets, chunk)), dtype=np.intp).reshape(-1, k)
        if combos.shape[0] == 0:
            break
        nearest = np.minimum(D[:, combos].min(axis=2), search.fixed[:, None])  # n x chunk
        costs = w @ nearest
        i = int(np.argmin(costs))
        if costs[i] < best_cost:
            best, best_cost = combos[i], float(costs[i])
    return np.asarray(best, dtype=np.intp)


def _greedy(search: _Search, k: int) -> np.ndarray:
    """k candidate positions chosen greedily (lazy evaluation of the submodular gains)."""
    cand = search.candidates
    w = search.w_block
    cur = search.fixed.copy()
    chosen: list[int] = []
    taken = np.zeros(cand.size, dtype=bool)
    if not np.all(np.isfinite(cur)):  # no free centre: the first pick is the exact 1-medoid
        costs = np.concatenate([w @ search.distances(cand[b]) for b in search.blocks(np.arange(cand.size))])
        chosen.append(int(np.argmin(costs)))
        taken[chosen[-1]] = True
        cur = search.column(int(cand[chosen[-1]]))
    bound = np.full(cand.size, np.inf)  # upper bounds of the gains (exact where fresh)
    while len(chosen) < k:
        bound[taken] = -np.inf
        fresh = taken.copy()
        current = cur.astype(search.dtype)
        while True:
            best = int(np.argmax(bound))
            if fresh[best]:
                break
            stale = np.flatnonzero(~fresh)
            size = min(search.block, stale.size)
            top = stale[np.argpartition(-bound[stale], size - 1)[:size]] if size < stale.size else stale
            E = search.distances(cand[top])
            np.subtract(E, current[:, None], out=E)
            bound[top] = -(w @ np.minimum(E, 0.0, out=E))  # sum_x w_x max(0, cur_x - d(x, c))
            fresh[top] = True
        chosen.append(best)
        taken[best] = True
        cur = np.minimum(cur, search.column(int(cand[best])))
    return np.array(chosen, dtype=np.intp)


def _two_nearest(D: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row of D (>= 2 columns): the columns of its nearest and second-nearest entries, and their values."""
    pair = np.argpartition(D, 1, axis=1)[:, :2]
    values = np.take_along_axis(D, pair, axis=1)
    flip = values[:, 1] < values[:, 0]
    pair[flip] = pair[flip][:, ::-1]
    values[flip] = values[flip][:, ::-1]
    return pair[:, 0], pair[:, 1], values[:, 0], values[:, 1]


class _Medoids:
    """The k medoids plus the fixed column, with FasterPAM's bookkeeping: every point's nearest and
    second-nearest among the k medoids and column k (the free centres).

    Swapping medoid m for candidate c changes the total by

        sum_{x: near(x) = m} w_x clip(d(x, c) - dn_x, 0, ds_x - dn_x) + sum_x w_x min(d(x, c) - dn_x, 0)

    (FasterPAM's removal loss plus its two corrections, folded into one clip): the second sum is
    shared by all m, the first is a sparse product with the "nearest medoid" matrix, so a whole
    block of candidates is scored against all k medoids at once. Points whose nearest centre is
    free (column k) only enter the shared sum: a free centre never leaves.
    """

    def __init__(self, search: _Search, medoids: np.ndarray) -> None:
        self.search = search
        n, k = search.X.shape[0], medoids.size
        self.k = k
        self.medoids = medoids.copy()
        self.is_medoid = np.zeros(n, dtype=bool)
        self.is_medoid[medoids] = True
        self.D = np.empty((n, k + 1))
        for m, j in enumerate(medoids):
            self.D[:, m] = search.column(int(j))
        self.D[:, k] = search.fixed
        self.near, self.sec, self.dn, self.ds = _two_nearest(self.D)
        self.total = float(search.w @ self.dn)
        self._derive()

    def _derive(self) -> None:
        """What the scoring needs, recomputed after every swap in O(n)."""
        search, n = self.search, self.search.X.shape[0]
        self.dn_block = self.dn.astype(search.dtype)
        self.gap_block = (self.ds - self.dn).astype(search.dtype)
        self.owner = sparse.csr_matrix((search.w_block, (self.near, np.arange(n))), shape=(self.k + 1, n))

    def score(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each point of ``idx``: the change of total cost of its best swap and the medoid
        position it replaces (+inf for points that are already medoids)."""
        E = self.search.distances(idx)
        np.subtract(E, self.dn_block[:, None], out=E)
        shared = self.search.w_block @ np.minimum(E, 0.0, out=self.search.scratch(idx.size))
        np.maximum(E, 0.0, out=E)
        np.minimum(E, self.gap_block[:, None], out=E)
        change = (self.owner @ E)[: self.k] + shared[None, :]  # k x len(idx)
        positions = np.argmin(change, axis=0)
        best = change[positions, np.arange(idx.size)].astype(np.float64)
        best[self.is_medoid[idx]] = np.inf
        return best, positions

    def try_swap(self, m: int, j: int, tolerance: float) -> bool:
        """Swap medoid m for point j if exact distances confirm the improvement; touch only the
        points whose nearest or second-nearest can change."""
        col = self.search.column(j)
        touched = np.flatnonzero((self.near == m) | (self.sec == m) | (col < self.ds))
        rows = self.D[touched]
        rows[:, m] = col[touched]
        near, sec, dn, ds = _two_nearest(rows)
        change = float(self.search.w[touched] @ (dn - self.dn[touched]))
        if not change < -tolerance:
            return False
        self.D[:, m] = col
        self.near[touched], self.sec[touched], self.dn[touched], self.ds[touched] = near, sec, dn, ds
        self.is_medoid[self.medoids[m]] = False
        self.is_medoid[j] = True
        self.medoids[m] = j
        self.total += change
        self._derive()
        return True


def _scan_order(cand: np.ndarray, rng: np.random.Generator | None) -> np.ndarray:
    """The order in which candidates are scored: a permutation drawn with ``rng``, or without one a
    fixed golden-ratio stride through them, so that a block mixes rows from all over the target
    (data often comes sorted by cluster, and blocks of one cluster need more passes)."""
    if rng is not None:
        return rng.permutation(cand)
    p = cand.size
    stride = max(1, round(p * 0.6180339887))
    while math.gcd(stride, p) != 1:
        stride += 1
    return cand[(np.arange(p) * stride) % p]


def _swap_phase(medoids: _Medoids, order: np.ndarray, max_passes: int) -> tuple[int, float, bool]:
    """Eager swaps, block by block, until a whole pass finds none (or max_passes): (swaps, passes, converged).

    A block is scored; its best swap is applied if it improves; the block's other improving
    candidates are then re-scored (they may still improve on the new medoids), and so on. Blocks
    in which nothing improved count as quiet; the search stops after a full round of quiet blocks,
    every candidate having then been scored against the final medoids.
    """
    blocks = medoids.search.blocks(order)
    swaps, evaluated, quiet, position = 0, 0, 0, 0
    while quiet < len(blocks):
        if evaluated >= max_passes * len(blocks):
            return swaps, evaluated / len(blocks), False
        todo, swapped = blocks[position], False
        evaluated += 1
        while todo.size:
            change, positions = medoids.score(todo)
            tolerance = _TOLERANCE * max(medoids.total, np.finfo(float).tiny)
            improving = change < -tolerance
            c = int(np.argmin(change))
            if not improving[c] or not medoids.try_swap(int(positions[c]), int(todo[c]), tolerance):
                break
            swaps += 1
            swapped = True
            improving[c] = False
            todo = todo[improving]
        quiet = 0 if swapped else quiet + 1
        position = (position + 1) % len(blocks)
    return swaps, evaluated / len(blocks), True


class SolveOptions(TypedDict, total=False):
    """The keyword options of :func:`solve_stc`, which the baselines pass on."""

    weights: np.ndarray | None
    candidates: np.ndarray | None
    max_candidates: int | None
    rng: np.random.Generator | None
    max_passes: int
    exhaustive_limit: int


def solve_stc(
    target: np.ndarray,
    fixed: np.ndarray | None,
    k: int,
    *,
    weights: np.ndarray | None = None,
    candidates: np.ndarray | None = None,
    max_candidates: int | None = None,
    rng: np.random.Generator | None = None,
    max_passes: int = 50,
    exhaustive_limit: int = EXHAUSTIVE_LIMIT,
) -> StcSolution:
    """Choose k rows of ``target`` minimising Cost(T, fixed ∪ T_k) (see the module docstring).

    ``fixed``: the free centres (S', S, or None / an empty array for plain k-medoids).
    ``weights``: one non-negative weight per target point (a coreset's cell sizes); default 1.
    ``candidates``: the rows allowed as centres (default every row); ``max_candidates``: keep at
    most that many of them (a random subset drawn with ``rng``, evenly spaced without it).
    ``rng``: shuffles the order in which candidates are scored (None: a fixed stride through them).
    ``max_passes``: bound on the passes over the candidates in the swap phase.
    ``exhaustive_limit``: when there are at most this many k-subsets of candidates, every one is
    tried and the exact optimum returned (0: always greedy + swaps).
    """
    where = "solve_stc"
    X = _checks.points(target, "target", where)
    n, d = X.shape
    F = _checks.points(fixed, "fixed", where, d=d, allow_empty=True)
    w = _checks.weights(weights, n, where)
    cand = np.arange(n) if candidates is None else np.unique(_indices(candidates, n, where, "candidates"))
    if cand.size == 0:
        raise _checks.fail(ValueError, "candidates", where, "a non-empty array of target rows", candidates)
    rng = _checks.generator(rng, "rng", where, optional=True)
    if max_candidates is not None:
        max_candidates = _checks.positive_int(max_candidates, "max_candidates", where)
        if max_candidates < cand.size:
            keep = (
                np.sort(rng.choice(cand.size, max_candidates, replace=False))
                if rng is not None
                else np.linspace(0, cand.size - 1, max_candidates).round().astype(np.intp)
            )
            cand = cand[keep]
    k = _checks.positive_int(k, "k", where)
    if k > cand.size:
        raise _checks.fail(ValueError, "k", where, f"at most the number of candidate target points ({cand.size})", k)
    max_passes = _checks.positive_int(max_passes, "max_passes", where)
    if isinstance(exhaustive_limit, bool) or not isinstance(exhaustive_limit, numbers.Integral) or exhaustive_limit < 0:
        raise _checks.fail(ValueError, "exhaustive_limit", where, "an integer >= 0", exhaustive_limit)

    search = _Search(X, w, _nearest(X, F), cand)
    if math.comb(cand.size, k) <= exhaustive_limit and n * cand.size <= BLOCK_ELEMENTS:
        medoids = _Medoids(search, cand[_exhaustive(search, k)])
        cost = float(w @ medoids.D.min(axis=1) / w.sum())
        return StcSolution(
            indices=np.sort(medoids.medoids),
            cost=cost,
            greedy_cost=cost,
            swaps=0,
            passes=0.0,
            converged=True,
            candidates=int(cand.size),
            method="exhaustive",
        )
    # one BLAS thread on large problems: the products here are skinny (inner dimension d + 2) and
    # memory-bound, and on 2 busy cores a second OpenBLAS thread doubled the CPU time
    blas = threadpool_limits(limits=1, user_api="blas") if search.dtype == np.float32 else contextlib.nullcontext()
    with blas:
        medoids = _Medoids(search, cand[_greedy(search, k)])
        greedy_cost = medoids.total / w.sum()
        swaps, passes, converged = 0, 0.0, True
        # Swaps need a second-nearest: with one medoid and no free centre the greedy pick is already exact.
        if k < cand.size and not (k == 1 and F.shape[0] == 0):
            swaps, passes, converged = _swap_phase(medoids, _scan_order(cand, rng), max_passes)
    cost = float(w @ medoids.D.min(axis=1) / w.sum())  # exact distances, no accumulated rounding
    return StcSolution(
        indices=np.sort(medoids.medoids),
        cost=cost,
        greedy_cost=float(greedy_cost),
        swaps=swaps,
        passes=passes,
        converged=converged,
        candidates=int(cand.size),
        method="greedy+swap",
    )


def cluster_t(target: np.ndarray, k: int, **options: Unpack[SolveOptions]) -> StcSolution:
    """The ClusterT baseline: ignore the source, k-medoids on T alone (:func:`solve_stc` with no
    free centres; same options)."""
    return solve_stc(target, None, k, **options)


def nonprivate_stc(source: np.ndarray, target: np.ndarray, k: int, **options: Unpack[SolveOptions]) -> StcSolution:
    """The non-private STC reference: the true source S as free centres (:func:`solve_stc`)."""
    target = _checks.points(target, "target", "nonprivate_stc")
    source = _checks.points(source, "source", "nonprivate_stc", d=target.shape[1])
    return solve_stc(target, source, k, **options)
