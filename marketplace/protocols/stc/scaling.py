"""The public scaling that puts every point in the ball of radius 1/2 (docs/design.md §6).

Both privacy proofs of the paper need a bound on the points: with norm <= 1/2 any two points are
at most 1 apart, so replacing one point of an average of t moves it by at most 1/t (NAS), and one
point adds at most 1/2 to a sum (NNA). The map must not depend on the private source set, or it
would leak it: it is fixed by a *public* bound, x -> (x - center) * (1/2) / bound, known to every
party (domain knowledge, the scenario's declared range), never the data's own maximum norm (the
paper's normalisation, which reads the data). Distances scale by the same factor, so the solver
can work in scaled space and its choice of target points carries over unchanged.

A point beyond the bound breaks the sensitivity argument. :meth:`PublicScaling.apply` refuses it
by default; with ``clip=True`` it projects it onto the sphere of radius 1/2 instead. Clipping is a
map applied to each point on its own, so it keeps the neighbouring relation and costs no privacy.

>>> scaling = PublicScaling.for_box([0.0, 0.0], [1.0, 1.0])   # the unit square
>>> scaling.apply(np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.5]])).round(6).tolist()
[[-0.353553, -0.353553], [0.353553, 0.353553], [0.0, 0.0]]
>>> float(np.linalg.norm(scaling.apply(np.array([[3.0, 0.5]]), clip=True)))
0.5
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _checks

__all__ = ["RADIUS", "PublicScaling", "public_scaling", "check_in_ball"]

RADIUS = 0.5
"""Every scaled point has Euclidean norm <= RADIUS, so any two are at most 2 * RADIUS = 1 apart."""

_SLACK = 1e-9  # relative rounding slack allowed on the radius


@dataclass(frozen=True, eq=False)
class PublicScaling:
    """x -> (x - center) * factor, with factor = RADIUS / bound, for a public ``bound`` on
    ||x - center||. ``center`` is a (d,) array, or a scalar broadcast to every coordinate."""

    center: np.ndarray
    bound: float

    def __post_init__(self) -> None:
        center = np.array(self.center, dtype=np.float64)
        if center.ndim > 1 or not np.all(np.isfinite(center)):
            raise ValueError(
                "The 'center' parameter of PublicScaling must be a finite scalar or 1-D array. "
                f"Got shape {center.shape} instead."
            )
        center.setflags(write=False)
        object.__setattr__(self, "center", center)
        object.__setattr__(self, "bound", _checks.positive_real(self.bound, "bound", "PublicScaling"))

    @classmethod
    def for_box(cls, low: Any, high: Any) -> PublicScaling:
        """The scaling for points known to lie in the box [low, high] (public, coordinate-wise):
        centred on the box, with half its diagonal as the bound."""
        low = np.asarray(low, dtype=np.float64)
        high = np.asarray(high, dtype=np.float64)
        if low.shape != high.shape or low.ndim != 1 or not (np.all(np.isfinite(low)) and np.all(np.isfinite(high))):
            raise ValueError(
                "The 'low' and 'high' parameters of PublicScaling.for_box must be finite 1-D arrays "
                f"of one shape. Got shapes {low.shape} and {high.shape} instead."
            )
        if not np.all(high >= low) or not np.any(high > low):
            raise ValueError(
                "The 'high' parameter of PublicScaling.for_box must be >= 'low' in every coordinate "
                "and > in at least one."
            )
        return cls(center=(low + high) / 2, bound=float(np.linalg.norm(high - low) / 2))

    @property
    def factor(self) -> float:
        """What every distance is multiplied by."""
        return RADIUS / self.bound

    def apply(self, points: np.ndarray, *, clip: bool = False) -> np.ndarray:
        """The scaled points (a new array). A point whose scaled norm exceeds RADIUS raises
        ValueError, or with ``clip=True`` is projected onto the sphere of radius RADIUS."""
        X = _checks.points(points, "points", "PublicScaling.apply")
        if self.center.ndim == 1 and self.center.size != X.shape[1]:
            raise ValueError(
                f"The 'points' parameter of PublicScaling.apply must have d = {self.center.size} "
                f"columns (the center's). Got shape {X.shape} instead."
            )
        if not isinstance(clip, bool):
            raise _checks.fail(TypeError, "clip", "PublicScaling.apply", "a bool", clip)
        with np.errstate(over="ignore"):  # a far-out point may scale to inf; it is clipped like any other
            Y = (X - self.center) * self.factor
        norms, unit = _norms_and_directions(Y)
        over = norms > RADIUS
        if np.any(norms > RADIUS * (1 + _SLACK)) and not clip:
            raise ValueError(
                f"{int(over.sum())} of the {X.shape[0]} points given to PublicScaling.apply lie "
                f"outside the public bound (||x - center|| <= {self.bound:g}); their largest distance "
                f"to the center is {norms.max() / self.factor:g}. Widen the bound or pass clip=True "
                "to project them onto it."
            )
        Y[over] = RADIUS * unit[over]
        return Y

    def invert(self, points: np.ndarray) -> np.ndarray:
        """Back to the original units: y / factor + center."""
        Y = _checks.points(
            points,
            "points",
            "PublicScaling.invert",
            allow_empty=True,
            d=None if self.center.ndim == 0 else self.center.size,
        )
        return Y / self.factor + self.center


def public_scaling(bound: float, center: Any = 0.0) -> PublicScaling:
    """The scaling x -> (x - center) * (1/2) / bound, for a public bound on ||x - center||."""
    return PublicScaling(center=center, bound=bound)


def _norms_and_directions(Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows' Euclidean norms and unit directions, without overflow: each row is divided by its
    largest entry before squaring (a row of 1e200s has norm 1.4e200, not inf, and keeps its
    direction). A norm too large for a float is inf, and its direction is still right."""
    with np.errstate(invalid="ignore"):
        scale = np.abs(Y).max(axis=1) if Y.shape[1] else np.zeros(Y.shape[0])
        finite = np.isfinite(scale)
        safe = np.where((scale > 0) & finite, scale, 1.0)
        Z = Y / safe[:, None]
        # rows holding an inf entry: the direction of their infinite coordinates
        Z[~finite] = np.where(np.isinf(Y[~finite]), np.sign(Y[~finite]), 0.0)
        lengths = np.linalg.norm(Z, axis=1)
    with np.errstate(over="ignore"):
        norms = np.where(finite, scale * lengths, np.inf)
    unit = Z / np.where(lengths > 0, lengths, 1.0)[:, None]
    return norms, unit


def check_in_ball(points: np.ndarray, name: str, where: str) -> np.ndarray:
    """``points`` as a checked float64 matrix whose rows all have norm <= RADIUS (rounding aside);
    ValueError otherwise, pointing at :class:`PublicScaling`."""
    X = _checks.points(points, name, where)
    largest = float(np.sqrt(np.einsum("ij,ij->i", X, X).max()))
    if largest > RADIUS * (1 + _SLACK):
        raise ValueError(
            f"The '{name}' parameter of {where} must have every row of norm <= {RADIUS} (scale it "
            f"with PublicScaling first: the noise is calibrated for that bound). "
            f"Got a row of norm {largest!r} instead."
        )
    return X
