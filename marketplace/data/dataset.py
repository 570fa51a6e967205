"""Labelled rows and the world built from them: what every party holds before a protocol starts.

A :class:`Dataset` is an immutable table (features, class labels, group ids and their names). Its
arrays are copied once and made read-only, so one party can never change the rows another party
(or a baseline computed in the same process) sees. A :class:`World` is the split of one source
among the owners, the consumer (D_v and a test set) and the public seed set D_init.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
from numpy.typing import ArrayLike


def _frozen_array(values: ArrayLike, dtype: type, ndim: int, name: str) -> np.ndarray:
    """A read-only, C-contiguous copy of ``values`` with the given dtype and number of dimensions."""
    array: np.ndarray = np.array(values, dtype=dtype, order="C", copy=True)
    if array.ndim != ndim:
        raise ValueError(f"Dataset.{name} must have {ndim} dimension(s), got shape {array.shape}")
    array.setflags(write=False)
    return array


@dataclass(frozen=True)
class Dataset:
    """Rows of one source: features ``X`` (n x dim), labels ``y`` and group ids ``group``.

    ``group_names[g]`` names group id ``g``; every id in ``group`` indexes ``group_names``. Labels
    are class labels (integers). The arrays are read-only copies, checked once here.
    """

    X: np.ndarray
    y: np.ndarray
    group: np.ndarray
    feature_names: tuple[str, ...]
    group_names: tuple[str, ...]
    name: str

    def __post_init__(self) -> None:
        X = _frozen_array(self.X, np.float64, 2, "X")
        y = _frozen_array(self.y, np.int64, 1, "y")
        group = _frozen_array(self.group, np.int64, 1, "group")
        n = X.shape[0]
        if y.shape[0] != n or group.shape[0] != n:
            raise ValueError(f"Dataset {self.name!r}: X has {n} rows but y has {y.shape[0]} and group {group.shape[0]}")
        if not np.isfinite(X).all():
            raise ValueError(f"Dataset {self.name!r}: X holds NaN or infinite values")
        if len(self.feature_names) != X.shape[1]:
            raise ValueError(f"Dataset {self.name!r}: {len(self.feature_names)} feature names for {X.shape[1]} columns")
        if n and (group.min() < 0 or group.max() >= len(self.group_names)):
            raise ValueError(
                f"Dataset {self.name!r}: group ids must lie in [0, {len(self.group_names)}), "
                f"got [{group.min()}, {group.max()}]"
            )
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", y)
        object.__setattr__(self, "group", group)
        object.__setattr__(self, "feature_names", tuple(self.feature_names))
        object.__setattr__(self, "group_names", tuple(self.group_names))

    def __len__(self) -> int:
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        """Number of feature columns."""
        return int(self.X.shape[1])

    def take(self, idx: ArrayLike, name: str | None = None) -> Dataset:
        """The rows at integer positions ``idx`` (or a boolean mask), with the same metadata."""
        index = np.asarray(idx)
        if index.size == 0:
            index = index.astype(np.intp)
        elif index.dtype != bool and not np.issubdtype(index.dtype, np.integer):
            raise TypeError(f"Dataset.take needs integer positions or a boolean mask, got dtype {index.dtype}")
        return Dataset(
            X=self.X[index],
            y=self.y[index],
            group=self.group[index],
            feature_names=self.feature_names,
            group_names=self.group_names,
            name=self.name if name is None else name,
        )

    def group_counts(self) -> np.ndarray:
        """Number of rows of each group id, aligned with ``group_names``."""
        return np.bincount(self.group, minlength=len(self.group_names))


class SparseParts(Sequence[Dataset]):
    """K owners' parts of which a party holds at most a few: a read-only sequence that stores only
    those (by index) and answers ``empty`` for every other owner.

    A party's share of the world (:func:`marketplace.parties.share_of`) is handed to the process
    that runs it. As a tuple of K parts it cost O(K) bytes per party, O(K^2) for a run: at 10,000
    owners an owner host's 3,334 shares pickled to 168 MB and took seconds to send. This keeps a
    share O(its own rows) whatever K is."""

    __slots__ = ("_n", "_held", "_empty")

    def __init__(self, n: int, held: dict[int, Dataset], empty: Dataset) -> None:
        if any(not 0 <= i < n for i in held):
            raise ValueError(f"SparseParts: held indices must lie in 0..{n - 1}, got {sorted(held)}")
        self._n, self._held, self._empty = n, dict(held), empty

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Dataset: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Dataset, ...]: ...
    def __getitem__(self, index: int | slice) -> Dataset | tuple[Dataset, ...]:
        if isinstance(index, slice):
            return tuple(self[i] for i in range(*index.indices(self._n)))
        i = index + self._n if index < 0 else index
        if not 0 <= i < self._n:
            raise IndexError(f"owner part {index} of {self._n}")
        return self._held.get(i, self._empty)

    def __iter__(self) -> Iterator[Dataset]:
        return (self._held.get(i, self._empty) for i in range(self._n))

    def __reduce__(self) -> tuple[type, tuple[int, dict[int, Dataset], Dataset]]:
        return SparseParts, (self._n, self._held, self._empty)

    def __repr__(self) -> str:
        return f"SparseParts({self._n} owners, holding {sorted(self._held)})"


@dataclass(frozen=True)
class World:
    """One source split among the K owners, the consumer and the public seed set.

    The parts are disjoint: no row of the source appears in two of them. ``validation`` (D_v) and
    ``test`` come from the consumer's target groups; ``seed_set`` (D_init) from other groups.
    """

    owners: tuple[Dataset, ...] | SparseParts
    validation: Dataset
    test: Dataset
    seed_set: Dataset
    central: bool = True
    """Whether this world holds every party's rows, as a simulation's does (built from one source
    and the seed), so that references needing everyone's data (uniform sampling, a central greedy,
    a central replay) can be computed from it. False for the world of a schema-only marketplace
    (:func:`marketplace.data.public_schema.schema_world`): there each party holds only its own rows,
    and a report says which figures it lacks."""

    @property
    def dim(self) -> int:
        """Number of feature columns, the same in every part."""
        return self.validation.dim

    @property
    def n_owners(self) -> int:
        return len(self.owners)
