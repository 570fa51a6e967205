"""The paper's three 2-D synthetic source/target sets (§6, Figure 2), as pure functions of a seed.

Each is built so that a good choice of target centres avoids the region the source already covers.
The paper gives the shapes but not every number; what it leaves open is fixed here and marked
"(ours)".

1. ``"gaussians"``: S ~ N((0.15, 0.15), 0.4^2 I), T ~ N((0.95, 0.95), 0.4^2 I). The paper writes
   N(mean, 0.4) without saying whether 0.4 is the standard deviation or the variance; it is read
   as the standard deviation (ours), as in ``numpy.random.normal(mean, 0.4)``.
2. ``"grid"``: clusters on a 6 x 6 grid of centres ((i + 1/2)/6, (j + 1/2)/6) over the unit square
   (ours). S holds the 18 clusters of the top three rows and the 9 of the bottom-right 3 x 3;
   T holds the 9 of the bottom-left 3 x 3 and the same 9 bottom-right ones. Standard deviation 0.01.
3. ``"random"``: S has 6 clusters with means uniform in [0, 1]^2 and standard deviation 0.03; T has
   12 clusters with means uniform in [0, 1]^2 and standard deviation 0.01.

Sizes are not given in the paper: ``n_source`` and ``n_target`` (default 1,000 each, ours) are
split as evenly as possible over the clusters. ``bounds`` is a public box for
:meth:`PublicScaling.for_box`, fixed by the generating parameters, never by the drawn points:
the unit square for set 2 (its clusters sit >= 8 standard deviations inside), [0, 1]^2 widened by
5 source standard deviations for set 3, and the means +- 4 standard deviations for set 1 (a few
points of set 1 fall outside: clip them).

>>> data = synthetic_dataset("grid", seed=3, n_source=270, n_target=180)
>>> data.source.shape, data.target.shape
((270, 2), (180, 2))
>>> bool((synthetic_dataset(2, seed=3).target == synthetic_dataset("grid", seed=3).target).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _checks

__all__ = ["SYNTHETIC_NAMES", "SyntheticSet", "synthetic_dataset"]

SYNTHETIC_NAMES = ("gaussians", "grid", "random")
"""Synthetic 1, 2 and 3 of the paper, in that order (``synthetic_dataset`` also takes 1, 2, 3)."""

_GAUSSIANS_SD = 0.4
_GRID_SD = 0.01
_RANDOM_SOURCE_SD, _RANDOM_TARGET_SD = 0.03, 0.01


@dataclass(frozen=True, eq=False)
class SyntheticSet:
    """A source/target pair: ``source`` (n_source x 2), ``target`` (n_target x 2), the cluster of
    each point (``source_clusters``, ``target_clusters``), and a public box ``bounds`` = (low, high)."""

    name: str
    source: np.ndarray
    target: np.ndarray
    source_clusters: np.ndarray
    target_clusters: np.ndarray
    bounds: tuple[tuple[float, float], tuple[float, float]]

    def __post_init__(self) -> None:
        for name in ("source", "target", "source_clusters", "target_clusters"):
            array = np.array(getattr(self, name))
            array.setflags(write=False)
            object.__setattr__(self, name, array)


def _split(total: int, parts: int) -> np.ndarray:
    """How many of ``total`` points each of ``parts`` clusters gets (as even as possible)."""
    sizes = np.full(parts, total // parts)
    sizes[: total % parts] += 1
    return sizes


def _clusters(rng: np.random.Generator, means: np.ndarray, sd: float, total: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.repeat(np.arange(means.shape[0]), _split(total, means.shape[0]))
    return means[labels] + rng.normal(0.0, sd, size=(total, 2)), labels


def _grid_means(rows: range, columns: range) -> np.ndarray:
    return np.array([[(i + 0.5) / 6, (j + 0.5) / 6] for j in rows for i in columns])


def synthetic_dataset(
    which: Any, *, seed: int | np.random.SeedSequence, n_source: int = 1000, n_target: int = 1000
) -> SyntheticSet:
    """Synthetic set ``which`` (1, 2, 3 or a name of ``SYNTHETIC_NAMES``), drawn from ``seed`` alone."""
    where = "synthetic_dataset"
    names = dict(zip((1, 2, 3), SYNTHETIC_NAMES))
    if isinstance(which, (int, np.integer)) and not isinstance(which, bool) and int(which) in names:
        which = names[int(which)]
    if which not in SYNTHETIC_NAMES:
        raise _checks.fail(ValueError, "which", where, f"1, 2, 3 or one of {list(SYNTHETIC_NAMES)}", which)
    n_source = _checks.positive_int(n_source, "n_source", where)
    n_target = _checks.positive_int(n_target, "n_target", where)
    if not isinstance(seed, (int, np.integer, np.random.SeedSequence)) or isinstance(seed, bool):
        raise _checks.fail(TypeError, "seed", where, "an int or a numpy.random.SeedSequence", seed)
    rng = np.random.default_rng(seed)
    unit = ((0.0, 0.0), (1.0, 1.0))

    if which == "gaussians":
        source, source_labels = _clusters(rng, np.array([[0.15, 0.15]]), _GAUSSIANS_SD, n_source)
        target, target_labels = _clusters(rng, np.array([[0.95, 0.95]]), _GAUSSIANS_SD, n_target)
        reach = 4 * _GAUSSIANS_SD
        bounds = ((0.15 - reach, 0.15 - reach), (0.95 + reach, 0.95 + reach))
    elif which == "grid":
        top, bottom_left, bottom_right = (
            _grid_means(range(3, 6), range(6)),
            _grid_means(range(3), range(3)),
            _grid_means(range(3), range(3, 6)),
        )
        source, source_labels = _clusters(rng, np.vstack([top, bottom_right]), _GRID_SD, n_source)
        target, target_labels = _clusters(rng, np.vstack([bottom_left, bottom_right]), _GRID_SD, n_target)
        bounds = unit
    else:
        source_means, target_means = rng.uniform(0, 1, size=(6, 2)), rng.uniform(0, 1, size=(12, 2))
        source, source_labels = _clusters(rng, source_means, _RANDOM_SOURCE_SD, n_source)
        target, target_labels = _clusters(rng, target_means, _RANDOM_TARGET_SD, n_target)
        reach = 5 * _RANDOM_SOURCE_SD
        bounds = ((-reach, -reach), (1 + reach, 1 + reach))
    return SyntheticSet(
        name=which,
        source=source,
        target=target,
        source_clusters=source_labels,
        target_clusters=target_labels,
        bounds=bounds,
    )
