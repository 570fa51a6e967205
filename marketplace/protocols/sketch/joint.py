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
Frobenius norm counts each off-diagonal pair twice; the term in v is dropped when no second moment is
asked, the one in C when no covariance is). Where both are given, the variance thus weighs the two
estimates of it (v_hat and diag C_hat) equally. It is not the nearest point in the raw moments
(m, m2, C): that set is not convex. We compute it by Dykstra's alternating projections (Boyle and
Dykstra, "A method for finding projections onto the intersection of convex sets in Hilbert spaces",
1986) between two convex sets whose own projections are exact:

* K1 = {C positive semi-definite}: clip the negative eigenvalues of C at 0 (Higham, "Computing a
  nearest symmetric positive semidefinite matrix", 1988);
* K2 = {lo <= m <= hi, v = diag C, 0 <= v <= u(m)}: per attribute, the nearest point of the planar
  region {(m, s): lo <= m <= hi, 0 <= s <= u(m)} to (m, mean of the variance copies), weighted by
  the number of copies; it lies on the segment s = 0 or on the parabola s = u(m), whose stationary
  points are the roots of a cubic.

Without a covariance K1 is the whole space and one projection onto K2 is exact. Dykstra converges to
the nearest point; it stops when an iteration moves nothing by more than ``tolerance``. The last
iterate is then made exactly feasible by a step that cannot break the constraints: clip C's
negative eigenvalues, scale row and column j by sqrt(u_j / C_jj) where C_jj > u_j (a congruence,
which keeps C positive semi-definite), and set v = diag C, m2 = v + m^2. ``converged`` says whether
Dykstra met its tolerance before ``max_iterations``; either way the answer is consistent.

Answers already consistent (within :data:`FEASIBILITY_TOLERANCE`) are returned unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["FEASIBILITY_TOLERANCE", "JointProjection", "consistency_gaps", "project_jointly"]

FEASIBILITY_TOLERANCE = 1e-10
"""Largest violation of a constraint, in units of the box's squared width, still called consistent."""


@dataclass(frozen=True)
class JointProjection:
    """Consistent answers: ``mean`` (d,), ``second`` (d,) or None, ``variance`` (d,) (the covariance's
    diagonal, or second - mean^2; None with neither), ``covariance`` (d, d) or None; ``iterations`` of Dykstra's
    algorithm (0 when the answers were already consistent) and whether it ``converged``."""

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
        raise ValueError(f"The '{name}' parameter of project_jointly must be a finite {want} array. "
                         f"Got shape {array.shape}{'' if np.isfinite(array).all() else ' with non-finite values'} instead.")
    return array


def _inputs(mean, second, covariance, lower, upper):
    mean = _vector("mean", mean, None)
    d = mean.size
    second = None if second is None else _vector("second", second, d)
    lo = _vector("lower", np.broadcast_to(np.asarray(lower, dtype=np.float64), (d,)), d)
    hi = _vector("upper", np.broadcast_to(np.asarray(upper, dtype=np.float64), (d,)), d)
    if not np.all(lo <= hi):
        bad = int(np.argmin(lo <= hi))
        raise ValueError(f"The 'upper' parameter of project_jointly must be >= 'lower' in every attribute. "
                         f"Got lower[{bad}] = {lo[bad]!r} > upper[{bad}] = {hi[bad]!r} instead.")
    if covariance is not None:
        covariance = np.array(covariance, dtype=np.float64)
        if covariance.shape != (d, d) or not np.isfinite(covariance).all():
            raise ValueError(f"The 'covariance' parameter of project_jointly must be a finite ({d}, {d}) matrix. "
                             f"Got shape {covariance.shape} instead.")
    return mean, second, covariance, lo, hi


def _scale(lo: np.ndarray, hi: np.ndarray) -> float:
    return max(1.0, float(np.max(hi - lo)) ** 2) if lo.size else 1.0


def consistency_gaps(mean: ArrayLike, second: ArrayLike | None = None, covariance: ArrayLike | None = None, *,
                     lower: ArrayLike = 0.0, upper: ArrayLike = 1.0) -> dict[str, float]:
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


def _nearest_in_region(a: np.ndarray, beta: np.ndarray, k: int, lo: np.ndarray, hi: np.ndarray):
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
    roots = np.clip(np.linalg.eigvals(companion).real, -radius[:, None], radius[:, None]) if a.size else np.zeros((0, 3))
    for t in roots.T:
        m, s = centre + t, radius**2 - t**2
        distance = (m - a) ** 2 + k * (s - beta) ** 2
        better = distance < best
        best_m, best_s, best = np.where(better, m, best_m), np.where(better, s, best_s), np.where(better, distance, best)
    return np.where(inside, a, best_m), np.where(inside, beta, best_s)


def _onto_k2(m, v, C, lo, hi):
    """Exact projection onto K2 = {lo <= m <= hi, v = diag C, 0 <= v <= u(m)} (off-diagonals kept)."""
    copies = [x for x in (v, None if C is None else np.diag(C)) if x is not None]
    if not copies:
        return np.clip(m, lo, hi), v, C
    m, s = _nearest_in_region(m, sum(copies) / len(copies), len(copies), lo, hi)
    if C is not None:
        C = C.copy()
        np.fill_diagonal(C, s)
    return m, (None if v is None else s), C


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


def project_jointly(mean: ArrayLike, second: ArrayLike | None = None, covariance: ArrayLike | None = None, *,
                    lower: ArrayLike = 0.0, upper: ArrayLike = 1.0, tolerance: float = 1e-12,
                    max_iterations: int = 20_000) -> JointProjection:
    """The answers (means, second moments, covariance) some dataset in [lower, upper]^d could give,
    nearest to the estimates in the metric of the module docstring. ``second`` and ``covariance``
    are optional; the mean is needed by both (a covariance's variances are bounded by its mean)."""
    m_hat, m2_hat, C_hat, lo, hi = _inputs(mean, second, covariance, lower, upper)
    scale = _scale(lo, hi)
    gaps = consistency_gaps(m_hat, m2_hat, C_hat, lower=lo, upper=hi)
    if max(gaps.values()) <= FEASIBILITY_TOLERANCE * scale:
        variance = np.diag(C_hat).copy() if C_hat is not None else (None if m2_hat is None else m2_hat - m_hat**2)
        return JointProjection(m_hat, m2_hat, variance, C_hat, 0, True)
    v_hat = None if m2_hat is None else m2_hat - m_hat**2
    C_sym = None if C_hat is None else (C_hat + C_hat.T) / 2
    if C_sym is None:
        m, v, _ = _onto_k2(m_hat, v_hat, None, lo, hi)
        iterations, converged = 1, True
    else:
        # Dykstra: x in K2, y in K1, with the correction terms p (for K1) and q (for K2).
        m, v, C = m_hat, v_hat, C_sym
        p = np.zeros_like(C)
        q_m, q_v, q_C = np.zeros_like(m), None if v is None else np.zeros_like(v), np.zeros_like(C)
        converged, iterations = False, 0
        while iterations < max_iterations:
            iterations += 1
            y_C = _psd(C + p)
            p = C + p - y_C
            new_m, new_v, new_C = _onto_k2(m + q_m, None if v is None else v + q_v, y_C + q_C, lo, hi)
            q_m, q_C = m + q_m - new_m, y_C + q_C - new_C
            if v is not None:
                q_v = v + q_v - new_v
            moved = max(np.abs(new_m - m).max(initial=0.0), np.abs(new_C - C).max(initial=0.0),
                        np.abs(new_C - y_C).max(initial=0.0),
                        0.0 if v is None else np.abs(new_v - v).max(initial=0.0))
            m, v, C = new_m, new_v, new_C
            if moved <= tolerance * scale:
                converged = True
                break
    bound = np.maximum((hi - m) * (m - lo), 0.0)
    if C_sym is None:
        variance = None if v is None else np.clip(v, 0.0, bound)
        covariance_out = None
    else:
        covariance_out = _feasible_covariance(C, bound)
        variance = np.diag(covariance_out).copy()
    second_out = None if m2_hat is None else variance + m**2
    return JointProjection(m, second_out, variance, covariance_out, iterations, converged)
