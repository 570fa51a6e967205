"""An owner's rows as the `summarize` owner works with them, computed once per process: their h1
embedding and their groups of identical rows.

Both depend only on the owner's :class:`~marketplace.data.dataset.Dataset` (immutable: read-only
copies of its arrays) and the public h1 map (frozen, drawn once per map:
:mod:`~marketplace.protocols.summarize.public`). A process that builds the same owner again on the
same objects (an owner agent, whose world and rows stay warm between the sessions it serves) gets
them back instead of embedding every row again. They are kept for as long as the dataset lives, and
handed out read-only, so no owner changes what another one gets.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.protocols.summarize.features import RandomFourierFeatures
from marketplace.protocols.summarize.identity import duplicate_groups


class OwnerRows(NamedTuple):
    phi: np.ndarray
    """h1 of every row, in the owner's feature dtype (read-only)."""
    same_content: np.ndarray | None
    """Row -> group of identical rows (features and label), or None when every row is distinct."""


class _Kept(NamedTuple):
    data: weakref.ref[Dataset]
    features: RandomFourierFeatures
    dtype: str
    rows: OwnerRows


_KEPT: dict[int, _Kept] = {}
"""id of a live dataset -> what was computed of it (its entry goes when the dataset does)."""


def owner_rows(data: Dataset, features: RandomFourierFeatures, dtype: str) -> OwnerRows:
    """``data``'s rows embedded by ``features`` in ``dtype``, and its groups of identical rows: kept
    from the last call on the same dataset and map, else computed (and kept while ``data`` lives)."""
    key = id(data)
    kept = _KEPT.get(key)
    if kept is not None and kept.data() is data and kept.features is features and kept.dtype == dtype:
        return kept.rows
    phi = features.transform(data.X).astype(dtype, copy=False)
    phi.setflags(write=False)
    groups = kept.rows.same_content if kept is not None and kept.data() is data else duplicate_groups(data.X, data.y)
    if groups is not None:
        groups.setflags(write=False)
    rows = OwnerRows(phi, groups)
    _KEPT[key] = _Kept(weakref.ref(data, lambda ref: _forget(key, ref)), features, dtype, rows)
    return rows


def _forget(key: int, ref: weakref.ref[Dataset]) -> None:
    """The dataset of ``ref`` is gone: drop what was kept of it (unless a newer entry took its key)."""
    kept = _KEPT.get(key)
    if kept is not None and kept.data is ref:
        del _KEPT[key]
