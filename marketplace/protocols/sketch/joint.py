"""Means, second moments, variances and the covariance from one sketch, made consistent together.

M²M estimates each statistic on its own, and the noise of the sketch does not respect how they
relate: a second moment can fall below the square of the mean (a negative variance), the
covariance's diagonal can disagree with second moment - mean^2, a mean can leave the box. No dataset
gives such answers. This module moves them, jointly, onto the set of answers some dataset in the box
[lo, hi]^d could give. It is post-processing of a DP release, so it costs no privacy.

**The set.** With v the variances and u(m) = (hi - m)(m - lo) the largest variance a mean m allows
on [lo, hi] (attained by mass at both ends), the answers (m, m2, C) are consistent when

    lo <= m <= hi,   C symmetric positive semi-definite,   diag C = v = m2 - m^2,   0 <= v <= u(m)

(so m^2 <= m2 <= (lo + hi) m - lo hi). In the coordinates (m, v, C) this set is convex: u is concave,
the positive semi-definite cone is convex, and every other condition is linear. In the raw
coordinates (m, m2, C) it is not (m2 = v + m^2 is curved), which is why we project in the former.

**The projection.** The answer is the nearest point of that set to the estimates in the metric

    ||m - m_hat||^2 + ||v - v_hat||^2 + ||C - C_hat||_F^2,   v_hat = m2_hat - m_hat^2

(Euclidean in the mean, the variance the raw moments imply and the covariance's entries; the
Frobenius norm counts each off-diagonal pair twice). Where both are given, the variance thus weighs
its two estimates (v_hat and diag C_hat) equally; without second moments v_hat = diag C_hat (the
diagonal counts twice), without a covariance the last term goes. It is not the nearest point in the
raw moments (m, m2, C): that set is not convex. Since the set is convex and contains the true
answers, the projection can only bring the estimates closer to them in this metric (not
necessarily in every coordinate).

Without a covariance the problem splits by attribute: the nearest point of the planar region
{(m, s): lo <= m <= hi, 0 <= s <= u(m)} to (m_hat, v_hat), which lies on the segment s = 0 or on the
parabola s = u(m), whose stationary points are the roots of a cubic: exact. With a covariance we
dualise the constraint v = diag C (Malick, "A dual approach to semidefinite least-squares problems",
2004; Boyd and Xiao, "Least-squares covariance matrix adjustment", 2005): for multipliers y, C(y) is
the positive semi-definite part of C_hat + Diag(y)/2 (negative eigenvalues clipped, Higham,
"Computing a nearest symmetric positive semidefinite matrix", 1988) and (m, v)(y) the planar
projection of (m_hat, v_hat - y/2); the dual is smooth and concave in the d multipliers, its gradient
is v(y) - diag C(y), and at its maximum (m, v, C)(y) is the nearest point. We maximise it by BFGS,
then solve gradient = 0 by Powell's hybrid method where BFGS stalls, until |v - diag C| <=
``tolerance``. The last step makes the answer exactly consistent whatever the solver reached: clip
C's negative eigenvalues, scale row and column j by sqrt(u_j / C_jj) where C_jj > u_j (a congruence,
which keeps C positive semi-definite), and set v = diag C, m2 = v + m^2. ``converged`` says whether
the solver met its tolerance before that step; either way the answer is consistent.

Answers already consistent (within :data:`FEASIBILITY_TOLERANCE`) are returned unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["FEASIBILITY_TOLERANCE", "JointProjection", "consistency_gaps", "project_jointly"]

FEASIBILITY_TOLERANCE = 1e-10
"""Largest violation of a constraint, in units of the box's squared width, still called consistent."""


@dataclass(frozen=True)
class JointProjection:
    """Consistent answers: ``mean`` (d,), ``second`` (d,) or None, ``variance`` (d,) (the covariance's
    diagonal, or second - mean^2; None with neither), ``covariance`` (d, d) or None; ``iterations`` of the
    solver (0 when the answers were already consistent) and whether it ``converged``."""

    mean: np.ndarray
    second: np.ndarray | None
    variance: np.ndarray | None
    covariance: np.ndarray | None
    iterations: int
    converged: bool


def _vector(name: str, value: ArrayLike, d: int | None) -> np.ndarray:
    array = np.array(value, dtype=np.float64)
    if array.ndim != 1 or (d is not None and array.size != d) or not np.isfinite(array).all():
        want = f"({d},)" if d is not None else "(d,)"
        raise ValueError(
            f"The '{name}' parameter of project_jointly must be a finite {want} array. "
            f"Got shape {array.shape}{'' if np.isfinite(array).all() else ' with non-finite values'} instead."
        )
    return array


def _inputs(
    mean: ArrayLike, second: ArrayLike | None, covariance: ArrayLike | None, lower: ArrayLike, upper: ArrayLike
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None, np.ndarray, np.ndarray]:
    m = _vector("mean", mean, None)
    d = m.size
    m2 = None if second is None else _vector("second", second, d)
    lo = _vector("lower", np.broadcast_to(np.asarray(lower, dtype=np.float64), (d,)), d)
    hi = _vector("upper", np.broadcast_to(np.asarray(upper, dtype=np.float64), (d,)), d)
    if not np.all(lo <= hi):
        bad = int(np.argmin(lo <= hi))
        raise ValueError(
            f"The 'upper' parameter of project_jointly must be >= 'lower' in every attribute. "
            f"Got lower[{bad}] = {lo[bad]!r} > upper[{bad}] = {hi[bad]!r} instead."
        )
    C = None if covariance is None else np.array(covariance, dtype=np.float64)
    if C is not None and (C.shape != (d, d) or not np.isfinite(C).all()):
        raise ValueError(
            f"The 'covariance' parameter of project_jointly must be a finite ({d}, {d}) matrix. "
            f"Got shape {C.shape} instead."
        )
    return m, m2, C, lo, hi


def _scale(lo: np.ndarray, hi: np.ndarray) -> float:
    return max(1.0, float(np.max(hi - lo)) ** 2) if lo.size else 1.0


def consistency_gaps(
    mean: ArrayLike,
    second: ArrayLike | None = None,
    covariance: ArrayLike | None = None,
    *,
    lower: ArrayLike = 0.0,
    upper: ArrayLike = 1.0,
) -> dict[str, float]:
    """How far answers are from consistent, per condition (0 when it holds): ``box`` (mean outside
    [lower, upper]), ``negative_variance``, ``variance_above_bound`` (v > (upper - m)(m - lower)),
    ``diagonal`` (|diag C - (second - mean^2)|), ``not_psd`` (minus the smallest eigenvalue of C),
    ``asymmetry`` (largest |C - C^T|). The variance is diag C when given, else second - mean^2."""
    m, m2, C, lo, hi = _inputs(mean, second, covariance, lower, upper)
    gaps = {"box": float(np.max(np.maximum(lo - m, m - hi), initial=0.0))}
    if m2 is None and C is None:
        return gaps
    v = np.diag(C) if C is not None else m2 - m**2
    gaps["negative_variance"] = float(np.max(-v, initial=0.0))
    gaps["variance_above_bound"] = float(np.max(v - (hi - m) * (m - lo), initial=0.0))
    if m2 is not None and C is not None:
        gaps["diagonal"] = float(np.max(np.abs(np.diag(C) - (m2 - m**2)), initial=0.0))
    if C is not None:
        gaps["asymmetry"] = float(np.max(np.abs(C - C.T), initial=0.0))
        gaps["not_psd"] = max(0.0, -float(np.linalg.eigvalsh((C + C.T) / 2).min())) if C.size else 0.0
    return gaps


def _nearest_in_region(
    a: np.ndarray, beta: np.ndarray, k: int, lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per attribute, the point (m, s) of {lo <= m <= hi, 0 <= s <= (hi - m)(m - lo)} nearest to
    (a, beta) in (m - a)^2 + k (s - beta)^2, k >= 1."""
    centre, radius = (lo + hi) / 2, (hi - lo) / 2
    inside = (lo <= a) & (a <= hi) & (beta >= 0) & (beta <= (hi - a) * (a - lo))
    # on the segment s = 0
    best_m, best_s = np.clip(a, lo, hi), np.zeros_like(a)
    best = (best_m - a) ** 2 + k * beta**2
    # on the parabola s = r^2 - t^2 (t = m - centre): stationary points solve
    # 2k t^3 + (1 - 2k (r^2 - beta)) t - (a - centre) = 0; clipped roots are still points of the arc,
    # so every candidate is feasible and the smallest distance among them is the nearest point.
    p = (1 - 2 * k * (radius**2 - beta)) / (2 * k)
    q = -(a - centre) / (2 * k)
    companion = np.zeros((a.size, 3, 3))
    companion[:, 1, 0] = companion[:, 2, 1] = 1.0
    companion[:, 0, 2], companion[:, 1, 2] = -q, -p
    roots = (
        np.clip(np.linalg.eigvals(companion).real, -radius[:, None], radius[:, None]) if a.size else np.zeros((0, 3))
    )
    for t in roots.T:
        m = np.clip(centre + t, lo, hi)
        s = np.maximum((hi - m) * (m - lo), 0.0)
        distance = (m - a) ** 2 + k * (s - beta) ** 2
        better = distance < best
        best_m, best_s, best = (
            np.where(better, m, best_m),
            np.where(better, s, best_s),
            np.where(better, distance, best),
        )
    return np.where(inside, a, best_m), np.where(inside, beta, best_s)


def _psd(C: np.ndarray) -> np.ndarray:
    values, vectors = np.linalg.eigh(C)
    if values.min() >= 0:
        return C
    out = (vectors * np.clip(values, 0.0, None)) @ vectors.T
    return (out + out.T) / 2


def _feasible_covariance(C: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """A positive semi-definite matrix with 0 <= diag <= bound near C: clip the negative eigenvalues,
    then scale row and column j by sqrt(bound_j / C_jj) where C_jj > bound_j."""
    C = _psd((C + C.T) / 2)
    diag = np.diag(C)
    factor = np.sqrt(np.where(diag > bound, bound / np.where(diag > 0, diag, 1.0), 1.0))
    C = C * factor[:, None] * factor[None, :]
    C = (C + C.T) / 2
    np.fill_diagonal(C, np.clip(np.diag(C), 0.0, bound))  # only rounding left: raising a diagonal keeps C PSD
    return C


def _dual(
    C_hat: np.ndarray, a: np.ndarray, b: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> Callable[[np.ndarray], tuple[float, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]]:
    """The Lagrange dual of the constraint v = diag C, as a function of its multipliers y, to be
    minimised (its negative): value, gradient and the inner minimisers (m, v, C)."""
    squared = float(np.sum(C_hat**2))

    def evaluate(y: np.ndarray) -> tuple[float, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        C = _psd(C_hat + np.diag(y / 2))
        m, v = _nearest_in_region(a, b - y / 2, 1, lo, hi)
        value = squared - float(np.sum(C**2)) + float(np.sum((m - a) ** 2 + (v - b) ** 2 + y * v))
        return -value, -(v - np.diag(C)), (m, v, C)

    return evaluate


def _flush_subnormals(values: np.ndarray) -> np.ndarray:
    """``values`` with subnormal numbers set to 0: far below any noise, and they make the
    eigen-solvers' steps overflow to NaN (a property test found a covariance of 2e-311 entries)."""
    return np.where(np.abs(values) < np.finfo(np.float64).tiny, 0.0, values)


def project_jointly(
    mean: ArrayLike,
    second: ArrayLike | None = None,
    covariance: ArrayLike | None = None,
    *,
    lower: ArrayLike = 0.0,
    upper: ArrayLike = 1.0,
    tolerance: float = 1e-10,
    max_iterations: int = 1000,
) -> JointProjection:
    """The answers (means, second moments, covariance) some dataset in [lower, upper]^d could give,
    nearest to the estimates in the metric of the module docstring. ``second`` and ``covariance``
    are optional; the mean is needed by both (a covariance's variances are bounded by its mean).
    ``tolerance`` bounds the gap |v - diag C| left by the dual solver before the final step."""
    m_hat, m2_hat, C_hat, lo, hi = _inputs(mean, second, covariance, lower, upper)
    scale = _scale(lo, hi)
    gaps = consistency_gaps(m_hat, m2_hat, C_hat, lower=lo, upper=hi)
    if max(gaps.values()) <= FEASIBILITY_TOLERANCE * scale:
        variance = np.diag(C_hat).copy() if C_hat is not None else (None if m2_hat is None else m2_hat - m_hat**2)
        return JointProjection(m_hat, m2_hat, variance, C_hat, 0, True)
    if C_hat is None:
        if m2_hat is None:
            return JointProjection(np.clip(m_hat, lo, hi), None, None, None, 1, True)
        m, v = _nearest_in_region(m_hat, m2_hat - m_hat**2, 1, lo, hi)
        variance = np.clip(v, 0.0, np.maximum((hi - m) * (m - lo), 0.0))
        return JointProjection(m, variance + m**2, variance, None, 1, True)
    m_hat, C_hat = _flush_subnormals(m_hat), _flush_subnormals(C_hat)
    m2_hat = None if m2_hat is None else _flush_subnormals(m2_hat)
    C_sym = (C_hat + C_hat.T) / 2
    b = m2_hat - m_hat**2 if m2_hat is not None else np.diag(C_sym).copy()
    evaluate = _dual(C_sym, m_hat, b, lo, hi)
    from scipy import optimize  # here, not at import: scipy.optimize costs ~0.3 s, needed only here

    solution = optimize.minimize(
        lambda y: evaluate(y)[:2],
        np.zeros(m_hat.size),
        jac=True,
        method="BFGS",
        options={"gtol": tolerance * scale, "maxiter": max_iterations},
    )
    y, iterations = solution.x, int(solution.nit)
    gap = np.abs(evaluate(y)[1]).max(initial=0.0)
    if gap > tolerance * scale:
        # the dual's value loses digits to cancellation, which stalls the line search near the
        # optimum; its gradient does not: polish by solving gradient = 0 (Powell's hybrid method)
        try:
            polished = optimize.root(lambda z: evaluate(z)[1], y, method="hybr", options={"xtol": 1e-15})
            polished_gap = np.abs(evaluate(polished.x)[1]).max(initial=0.0)
            iterations += int(polished.nfev)
        except (np.linalg.LinAlgError, ValueError):  # a step into non-finite values: keep the dual's point
            polished, polished_gap = None, np.inf
        if polished is not None and np.isfinite(polished_gap) and polished_gap < gap:
            y, gap = polished.x, polished_gap
    _, _, (m, _, C) = evaluate(y)
    converged = bool(gap <= tolerance * scale)
    covariance_out = _feasible_covariance(C, np.maximum((hi - m) * (m - lo), 0.0))
    variance = np.diag(covariance_out).copy()
    second_out = None if m2_hat is None else variance + m**2
    return JointProjection(m, second_out, variance, covariance_out, int(solution.nit), converged)
