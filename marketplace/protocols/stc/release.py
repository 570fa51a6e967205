"""The source owner's private releases of stc: NAS and NNA (docs/design.md §6, paper §5).

Both turn the private source S (m x d) into a set S' of noisy centres that the consumer may use in
place of S; everything the consumer does with S' afterwards is post-processing. Points must be
scaled first (:class:`~marketplace.protocols.stc.scaling.PublicScaling`, norm <= 1/2), which is
what the sensitivities below rely on. Neighbouring source sets differ by adding or removing one
point (the paper's definition). All noise comes from :mod:`marketplace.privacy.mechanisms`.

**NAS** (noisy average set, Algorithm 1). For each target point x, c_x = the mean of its t nearest
source points, released with noise. Adding a point changes a t-nearest set by at most one point
(it replaces the t-th), so each c_x moves by at most 1/t in L2 (diameter 1) and sqrt(d)/t in L1;
all n = |T| averages may move, so the whole n x d release has L1 sensitivity n sqrt(d)/t and L2
sensitivity sqrt(n)/t. Hence

* pure DP: ``Laplace(epsilon=eps, sensitivity=n sqrt(d)/t)``, b = n sqrt(d)/(t eps) per value
  (Theorem 5.9 and docs/design.md agree);
* zCDP: ``GaussianZCDP(rho=rho, sensitivity=sqrt(n)/t)``, sigma = (1/t) sqrt(n/(2 rho))
  (Theorem 5.11 and docs/design.md agree).

Ties at the t-th distance are broken by a fixed total order (distance, then the coordinates,
lexicographically), which the one-point argument needs: left to the KD-tree, the choice among tied
points depends on the order of the source rows (reordering one test source moved an average of
3 by 0.49 > 1/3), so a neighbouring dataset could move an average by more than 1/t.

**NNA** (neighbour noisy averages, Algorithm 2). h_x = the source points whose nearest target
point is x: the h_x partition S, and which h_x a point joins depends only on that point and the
public T. For every x the count n_x = |h_x| and the sum r_x are released with noise; the noisy
mean r_x/n_x is kept when the noisy count reaches a threshold. One point changes one (count, sum)
pair: by 1 and by the point itself, so by 1 + ||s||_1 <= 1 + sqrt(d)/2 in L1 and
sqrt(1 + ||s||^2) <= sqrt(5)/2 in L2 at norm <= 1/2. The paper (and docs/design.md) budget for points
of norm up to 1 and the triangle inequality: L1 sensitivity sqrt(d) + 1 and L2 sensitivity 2,
hence

* pure DP: ``Laplace(epsilon=eps, sensitivity=sqrt(d) + 1)``, b = (sqrt(d) + 1)/eps;
* zCDP: ``GaussianZCDP(rho=rho, sensitivity=2)``, sigma = sqrt(2/rho).

These are the calibrations implemented, as docs/design.md fixes them. They are upper bounds, so the
release is eps-DP (rho-zCDP) as recorded; at norm <= 1/2 it is in fact (1 + sqrt(d)/2)/(1 + sqrt(d))
eps-DP (0.71 eps at d = 2, 0.63 eps at d = 8) and 5 rho/16-zCDP. The recorded cost is the stated
one, so nothing is under-counted.

Threshold (post-processing: it costs nothing whatever its value). Pure DP: docs/design.md's
1 + ln((sqrt(d) + 1)/gamma)/eps. The paper justifies it by the Laplace tail, but the count's noise
has scale b = (sqrt(d) + 1)/eps, and an empty h_x passes with probability exp(-threshold/b)/2,
which is not bounded by gamma: 2.9% at d = 2 but 7.4% at d = 8 (eps = 3, gamma = 0.05). The
threshold b ln(1/(2 gamma)) would bound it; pass ``threshold=`` to use another. zCDP (the paper
gives none): 1 + sigma sqrt(2 ln(1/gamma)), which an empty h_x exceeds with probability < gamma.

>>> from marketplace.privacy.rng import make_rng
>>> S = np.array([[0.1, 0.1], [0.12, 0.1], [-0.3, 0.2]])
>>> T = np.array([[0.1, 0.1], [-0.3, 0.25], [0.4, -0.2]])
>>> nna_partition(S, T).tolist()
[0, 0, 1]
>>> release = nna_release(S, T, eps=3.0, rng=make_rng(seed=0, secure=False))
>>> release.epsilon, release.rho, round(release.scale, 6)
(3.0, None, 0.804738)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import sparse

from marketplace.privacy.accountant import Step
from marketplace.privacy.mechanisms import GaussianZCDP, Laplace

from . import _checks
from .scaling import check_in_ball

__all__ = [
    "DEFAULT_GAMMA",
    "NNA_L2_SENSITIVITY",
    "NasRelease",
    "NnaRelease",
    "t_nearest_means",
    "nas_release",
    "nna_partition",
    "nna_threshold",
    "nna_release",
    "nas_sensitivity",
    "nna_sensitivity",
]

DEFAULT_GAMMA = 0.05
"""NNA's confidence parameter gamma when none is given (the paper leaves it open)."""

_TIE_SLACK = 1e-9  # distances this close (relative) to the t-th count as tied with it

NNA_L2_SENSITIVITY = 2.0
"""The L2 sensitivity the paper (Theorem 5.12) and docs/design.md use for NNA's (count, sum)."""


def nas_sensitivity(*, n: int, d: int, t: int, norm: str) -> float:
    """The sensitivity of NAS's whole n x d release (``norm`` ``"L1"``: n sqrt(d)/t, for Laplace noise;
    ``"L2"``: sqrt(n)/t, for Gaussian noise): every average of t points moves by at most 1/t in L2
    (the ball's diameter is 1), sqrt(d)/t in L1."""
    return n * math.sqrt(d) / t if norm == "L1" else math.sqrt(n) / t


def nna_sensitivity(*, d: int, norm: str) -> float:
    """The sensitivity of NNA's (count, sum) pairs as the paper budgets it (``norm`` ``"L1"``:
    sqrt(d) + 1, for Laplace noise; ``"L2"``: :data:`NNA_L2_SENSITIVITY`, for Gaussian noise)."""
    return math.sqrt(d) + 1.0 if norm == "L1" else NNA_L2_SENSITIVITY


def _calibrated(sensitivity: float | None, bound: float, where: str) -> float:
    """The sensitivity the noise is calibrated to: ``bound`` (the release's own), or a given one that
    covers it (a release plan's; a smaller one would under-calibrate the noise)."""
    if sensitivity is None:
        return bound
    if not _checks.is_real(sensitivity) or not math.isfinite(sensitivity) or sensitivity < bound * (1 - 1e-12):
        raise _checks.fail(
            ValueError, "sensitivity", where, f"a finite number >= the release's own {bound!r}", sensitivity
        )
    return float(sensitivity)


# ---------------------------------------------------------------------------------------------
# Releases: what was published and what it cost.


def _frozen(array: np.ndarray) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array.setflags(write=False)
    return array


@dataclass(frozen=True, eq=False, kw_only=True)
class _Release:
    """What every release states: the centres S' and the privacy cost of producing them."""

    centers: np.ndarray
    mechanism: str  # "laplace" (pure DP, epsilon) or "gaussian_zcdp" (zCDP, rho)
    epsilon: float | None
    rho: float | None
    scale: float  # the noise scale per value: b (Laplace) or sigma (Gaussian)
    sensitivity: float  # of the whole release: L1 (Laplace) or L2 (Gaussian)
    secure: bool = False  # noise from OpenDP's exact samplers (True) or numpy's seeded ones

    def __post_init__(self) -> None:
        object.__setattr__(self, "centers", _frozen(self.centers))

    @property
    def delta(self) -> float:
        return 0.0

    def privacy_cost(self) -> dict[str, Any]:
        """The cost of the whole release, in the form of ``Mechanism.privacy_cost``."""
        return {
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "delta": 0.0,
            "rho": self.rho,
            "sensitivity": self.sensitivity,
            "secure": self.secure,
        }

    def privacy_step(self, name: str) -> Step:
        """The release as one accountant step (``PrivacyLedger.check_plan`` / ``spend``)."""
        if self.epsilon is not None:
            return Step(mechanism=name, eps=self.epsilon)
        return Step(mechanism=name, rho=self.rho)


@dataclass(frozen=True, eq=False, kw_only=True)
class NasRelease(_Release):
    """NAS's S': one noisy t-nearest average per target point (n x d, in target order)."""

    t: int

    def privacy_step(self, name: str = "stc.nas") -> Step:
        return super().privacy_step(name)


@dataclass(frozen=True, eq=False, kw_only=True)
class NnaRelease(_Release):
    """NNA's S': the noisy means r_x/n_x whose noisy count reached ``threshold``.

    ``kept``: the target rows whose mean was kept, in the order of ``centers``;
    ``noisy_counts`` (n,) and ``noisy_sums`` (n x d): the released noisy counts and sums of every h_x;
    ``gamma``: the confidence parameter the threshold was derived from (None for a given threshold).
    """

    kept: np.ndarray
    noisy_counts: np.ndarray
    noisy_sums: np.ndarray
    threshold: float
    gamma: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        kept = np.array(self.kept, dtype=np.intp)
        kept.setflags(write=False)
        object.__setattr__(self, "kept", kept)
        object.__setattr__(self, "noisy_counts", _frozen(self.noisy_counts))
        object.__setattr__(self, "noisy_sums", _frozen(self.noisy_sums))

    def privacy_step(self, name: str = "stc.nna") -> Step:
        return super().privacy_step(name)


# ---------------------------------------------------------------------------------------------
# NAS.


def t_nearest_means(source: np.ndarray, target: np.ndarray, t: int) -> np.ndarray:
    """c_x for every target point x: the mean of its t nearest source points (n x d), ties at the
    t-th distance broken by (distance, coordinates) in lexicographic order. Uses a KD-tree on the
    source and a sparse n x m averaging matrix (never an n x m dense array)."""
    where = "t_nearest_means"
    S = _checks.points(source, "source", where)
    T = _checks.points(target, "target", where, d=S.shape[1])
    return _t_nearest_means(S, T, _check_t(t, S.shape[0], where))


def _check_t(t: Any, m: int, where: str) -> int:
    t = _checks.positive_int(t, "t", where)
    if t > m:
        raise _checks.fail(ValueError, "t", where, f"at most the number of source points ({m})", t)
    return t


def _t_nearest_means(S: np.ndarray, T: np.ndarray, t: int) -> np.ndarray:
    m, n = S.shape[0], T.shape[0]
    from sklearn.neighbors import KDTree  # here, not at import: reading a scenario loads this package

    tree = KDTree(S)
    distances, neighbours = tree.query(T, k=min(t + 1, m))
    neighbours = neighbours[:, :t].copy()
    if t < m:  # (near-)ties at the t-th distance: resolve them by the fixed order
        boundary = distances[:, t - 1] * (1 + _TIE_SLACK) + _TIE_SLACK
        for row in np.flatnonzero(distances[:, t] <= boundary):
            neighbours[row] = _tie_broken(S, tree, T[row], boundary[row] * (1 + _TIE_SLACK) + _TIE_SLACK, t)
    average = sparse.csr_matrix((np.full(n * t, 1.0 / t), neighbours.ravel(), np.arange(0, n * t + 1, t)), shape=(n, m))
    return np.asarray(average @ S)


def _tie_broken(S: np.ndarray, tree: Any, x: np.ndarray, radius: float, t: int) -> np.ndarray:
    """The t smallest source points for the order (distance to x, coordinates), when several sit
    at about the t-th distance: the tree gathers every point within ``radius`` (a little beyond
    the t-th distance, as its own rounding differs), and the distances that order them are
    recomputed here, so the order does not depend on the tree."""
    rows = tree.query_radius(x[None, :], r=radius)[0]
    points = S[rows]
    distance = np.sqrt(np.einsum("ij,ij->i", points - x, points - x))
    order = np.lexsort(tuple(points[:, j] for j in range(S.shape[1] - 1, -1, -1)) + (distance,))
    return rows[order[:t]]


def nas_release(
    source: np.ndarray,
    target: np.ndarray,
    *,
    t: int,
    eps: float | None = None,
    rho: float | None = None,
    rng: np.random.Generator | None,
    secure: bool = False,
    sensitivity: float | None = None,
) -> NasRelease:
    """NAS: S' = {c_x + noise : x in target}, with exactly one of ``eps`` (Laplace, eps-DP) and
    ``rho`` (Gaussian, rho-zCDP); the scales are in the module docstring. ``source`` must have
    norm <= 1/2 (scaled); ``target`` is public (or its coreset's points). ``rng`` and ``secure``
    are the mechanisms' (see :mod:`marketplace.privacy.rng`). ``t`` must not exceed |S| (the paper
    takes t in [m]); the error otherwise tells the caller that |S| < t, so pick t well below any
    plausible |S|. ``sensitivity``: the one a release plan calibrates the noise to (default: the
    release's own, :func:`nas_sensitivity`; a given one must cover it)."""
    where = "nas_release"
    budget = _checks.one_budget(eps, rho, where)
    eps, rho = budget
    S = check_in_ball(source, "source", where)
    T = _checks.points(target, "target", where, d=S.shape[1])
    t = _check_t(t, S.shape[0], where)
    means = _t_nearest_means(S, T, t)
    n, d = T.shape
    norm = "L1" if eps is not None else "L2"
    calibrated = _calibrated(sensitivity, nas_sensitivity(n=n, d=d, t=t, norm=norm), where)
    mech: Laplace | GaussianZCDP
    if budget[0] is not None:
        mech = Laplace(epsilon=budget[0], sensitivity=calibrated, rng=rng, secure=secure)
        scale = mech.scale
    else:
        mech = GaussianZCDP(rho=budget[1], sensitivity=calibrated, rng=rng, secure=secure)
        scale = mech.sigma
    return NasRelease(
        centers=mech.randomise(means),
        mechanism=mech.name,
        epsilon=eps,
        rho=rho,
        scale=scale,
        sensitivity=mech.sensitivity,
        secure=mech.secure,
        t=t,
    )


# ---------------------------------------------------------------------------------------------
# NNA.


def nna_partition(source: np.ndarray, target: np.ndarray) -> np.ndarray:
    """For each source point, the row of its nearest target point: h_x = {s : label(s) = x}. A
    KD-tree built on the public target alone, so a point's label never depends on other sources."""
    S = _checks.points(source, "source", "nna_partition")
    T = _checks.points(target, "target", "nna_partition", d=S.shape[1])
    from sklearn.neighbors import KDTree

    return KDTree(T).query(S, k=1, return_distance=False)[:, 0]


def nna_threshold(*, d: int, gamma: float = DEFAULT_GAMMA, eps: float | None = None, rho: float | None = None) -> float:
    """The noisy count a mean needs to be kept: 1 + ln((sqrt(d) + 1)/gamma)/eps under pure DP
    (docs/design.md), 1 + sqrt(2/rho) sqrt(2 ln(1/gamma)) under zCDP (see the module docstring)."""
    where = "nna_threshold"
    d = _checks.positive_int(d, "d", where)
    gamma = _checks.probability(gamma, "gamma", where)
    budget = _checks.one_budget(eps, rho, where)
    if budget[0] is not None:
        return 1.0 + math.log((math.sqrt(d) + 1.0) / gamma) / budget[0]
    sigma = NNA_L2_SENSITIVITY / math.sqrt(2.0 * budget[1])
    return 1.0 + sigma * math.sqrt(2.0 * math.log(1.0 / gamma))


def nna_release(
    source: np.ndarray,
    target: np.ndarray,
    *,
    eps: float | None = None,
    rho: float | None = None,
    gamma: float = DEFAULT_GAMMA,
    threshold: float | None = None,
    rng: np.random.Generator | None,
    secure: bool = False,
    sensitivity: float | None = None,
) -> NnaRelease:
    """NNA: noisy (count, sum) of every h_x, and S' = the noisy means whose noisy count is at least
    ``threshold`` (default :func:`nna_threshold` for ``gamma``). Exactly one of ``eps`` (Laplace,
    eps-DP) and ``rho`` (Gaussian, rho-zCDP). ``source`` must have norm <= 1/2 (scaled).
    ``sensitivity``: the one a release plan calibrates the noise to (default: the paper's,
    :func:`nna_sensitivity`; a given one must cover it)."""
    where = "nna_release"
    budget = _checks.one_budget(eps, rho, where)
    eps, rho = budget
    S = check_in_ball(source, "source", where)
    T = _checks.points(target, "target", where, d=S.shape[1])
    n, d = T.shape
    kept_gamma: float | None  # the gamma a default threshold was drawn for; None for a given threshold
    if threshold is None:
        gamma = kept_gamma = _checks.probability(gamma, "gamma", where)
        threshold = nna_threshold(d=d, gamma=gamma, eps=eps, rho=rho)
    else:
        if not _checks.is_real(threshold) or not math.isfinite(threshold):
            raise _checks.fail(
                ValueError if _checks.is_real(threshold) else TypeError,
                "threshold",
                where,
                "a finite real number or None",
                threshold,
            )
        threshold, kept_gamma = float(threshold), None
    labels = nna_partition(S, T)
    exact = np.empty((n, d + 1))
    exact[:, 0] = np.bincount(labels, minlength=n)
    for j in range(d):
        exact[:, j + 1] = np.bincount(labels, weights=S[:, j], minlength=n)
    calibrated = _calibrated(sensitivity, nna_sensitivity(d=d, norm="L1" if eps is not None else "L2"), where)
    mech: Laplace | GaussianZCDP
    if budget[0] is not None:
        mech = Laplace(epsilon=budget[0], sensitivity=calibrated, rng=rng, secure=secure)
        scale = mech.scale
    else:
        mech = GaussianZCDP(rho=budget[1], sensitivity=calibrated, rng=rng, secure=secure)
        scale = mech.sigma
    noisy = mech.randomise(exact)
    counts, sums = noisy[:, 0], noisy[:, 1:]
    kept = np.flatnonzero(counts >= threshold)
    return NnaRelease(
        centers=sums[kept] / counts[kept, None],
        mechanism=mech.name,
        epsilon=eps,
        rho=rho,
        scale=scale,
        sensitivity=mech.sensitivity,
        secure=mech.secure,
        kept=kept,
        noisy_counts=counts,
        noisy_sums=sums,
        threshold=threshold,
        gamma=kept_gamma,
    )
