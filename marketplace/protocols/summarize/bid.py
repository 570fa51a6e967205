"""The owner's bid and the curator's check of it, in RFF space.

Derivation (docs/design.md §3). With |D_s| = q and
J(S) = 2/(m|S|) sum_{v,s} k(v,s) - 1/|S|^2 sum_{s,s'} k(s,s')   (= const - MMD^2(S, D_v)),
adding a point y changes J by
    (2/(q+1)) * [ mean_v k(v,y) - (q/(q+1)) mean_s k(s,y) ] - k(y,y)/(q+1)^2 + (terms free of y).
k(y,y) = 1 for the RBF kernel, and with k(a,b) ~ h1(a).h1(b) the bracket is
(g~ - (q/(q+1)) g_l) . h1(y), where g~ and g_l are the mean embeddings of D_v and D_s.
So every owner bids the largest value of ``direction . h1(x)`` over its unsent points.
"""

from __future__ import annotations

import numpy as np

from marketplace.protocols.summarize.features import gamma


def bid_direction(target_mean: np.ndarray, summary_mean: np.ndarray, q: int) -> np.ndarray:
    """g~ - (q/(q+1)) g_l: the vector an owner dots with h1(x) to get its bid.

    ``q`` is the current size of D_s *including* the seed set. With q = 0 the summary is empty and
    ``summary_mean`` is ignored (pass zeros).
    """
    target_mean = np.asarray(target_mean, dtype=np.float64)
    summary_mean = np.asarray(summary_mean, dtype=np.float64)
    if target_mean.ndim != 1 or summary_mean.shape != target_mean.shape:
        raise ValueError(
            "target_mean and summary_mean must be 1-D of the same length; "
            f"got {target_mean.shape} and {summary_mean.shape}"
        )
    if q < 0:
        raise ValueError(f"q (size of D_s) must be >= 0; got {q}")
    if q == 0:
        return target_mean.copy()
    return target_mean - (q / (q + 1.0)) * summary_mean


def best_offer(features: np.ndarray, direction: np.ndarray, available: np.ndarray) -> tuple[int, float] | None:
    """The available row with the largest bid ``features[i] . direction``, as (row, bid).

    Ties go to the lowest row index; None when no row is available. One matrix-vector product and a
    masked argmax: the feature matrix is never copied when it is float64 or float32 (float32
    features are multiplied in float32, half the memory traffic; the ranking may then differ from
    float64's only between rows whose bids agree to ~1e-7). The returned bid is bit-identical to
    ``bid_value(features[row], direction)``.
    """
    features = np.asarray(features)
    direction = np.asarray(direction, dtype=np.float64)
    product_direction = direction.astype(np.float32) if features.dtype == np.float32 else direction
    available = np.asarray(available, dtype=bool)
    if features.ndim != 2 or direction.shape != (features.shape[1],):
        raise ValueError(
            f"direction must have shape ({features.shape[-1]},) to match features {features.shape}; "
            f"got {direction.shape}"
        )
    if available.shape != (features.shape[0],):
        raise ValueError(
            f"available must have one flag per row of features; got {available.shape} for {features.shape}"
        )
    if not available.any():
        return None
    scores = features @ product_direction
    np.copyto(scores, -np.inf, where=~available)
    row = int(np.argmax(scores))  # argmax returns the first maximum: lowest index wins ties
    # Report the bid exactly as bid_value computes it: a matrix-vector product and a single dot
    # product may differ in the last bit, and the curator verifies bids with bid_value.
    return row, bid_value(features[row], direction)


def bid_value(feature_row: np.ndarray, direction: np.ndarray) -> float:
    """The bid of one point: h1(x) . direction (the curator recomputes it to verify an offer)."""
    feature_row = np.asarray(feature_row, dtype=np.float64)
    direction = np.asarray(direction, dtype=np.float64)
    if feature_row.shape != direction.shape or feature_row.ndim != 1:
        raise ValueError(
            f"feature_row and direction must be 1-D of equal length; got {feature_row.shape}, {direction.shape}"
        )
    return float(feature_row @ direction)


def bid_rounding(feature_row: np.ndarray, direction: np.ndarray, feature_error: np.ndarray | float = 0.0) -> float:
    """The largest |claimed - recomputed| that floating-point rounding alone can put between an honest
    owner's bid and the curator's recomputation of it from the point: the curator's check must allow
    this much, or it refuses honest owners for their data (docs/design.md §10).

    ``feature_row`` is h1 of the point as the curator has it; ``feature_error`` bounds, per
    coordinate, how far any honest evaluation of h1 of that point is from the exact one
    (:meth:`RandomFourierFeatures.transform_error`; 0 when owner and curator dot the same vector, as
    with a less-trusted curator). Both parties dot with the same direction (both compute
    :func:`bid_direction` from the same floats, element by element). So the two embeddings differ
    by at most 2 e_j per coordinate, and each side's dot product of length d errs by at most
    gamma_d sum_j |phi_j| |direction_j|; the sum of the two, doubled so that this bound's own
    arithmetic cannot make it too small.

    >>> bid_rounding(np.array([0.5, -0.5]), np.array([1.0, 1.0])) < 1e-15
    True
    >>> bid_rounding(np.array([0.5, -0.5]), np.array([1.0, 1.0]), np.array([1e-7, 1e-7])) > 4e-7
    True
    """
    phi = np.abs(np.asarray(feature_row, dtype=np.float64))
    weights = np.abs(np.asarray(direction, dtype=np.float64))
    spread = 2.0 * np.broadcast_to(np.asarray(feature_error, dtype=np.float64), phi.shape)
    apart = float(spread @ weights)
    dots = gamma(len(phi)) * float((2.0 * phi + spread) @ weights)
    return 2.0 * (apart + dots)


def rff_mmd2_gain(target_mean: np.ndarray, summary_sum: np.ndarray, q: int, phi: np.ndarray) -> float:
    """How much ||mean_S - mean_V||^2 (RFF mean embeddings) drops when the point phi joins S.

    S holds q points whose features sum to ``summary_sum``. Positive means the point helps. An empty
    S (q = 0) is taken as the zero embedding, so the gains of successive points add up to the total
    drop from ||mean_V||^2. This is the per-point value credited to the owner who sent it.
    """
    target_mean = np.asarray(target_mean, dtype=np.float64)
    summary_sum = np.asarray(summary_sum, dtype=np.float64)
    phi = np.asarray(phi, dtype=np.float64)
    if not (target_mean.ndim == 1 and summary_sum.shape == target_mean.shape == phi.shape):
        raise ValueError(
            f"target_mean, summary_sum and phi must be 1-D of equal length; "
            f"got {target_mean.shape}, {summary_sum.shape}, {phi.shape}"
        )
    if q < 0:
        raise ValueError(f"q (size of S) must be >= 0; got {q}")
    before = summary_sum / q if q > 0 else np.zeros_like(summary_sum)
    after = (summary_sum + phi) / (q + 1)
    return float(np.sum((before - target_mean) ** 2) - np.sum((after - target_mean) ** 2))


def rff_objective(target_mean: np.ndarray, summary_sum: np.ndarray, diag_excess: float, q: int) -> float:
    """J(S) = 2/(m|S|) sum k(v,s) - 1/|S|^2 sum k(s,s') with RFF cross terms and the RBF diagonal 1.

    ``diag_excess`` is sum over s of (1 - ||h1(s)||^2): it replaces the features' own squared norms
    on the diagonal by the kernel's k(s,s) = 1, the same convention as the bid. J of the empty set
    is taken as 0.
    """
    if q == 0:
        return 0.0
    s = np.asarray(summary_sum, dtype=np.float64)
    return float(2.0 * np.dot(target_mean, s) / q - (np.dot(s, s) + diag_excess) / q**2)


def rff_objective_gain(
    target_mean: np.ndarray, summary_sum: np.ndarray, diag_excess: float, q: int, phi: np.ndarray
) -> float:
    """J(S + y) - J(S) under :func:`rff_objective`: the marginal gain a point brings (its value).

    Up to a term that does not depend on y this is (2/(q+1)) times the point's bid, so the value
    ranks points exactly as the auction does.
    """
    phi = np.asarray(phi, dtype=np.float64)
    after = rff_objective(target_mean, summary_sum + phi, diag_excess + 1.0 - float(np.dot(phi, phi)), q + 1)
    return after - rff_objective(target_mean, summary_sum, diag_excess, q)


def stacked_best_rows(
    features: np.ndarray, starts: np.ndarray, available: np.ndarray, direction: np.ndarray, row_norm: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`best_offer`'s choice for many owners at once: their feature rows stacked in one matrix
    (owner i holds rows ``starts[i]`` up to the next start, every owner at least one), one
    matrix-vector product and a segmented argmax instead of one product per owner.

    Returns, per owner, the chosen row within its own rows (-1: none available) and whether that
    choice is *certain*: a product over a different stack of rows may round each score differently
    in its last bits (BLAS blocks rows in groups), so when an owner's best and runner-up scores are
    closer than rounding can move them (at most ``4 gamma_d |row| |direction|`` apart between two
    evaluations, ``row_norm`` bounding every row's 2-norm; doubled here), the choice is not certain
    and the caller must ask :func:`best_offer` on that owner's own rows, which is what it would have
    got alone. Ties are never certain, so the lowest-row rule stays :func:`best_offer`'s.

    >>> f = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5], [0.2, 0.0]])
    >>> rows, certain = stacked_best_rows(f, np.array([0, 2]), np.ones(4, bool), np.array([1.0, 2.0]), 1.0)
    >>> rows.tolist(), certain.tolist()
    ([1, 0], [True, True])
    """
    direction = np.asarray(direction, dtype=np.float64)
    product_direction = direction.astype(np.float32) if features.dtype == np.float32 else direction
    n = features.shape[0]
    scores = features @ product_direction
    np.copyto(scores, -np.inf, where=~available)
    best = np.maximum.reduceat(scores, starts)
    lengths = np.diff(np.append(starts, n))
    first = np.minimum.reduceat(np.where(scores == np.repeat(best, lengths), np.arange(n), n), starts)
    found = first < n  # no row equals its owner's best only when a score is NaN: left to best_offer
    scores[first[found]] = -np.inf
    runner = np.maximum.reduceat(scores, starts)
    eps = float(np.finfo(features.dtype).eps) / 2.0
    d = features.shape[1]
    nu = d * eps
    slack = 8.0 * (nu / (1.0 - nu)) * row_norm * float(np.linalg.norm(product_direction.astype(np.float64)))
    none = np.isneginf(best)
    with np.errstate(invalid="ignore"):
        certain = found & (none | np.isneginf(runner) | (best - runner > slack))
    rows = np.where(none | ~found, -1, first - starts)
    return rows, certain
