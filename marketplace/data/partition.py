"""Ways to share a pool of rows out among K owners.

Each function is pure given its ``rng`` and returns K index arrays into the rows it was given:
disjoint, covering every row, each sorted ascending (an owner may receive none).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"the number of owners must be a positive integer, got {k!r}")


def _split_by_owner(owner: np.ndarray, k: int) -> list[np.ndarray]:
    """Turn an owner id per row into the sorted row positions of each owner."""
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(k + 1))
    return [order[bounds[i] : bounds[i + 1]].astype(np.int64) for i in range(k)]


def partition_even(n: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """A random split of ``n`` rows into ``k`` shares whose sizes differ by at most one."""
    _check_k(k)
    if n < 0:
        raise ValueError(f"the number of rows must be non-negative, got {n}")
    shares = np.array_split(rng.permutation(n), k)
    return [np.sort(share).astype(np.int64) for share in shares]


def partition_target_to_one(is_target: ArrayLike, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Every row flagged ``is_target`` to owner 0; the other rows split evenly (at random) among
    all ``k`` owners (the shape of the paper's experiment)."""
    _check_k(k)
    flags = np.asarray(is_target, dtype=bool)
    if flags.ndim != 1:
        raise ValueError(f"is_target must be one flag per row, got shape {flags.shape}")
    owner = np.zeros(flags.size, dtype=np.int64)
    others = np.flatnonzero(~flags)
    owner[others[rng.permutation(others.size)]] = np.arange(others.size) % k
    return _split_by_owner(owner, k)


def partition_by_group(groups: ArrayLike, k: int, skew: float, rng: np.random.Generator) -> list[np.ndarray]:
    """A split skewed by group: owner i favours the groups g with g % k == i.

    Each row goes to the owner favouring its group with probability ``skew``, otherwise to an owner
    chosen uniformly at random (possibly the favouring one again). ``skew = 1`` gives owner i exactly
    the rows of its favoured groups; ``skew = 0`` is a uniform random split.
    """
    _check_k(k)
    if not 0.0 <= skew <= 1.0:
        raise ValueError(f"skew must lie in [0, 1], got {skew}")
    g = np.asarray(groups, dtype=np.int64)
    if g.ndim != 1 or (g.size and g.min() < 0):
        raise ValueError("groups must be a 1-D array of non-negative group ids")
    favoured = rng.random(g.size) < skew
    anyone = rng.integers(k, size=g.size)
    owner = np.where(favoured, g % k, anyone)
    return _split_by_owner(owner, k)


def partition_attribute_distance(values: ArrayLike, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The PFDS split (docs/design.md §4): rows go to owners whose anchor is close to the row's value.

    Each owner i draws an anchor a_i uniformly in [min, max] of ``values``; a row with value x goes
    to owner i with probability proportional to 1/|x - a_i|. A row equal to an anchor goes to that
    owner (to one of them, uniformly, if several anchors are equal to it).
    """
    _check_k(k)
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or not np.isfinite(x).all():
        raise ValueError("values must be a 1-D array of finite numbers")
    if x.size == 0:
        return [np.empty(0, dtype=np.int64) for _ in range(k)]
    return assign_by_distance(x, draw_anchors(x, k, rng), rng)


def draw_anchors(values: ArrayLike, k: int, rng: np.random.Generator) -> np.ndarray:
    """One anchor a_i per owner, uniform in [min, max] of ``values`` (which must be non-empty)."""
    _check_k(k)
    x = np.asarray(values, dtype=np.float64)
    return rng.uniform(x.min(), x.max(), size=k)


def assign_by_distance(values: ArrayLike, anchors: ArrayLike, rng: np.random.Generator) -> list[np.ndarray]:
    """Send each row to owner i with probability ∝ 1/|x - a_i| (see :func:`attribute_distance_probabilities`)."""
    a = np.asarray(anchors, dtype=np.float64)
    k = a.size
    _check_k(k)
    cumulative = np.cumsum(attribute_distance_probabilities(values, a), axis=1)
    u = rng.random(cumulative.shape[0]) * cumulative[:, -1]
    owner = np.minimum((u[:, None] >= cumulative).sum(axis=1), k - 1)
    return _split_by_owner(owner, k)


def attribute_distance_probabilities(values: ArrayLike, anchors: ArrayLike) -> np.ndarray:
    """Row-by-owner probabilities ∝ 1/|x - a_i|; a row at zero distance goes to the anchor(s) it equals.

    Weights are computed as min_j |x - a_j| / |x - a_i|, which equals 1/|x - a_i| up to a per-row
    factor and never overflows, however close a row lies to an anchor.
    """
    x = np.asarray(values, dtype=np.float64)
    a = np.asarray(anchors, dtype=np.float64)
    distance = np.abs(x[:, None] - a[None, :])
    nearest = distance.min(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        weights = np.where(nearest > 0, nearest / distance, (distance == 0).astype(np.float64))
    return weights / weights.sum(axis=1, keepdims=True)
