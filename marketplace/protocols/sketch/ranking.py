"""Ranking owners by how close their data are to the consumer's target, from their sketches alone.

An RFF sketch z is a DP estimate of the mean embedding of the owner's data, and
<Phi(x), Phi(y)> / m' estimates the Gaussian kernel, so ||mu_T - z||^2 / m' estimates MMD^2 between
the target T (whose embedding mu_T the consumer computes from its own, non-private data) and the
owner. The same holds for RACE and HIST with their own kernels (the divisor is ||Phi(x)||^2 for
every map). To first order z = mu (1 - zeta/n) + xi/n, so the noise adds
(m sigma_xi^2 + ||mu||^2 sigma_zeta^2) / n^2 to the expected squared distance, more for small
owners; ``debias=True`` (the default) subtracts that estimate (||mu||^2 itself estimated from z),
otherwise a small owner would look far from every target because of its noise alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._checks import as_finite_array, check_precision
from .feature_maps import FeatureMap
from .release import SketchRelease

__all__ = ["OwnerRanking", "mean_embedding", "sketch_mmd2", "rank_owners", "spearman_agreement"]


def mean_embedding(feature_map: FeatureMap, X: ArrayLike, *, precision: str = "float64") -> np.ndarray:
    """mean_i Phi(x_i) of the consumer's own (non-private) target data."""
    if not isinstance(feature_map, FeatureMap):
        raise TypeError(
            f"The 'feature_map' parameter of mean_embedding must be a FeatureMap. "
            f"Got {type(feature_map).__name__} instead."
        )
    check_precision("mean_embedding", precision)
    X = feature_map.check(X, owner="mean_embedding")
    if X.shape[0] == 0:
        raise ValueError("The 'X' parameter of mean_embedding must hold at least one record. Got none instead.")
    return feature_map.sum_features(X, precision=precision) / X.shape[0]


def _check_embedding(owner: str, feature_map: FeatureMap, embedding: ArrayLike) -> np.ndarray:
    embedding = as_finite_array(owner, "target_embedding", embedding, ndim=1)
    if embedding.size != feature_map.n_features:
        raise ValueError(
            f"The 'target_embedding' parameter of {owner} must have {feature_map.n_features} values. "
            f"Got {embedding.size} instead."
        )
    return embedding


def sketch_mmd2(
    target_embedding: ArrayLike, release: SketchRelease, feature_map: FeatureMap, *, debias: bool = True
) -> float:
    """The estimate of MMD^2(target, owner) from the owner's sketch (module docstring)."""
    if not isinstance(release, SketchRelease):
        raise TypeError(
            f"The 'release' parameter of sketch_mmd2 must be a SketchRelease. Got {type(release).__name__} instead."
        )
    release.check_map(feature_map, owner="sketch_mmd2")
    mu = _check_embedding("sketch_mmd2", feature_map, target_embedding)
    z, n = release.z, release.n_estimate
    value = float(np.sum((mu - z) ** 2))
    if debias:
        numerator_term = release.n_features * release.numerator_variance / n**2
        embedding_norm2 = max(float(z @ z) - numerator_term, 0.0)
        value -= numerator_term + embedding_norm2 * release.count_variance / n**2
    return value / feature_map.squared_norm


@dataclass(frozen=True, eq=False)
class OwnerRanking:
    """Owners ordered from the closest to the target: ``order[0]`` is the index of the best owner,
    ``mmd2[i]`` the estimate for owner i."""

    order: np.ndarray
    mmd2: np.ndarray


def rank_owners(
    target_embedding: ArrayLike, releases: Sequence[SketchRelease], feature_map: FeatureMap, *, debias: bool = True
) -> OwnerRanking:
    """Estimate MMD^2 to the target for every owner's sketch and sort them (closest first; ties
    keep the owners' order)."""
    releases = list(releases)
    if not releases:
        raise ValueError("The 'releases' parameter of rank_owners must hold at least one sketch. Got none instead.")
    scores = np.array([sketch_mmd2(target_embedding, r, feature_map, debias=debias) for r in releases])
    scores.setflags(write=False)
    order = np.argsort(scores, kind="stable")
    order.setflags(write=False)
    return OwnerRanking(order=order, mmd2=scores)


def spearman_agreement(estimated: ArrayLike, reference: ArrayLike) -> float:
    """Spearman's rank correlation between two score vectors over the same owners (1 = same
    ranking); NaN when either is constant."""
    a = as_finite_array("spearman_agreement", "estimated", estimated, ndim=1)
    b = as_finite_array("spearman_agreement", "reference", reference, ndim=1)
    if a.size != b.size or a.size < 2:
        raise ValueError(
            f"The 'reference' parameter of spearman_agreement must have as many scores as 'estimated' "
            f"(at least 2). Got {b.size} and {a.size} instead."
        )
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan
    from scipy.stats import spearmanr  # here, not at import: scipy.stats costs ~0.5 s, the consumer never needs it

    return float(spearmanr(a, b).statistic)
