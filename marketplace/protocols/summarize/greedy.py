"""Selection rules for the summary D_s: the protocol's greedy rule run centrally, and the baselines.

* :func:`protocol_greedy` – what the non-private distributed protocol must reproduce exactly.
* :func:`rff_greedy_bruteforce` – the same rule from first principles (explicit J), for tests.
* :func:`exact_kernel_greedy` – the upper reference: greedy on the exact RBF kernel, no h1.
* :func:`uniform_selection` – p/K uniformly drawn points per owner.

J(S) = 2/(m|S|) sum_{v,s} k(v,s) - 1/|S|^2 sum_{s,s'} k(s,s') is MMD^2(S, D_v) up to sign and a
constant, so maximizing it greedily is greedy MMD minimization.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .bid import best_offer, bid_direction
from .kernel import kernel_row_sums, rbf_kernel


def _as_matrix(name: str, X: np.ndarray, n_cols: int | None = None) -> np.ndarray:
    """X as a float64 (rows, n_cols) matrix; an empty array of any shape becomes (0, n_cols)."""
    X = np.asarray(X, dtype=np.float64)
    if X.size == 0 and n_cols is not None:
        return X.reshape(0, n_cols)
    if X.ndim != 2 or (n_cols is not None and X.shape[1] != n_cols):
        want = "(n, dim)" if n_cols is None else f"(n, {n_cols})"
        raise ValueError(f"{name} must have shape {want}; got {X.shape}")
    return X


def _check_p(p: int, available: int) -> None:
    if p < 0:
        raise ValueError(f"p (points to select) must be >= 0; got {p}")
    if p > available:
        raise ValueError(f"p={p} points requested but only {available} can be selected")


# --- exact-kernel centralized greedy -------------------------------------------------------------


def _exact_gain(target_term: np.ndarray, summary_sums: np.ndarray, q: int) -> np.ndarray:
    """J(S + y) - J(S) for every candidate y, up to terms that do not depend on y.

    target_term[y] = mean_v k(v, y); summary_sums[y] = sum_{s in S} k(s, y); |S| = q.
    The k(y, y) = 1 self term is included (constant here, but it keeps the formula the true gain).
    """
    return 2.0 / (q + 1) * target_term - 2.0 / (q + 1) ** 2 * summary_sums - 1.0 / (q + 1) ** 2


def exact_kernel_greedy(pool: np.ndarray, target: np.ndarray, seed: np.ndarray, p: int, gamma: float) -> np.ndarray:
    """Greedy MMD summary of ``pool`` towards ``target`` with the exact RBF kernel.

    D_s starts as ``seed`` (may be empty); p times, add the pool point (never twice) that maximizes
    J(D_s + y). Returns the chosen pool indices in order. Cost: N*m + N*|seed| + p*N kernel values:
    mean_v k(v, y) is computed once, sum_s k(s, y) is updated with one kernel row per added point.
    """
    pool = _as_matrix("pool", pool)
    target = _as_matrix("target", target, pool.shape[1])
    seed = _as_matrix("seed", seed, pool.shape[1])
    if target.shape[0] == 0:
        raise ValueError("target must hold at least one point")
    _check_p(p, pool.shape[0])

    target_term = kernel_row_sums(pool, target, gamma) / target.shape[0]
    if seed.shape[0]:
        summary_sums = kernel_row_sums(pool, seed, gamma)
    else:
        summary_sums = np.zeros(pool.shape[0])
    taken = np.zeros(pool.shape[0], dtype=bool)
    chosen = np.empty(p, dtype=np.intp)
    q = seed.shape[0]
    for step in range(p):
        gain = _exact_gain(target_term, summary_sums, q)
        gain[taken] = -np.inf
        y = int(np.argmax(gain))  # lowest index among ties
        chosen[step] = y
        taken[y] = True
        summary_sums += rbf_kernel(pool[y : y + 1], pool, gamma)[0]
        q += 1
    return chosen


# --- greedy in RFF space -------------------------------------------------------------------------


def _rff_objective(target_features: np.ndarray, summary_features: np.ndarray) -> float:
    """J(S) by explicit double sums with k~(a, b) = h1(a).h1(b) for a != b and k~(a, a) = 1."""
    m, q = target_features.shape[0], summary_features.shape[0]
    cross = target_features @ summary_features.T  # k~(v, s); v and s are never the same point
    gram = summary_features @ summary_features.T
    np.fill_diagonal(gram, 1.0)  # the RBF diagonal, not |h1(s)|^2
    return 2.0 / (m * q) * float(cross.sum()) - float(gram.sum()) / q**2


def rff_greedy_bruteforce(
    owner_features: Sequence[np.ndarray],
    target_features: np.ndarray,
    seed_features: np.ndarray,
    p: int,
) -> list[tuple[int, int]]:
    """Reference greedy: try every unsent (owner, row), keep the one with the largest J(D_s + y).

    Ties go to the lowest owner, then the lowest row. Slow on purpose (tiny cases only): it states
    the objective directly, so a test can check that the cheap bid rule selects the same points.
    """
    target_features = _as_matrix("target_features", target_features)
    d = target_features.shape[1]
    owners = [_as_matrix(f"owner_features[{i}]", F, d) for i, F in enumerate(owner_features)]
    summary = _as_matrix("seed_features", seed_features, d)
    _check_p(p, sum(F.shape[0] for F in owners))

    sent: set[tuple[int, int]] = set()
    order: list[tuple[int, int]] = []
    for _ in range(p):
        best: tuple[float, int, int] | None = None
        for owner, F in enumerate(owners):
            for row in range(F.shape[0]):
                if (owner, row) in sent:
                    continue
                value = _rff_objective(target_features, np.vstack([summary, F[row : row + 1]]))
                if best is None or value > best[0]:
                    best = (value, owner, row)
        assert best is not None  # guaranteed by _check_p
        _, owner, row = best
        sent.add((owner, row))
        order.append((owner, row))
        summary = np.vstack([summary, owners[owner][row : row + 1]])
    return order


def protocol_greedy(
    owner_features: Sequence[np.ndarray],
    target_mean: np.ndarray,
    seed_features: np.ndarray,
    p: int,
    excluded_from: Mapping[int, int] | None = None,
) -> list[tuple[int, int]]:
    """The non-private protocol's decision rule, run centrally.

    Each round every owner offers its best unsent point for the direction
    bid_direction(g~, mean h1(D_s), q); the highest bid wins (ties: lowest owner id, and within an
    owner the lowest row). Returns the (owner, row) winners in order.

    ``excluded_from`` maps an owner's index to the round (1-based) from which it no longer takes
    part, as a curator that dropped it in that round goes on without it. Fewer than ``p`` winners
    come back when every remaining owner has run out of points.
    """
    target_mean = np.asarray(target_mean, dtype=np.float64)
    if target_mean.ndim != 1:
        raise ValueError(f"target_mean must be 1-D; got shape {target_mean.shape}")
    d = target_mean.shape[0]
    owners = [_as_matrix(f"owner_features[{i}]", F, d) for i, F in enumerate(owner_features)]
    seed = _as_matrix("seed_features", seed_features, d)
    _check_p(p, sum(F.shape[0] for F in owners))
    excluded_from = dict(excluded_from or {})

    available = [np.ones(F.shape[0], dtype=bool) for F in owners]
    summary_sum = seed.sum(axis=0)
    q = seed.shape[0]
    order: list[tuple[int, int]] = []
    for round_ in range(1, p + 1):
        summary_mean = summary_sum / q if q else np.zeros(d)
        direction = bid_direction(target_mean, summary_mean, q)
        winner: tuple[float, int, int] | None = None
        for owner, F in enumerate(owners):
            if excluded_from.get(owner, p + 1) <= round_:
                continue
            offer = best_offer(F, direction, available[owner])
            if offer is not None and (winner is None or offer[1] > winner[0]):
                winner = (offer[1], owner, offer[0])
        if winner is None:  # only with exclusions: _check_p guarantees p points in all
            break
        _, owner, row = winner
        available[owner][row] = False
        summary_sum = summary_sum + owners[owner][row]
        q += 1
        order.append((owner, row))
    return order


# --- uniform baseline ----------------------------------------------------------------------------


def _uniform_quotas(owner_sizes: Sequence[int], p: int) -> list[int]:
    """Split p as evenly as possible over owners, capped by their sizes (water filling).

    Each pass shares what is left equally among owners with rows to spare, the remainder going to
    the first of them; an owner that runs out keeps all its rows and the rest spreads further.
    """
    quotas = [0] * len(owner_sizes)
    remaining = p
    while remaining > 0:
        open_owners = [i for i, size in enumerate(owner_sizes) if quotas[i] < size]
        share, extra = divmod(remaining, len(open_owners))
        for rank, owner in enumerate(open_owners):
            add = min(share + (1 if rank < extra else 0), owner_sizes[owner] - quotas[owner])
            quotas[owner] += add
            remaining -= add
    return quotas


def uniform_selection(owner_sizes: Sequence[int], p: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Baseline: about p/K points per owner, drawn uniformly without replacement.

    The remainder of p/K goes to the first owners; an owner with too few rows gives all of them and
    the shortfall is spread over the others. Returns (owner, row) pairs, owner by owner, rows sorted.
    """
    sizes = [int(s) for s in owner_sizes]
    if not sizes or min(sizes) < 0:
        raise ValueError(f"owner_sizes must be a non-empty list of counts >= 0; got {list(owner_sizes)}")
    _check_p(p, sum(sizes))
    picks: list[tuple[int, int]] = []
    for owner, (size, quota) in enumerate(zip(sizes, _uniform_quotas(sizes, p))):
        rows: np.ndarray | list[int] = np.sort(rng.choice(size, size=quota, replace=False)) if quota else []
        picks.extend((owner, int(row)) for row in rows)
    return picks
