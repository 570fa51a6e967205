"""The public domain of the records: a box every record must lie in, and the M²M prior on it.

The box is configuration, not a statistic: it is given by the scenario (physical bounds of the
attributes) and never fitted on private data. Everything that depends on it (the feature maps'
bucket offsets, the M²M synthetic samples) is therefore public too. A record outside the box is an
error rather than something silently clipped, so that a wrong box cannot go unnoticed; an owner who
wants clipping calls :meth:`Box.clip` first (a per-record transformation, harmless for DP).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from ._checks import as_finite_array, check_generator, check_int

#: Rows validated per block, so that the boolean temporaries stay small for huge datasets.
CHECK_CHUNK_ROWS = 1 << 16


@dataclass(frozen=True, eq=False)
class Box:
    """The axis-aligned box [lower, upper] (closed) that every record lies in; public configuration."""

    lower: np.ndarray
    upper: np.ndarray

    def __post_init__(self) -> None:
        lower = np.array(as_finite_array("Box", "lower", self.lower, ndim=1))
        upper = np.array(as_finite_array("Box", "upper", self.upper, ndim=1))
        if lower.size == 0 or upper.shape != lower.shape:
            raise ValueError(
                f"The 'upper' parameter of Box must have the non-empty shape of 'lower' {lower.shape}. "
                f"Got shape {upper.shape} instead."
            )
        if not np.all(lower < upper):
            bad = int(np.argmin(lower < upper))
            raise ValueError(
                f"The 'upper' parameter of Box must be above 'lower' in every attribute. "
                f"Got lower[{bad}] = {float(lower[bad])!r} >= upper[{bad}] = {float(upper[bad])!r} instead."
            )
        lower.setflags(write=False)
        upper.setflags(write=False)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    @classmethod
    def unit(cls, dim: int) -> Box:
        """[0, 1]^dim."""
        dim = check_int("Box.unit", "dim", dim)
        return cls(np.zeros(dim), np.ones(dim))

    @property
    def dim(self) -> int:
        return int(self.lower.size)

    @property
    def width(self) -> np.ndarray:
        return self.upper - self.lower

    def __repr__(self) -> str:
        return f"Box(lower={self.lower.tolist()}, upper={self.upper.tolist()})"

    def check(self, X: ArrayLike, *, owner: str, name: str = "X") -> np.ndarray:
        """``X`` as a float64 (n, dim) array, after checking its shape, that it is finite and that
        every row lies in the box; the error names the first bad row."""
        try:
            X = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise TypeError(
                f"The '{name}' parameter of {owner} must be an array of real numbers. Got {type(X).__name__} instead."
            ) from None
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ValueError(
                f"The '{name}' parameter of {owner} must be a 2-D array with {self.dim} columns "
                f"(one row per record). Got shape {X.shape} instead."
            )
        for start in range(0, X.shape[0], CHECK_CHUNK_ROWS):
            block = X[start : start + CHECK_CHUNK_ROWS]
            finite = np.isfinite(block)
            if not finite.all():
                row = start + int(np.argmin(finite.all(axis=1)))
                raise ValueError(
                    f"The '{name}' parameter of {owner} must be finite. Got NaN or infinity in row {row} instead."
                )
            inside = (block >= self.lower) & (block <= self.upper)
            if not inside.all():
                row = int(np.argmin(inside.all(axis=1)))
                col = int(np.argmin(inside[row]))
                raise ValueError(
                    f"The '{name}' parameter of {owner} must lie in the public box. Got row {start + row} with "
                    f"attribute {col} = {float(block[row, col])!r} outside [{float(self.lower[col])!r}, "
                    f"{float(self.upper[col])!r}] "
                    "instead (clip the records with Box.clip, or widen the box in the configuration)."
                )
        return X

    def contains(self, X: ArrayLike) -> np.ndarray:
        """One bool per row of X: inside the box (NaN rows are outside)."""
        X = np.asarray(X, dtype=np.float64)
        return np.all((X >= self.lower) & (X <= self.upper), axis=-1)

    def clip(self, X: ArrayLike) -> np.ndarray:
        """X with every attribute clipped to the box (a per-record map: it costs no privacy)."""
        return np.clip(np.asarray(X, dtype=np.float64), self.lower, self.upper)

    def uniform(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n points drawn uniformly in the box."""
        n = check_int("Box.uniform", "n", n, minimum=0)
        rng = check_generator("Box.uniform", rng)
        return self.lower + rng.random((n, self.dim)) * self.width

    def state(self) -> bytes:
        """The exact bytes of the bounds, for fingerprints."""
        return self.lower.astype("<f8").tobytes() + self.upper.astype("<f8").tobytes()


@dataclass(frozen=True, eq=False)
class Prior:
    """The M²M prior psi: uniform on the box, except the attributes listed in ``discrete``, which
    are drawn uniformly from a finite set of values (e.g. a 0/1 label for logistic regression,
    as the paper's Omega = [0, 1]^5 x {0, 1})."""

    box: Box
    discrete: Mapping[int, Sequence[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.box, Box):
            raise TypeError(f"The 'box' parameter of Prior must be a Box. Got {type(self.box).__name__} instead.")
        checked: dict[int, np.ndarray] = {}
        for attribute, values in dict(self.discrete).items():
            attribute = check_int("Prior", "discrete", attribute, minimum=0)
            if attribute >= self.box.dim:
                raise ValueError(
                    f"The 'discrete' parameter of Prior must name attributes below {self.box.dim}. "
                    f"Got attribute {attribute} instead."
                )
            unique = np.unique(as_finite_array("Prior", "discrete", values, ndim=1))
            lo, hi = self.box.lower[attribute], self.box.upper[attribute]
            if unique.size == 0 or unique.min() < lo or unique.max() > hi:
                raise ValueError(
                    f"The 'discrete' parameter of Prior must give, for attribute {attribute}, a non-empty "
                    f"set of values inside [{float(lo)!r}, {float(hi)!r}]. Got {unique.tolist()} instead."
                )
            unique.setflags(write=False)
            checked[attribute] = unique
        object.__setattr__(self, "discrete", checked)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n synthetic points from the prior."""
        points = self.box.uniform(n, rng)
        for attribute, values in self.discrete.items():
            choices = np.asarray(values)  # the read-only array __post_init__ kept (no copy)
            points[:, attribute] = choices[rng.integers(0, choices.size, size=points.shape[0])]
        return points
