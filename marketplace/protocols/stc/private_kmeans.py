"""The paper's PrivateKmeans baseline: differentially private Lloyd's algorithm on the source S.

The paper clusters S privately into 100 centres and gives them to the STC solver as free centres,
in place of NAS/NNA's S'. It used Balcan et al.'s (2017) high-dimensional private clustering. We
use DP Lloyd's algorithm (Su et al. 2016), the one diffprivlib's ``KMeans`` implements; diffprivlib
itself does not import with scikit-learn 1.9 (nor does its fork diffprivlib-fix 0.6.7), and OpenDP
has no k-means. This is the same algorithm, with its noise taken from
:mod:`marketplace.privacy.mechanisms` and calibrated like NNA's (see :mod:`.release`).

**Algorithm.** Points must be scaled first (norm <= 1/2, :class:`.scaling.PublicScaling`).

1. *Start*: k centres drawn uniformly in the ball of radius 1/2 from ``rng``. They do not look at
   S, so they are public randomness and cost nothing.
2. *Each of the* ``iterations`` *rounds*: every source point joins its nearest centre (a KD-tree on
   the k centres); for every cluster j the count n_j and the coordinate sum r_j are released with
   noise, *empty clusters included* (skipping them would reveal that they are empty); the new
   centre is r_j / n_j when the noisy n_j >= 1, else the old centre stays; it is then projected
   into the ball of radius 1/2 (a noisy mean can land outside it).

**Privacy.** Neighbouring source sets differ by adding or removing one point s. In one round the
centres are fixed (public: the start, or the previous round's output), and the cluster a point
joins depends only on that point and those centres. So adding or removing s changes exactly one
cluster's (count, sum) pair, by (1, s), and no other: the same one-row change as NNA's cells, with
L1 norm 1 + ||s||_1 <= 1 + sqrt(d)/2 <= sqrt(d) + 1 and L2 norm sqrt(1 + ||s||^2) <= sqrt(5)/2 <= 2.
Each round is therefore calibrated as NNA's release, with its share of the budget:

* pure DP: ``Laplace(epsilon=eps/iterations, sensitivity=sqrt(d) + 1)`` on the k x (d + 1) matrix
  of (count, sum), b = iterations (sqrt(d) + 1)/eps per value, and each round is eps/iterations-DP;
* zCDP: ``GaussianZCDP(rho=rho/iterations, sensitivity=2)``, sigma = sqrt(2 iterations/rho), and
  each round is rho/iterations-zCDP.

A round takes the previous rounds' outputs as input, so the rounds compose adaptively: by basic
composition of pure DP the whole run is eps-DP, and zCDP composes additively to rho-zCDP. The
centre update, the keep-or-not rule, the projection and the choice of final centres read only the
noisy releases and the earlier centres, so they are post-processing and cost nothing. As for NNA,
sqrt(d) + 1 and 2 are upper bounds: the stated cost is not under-counted.

Differences from diffprivlib's ``KMeans``: it splits each round's budget between a count and a
per-coordinate sum mechanism (Su et al.'s ratio), chooses the number of rounds (2 to 7) from the
data size, skips the noise of clusters that are empty, and draws its start with a minimum
separation in the bounding box. Here one mechanism covers the (count, sum) pair, the rounds are a
parameter, every cluster is noised, and the start is uniform in the ball.

**Final centres.** :attr:`PrivateKmeansRelease.centers` holds only the centres whose last noisy
count reached 1. A centre that did not was not moved in the last round: it is an earlier round's
centre or the random start, and the last release says almost no source point is near it. Given to
the STC solver as a free centre, it would claim that S covers a region where S may be empty, and
the solver would then skip target points there (the reason NNA drops cells below its threshold).
Every centre is still in :attr:`~PrivateKmeansRelease.all_centers`.

>>> from marketplace.privacy.rng import make_rng
>>> S = np.array([[0.1, 0.1], [0.12, 0.1], [-0.3, 0.2], [-0.28, 0.21]])
>>> release = private_kmeans(S, 2, eps=3.0, iterations=5, rng=make_rng(seed=0, secure=False))
>>> release.epsilon, release.iterations, round(release.scale, 6), release.all_centers.shape
(3.0, 5, 4.023689, (2, 2))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from marketplace.privacy.accountant import Step
from marketplace.privacy.mechanisms import GaussianZCDP, Laplace

from . import _checks
from .release import NNA_L2_SENSITIVITY, _frozen, _Release
from .scaling import RADIUS, check_in_ball

__all__ = ["MIN_NOISY_COUNT", "PrivateKmeansRelease", "private_kmeans", "uniform_in_ball"]

MIN_NOISY_COUNT = 1.0
"""A cluster's centre moves (and is kept at the end) only when its noisy count is at least this."""


@dataclass(frozen=True, eq=False, kw_only=True)
class PrivateKmeansRelease(_Release):
    """The centres of DP Lloyd's algorithm and what the run cost.

    ``centers``: the final centres whose last noisy count was >= 1 (the S' to use), in the order of
    ``kept``; ``all_centers`` (k x d): every final centre; ``initial_centers`` (k x d): the public
    random start; ``noisy_counts`` (k,): the last round's noisy counts; ``iterations``: the rounds.
    ``epsilon`` / ``rho`` is the cost of the whole run; ``scale`` (b or sigma) and ``sensitivity``
    (L1 or L2, of one round's k x (d + 1) release) are those of each round's mechanism.
    """

    all_centers: np.ndarray
    initial_centers: np.ndarray
    kept: np.ndarray
    noisy_counts: np.ndarray
    iterations: int

    def __post_init__(self) -> None:
        super().__post_init__()
        kept = np.array(self.kept, dtype=np.intp)
        kept.setflags(write=False)
        object.__setattr__(self, "kept", kept)
        for name in ("all_centers", "initial_centers", "noisy_counts"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    @property
    def round_epsilon(self) -> float | None:
        """The eps of one round (eps / iterations), None under zCDP."""
        return None if self.epsilon is None else self.epsilon / self.iterations

    @property
    def round_rho(self) -> float | None:
        """The rho of one round (rho / iterations), None under pure DP."""
        return None if self.rho is None else self.rho / self.iterations

    def privacy_step(self, name: str = "stc.private_kmeans") -> Step:
        return super().privacy_step(name)


def uniform_in_ball(k: int, d: int, rng: np.random.Generator, radius: float = RADIUS) -> np.ndarray:
    """k points drawn uniformly in the d-ball of ``radius``: a uniform direction (a normalised
    Gaussian) times radius U^(1/d)."""
    directions = rng.standard_normal(size=(k, d))
    norms = np.linalg.norm(directions, axis=1, keepdims=True)
    directions /= np.where(norms > 0, norms, 1.0)
    return directions * (radius * rng.uniform(size=(k, 1)) ** (1.0 / d))


def _project(centers: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(centers, axis=1, keepdims=True)
    return centers * np.minimum(1.0, RADIUS / np.where(norms > 0, norms, 1.0))


def _counts_and_sums(S: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """(count, coordinate sum) of every centre's cluster, k x (d + 1); a point joins its nearest
    centre (a KD-tree on the centres: the choice depends on the point and the centres alone)."""
    k, d = centers.shape
    from sklearn.neighbors import KDTree  # here, not at import: reading a scenario loads this package

    labels = KDTree(centers).query(S, k=1, return_distance=False)[:, 0]
    exact = np.empty((k, d + 1))
    exact[:, 0] = np.bincount(labels, minlength=k)
    for j in range(d):
        exact[:, j + 1] = np.bincount(labels, weights=S[:, j], minlength=k)
    return exact


def private_kmeans(
    source: np.ndarray,
    k: int,
    *,
    eps: float | None = None,
    rho: float | None = None,
    iterations: int = 5,
    rng: np.random.Generator,
    secure: bool = False,
) -> PrivateKmeansRelease:
    """DP Lloyd's algorithm on ``source`` (norm <= 1/2, scaled) with k clusters, with exactly one
    of ``eps`` (Laplace, eps-DP) and ``rho`` (Gaussian, rho-zCDP) for the whole run, split evenly
    over ``iterations`` rounds (see the module docstring). ``rng`` draws the start and, unless
    ``secure``, the noise (``secure=True``: OpenDP's exact samplers, as in :mod:`.release`)."""
    where = "private_kmeans"
    budget = _checks.one_budget(eps, rho, where)
    eps, rho = budget
    S = check_in_ball(source, "source", where)
    k = _checks.positive_int(k, "k", where)
    iterations = _checks.positive_int(iterations, "iterations", where)
    rng = _checks.generator(rng, "rng", where)
    d = S.shape[1]
    mech: Laplace | GaussianZCDP
    if budget[0] is not None:
        mech = Laplace(epsilon=budget[0] / iterations, sensitivity=math.sqrt(d) + 1.0, rng=rng, secure=secure)
        scale = mech.scale
    else:
        mech = GaussianZCDP(rho=budget[1] / iterations, sensitivity=NNA_L2_SENSITIVITY, rng=rng, secure=secure)
        scale = mech.sigma
    initial = uniform_in_ball(k, d, rng)
    centers = initial.copy()
    for _ in range(iterations):
        noisy = mech.randomise(_counts_and_sums(S, centers))
        counts = noisy[:, 0]
        moved = counts >= MIN_NOISY_COUNT
        centers[moved] = _project(noisy[moved, 1:] / counts[moved, None])
    kept = np.flatnonzero(moved)
    return PrivateKmeansRelease(
        centers=centers[kept],
        mechanism=mech.name,
        epsilon=eps,
        rho=rho,
        scale=scale,
        sensitivity=mech.sensitivity,
        secure=mech.secure,
        all_centers=centers,
        initial_centers=initial,
        kept=kept,
        noisy_counts=counts,
        iterations=iterations,
    )
