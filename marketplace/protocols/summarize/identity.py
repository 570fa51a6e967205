"""A point's identity is its bytes, not the row number its owner gives it.

An owner names each point it sends with a row number of its own, which nobody can check. The curator
therefore keeps the points themselves and tells them apart by content: :func:`point_key` hashes a
point's features (float64, little-endian) and label, :func:`embedding_key` hashes an h1 embedding
(what a less-trusted curator sees instead; the same features give the same embedding). A point
sold twice under two row numbers has one key, and is refused the second time. An honest owner
whose data hold the same record twice offers it once (:func:`duplicate_groups`).
"""

from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["duplicate_groups", "embedding_key", "point_key"]


def point_key(x: np.ndarray, y: int) -> str:
    """The identity of a labelled point: a hash of its float64 features and its label."""
    digest = hashlib.sha256(np.ascontiguousarray(x, dtype="<f8").tobytes())
    digest.update(int(y).to_bytes(8, "little", signed=True))
    return digest.hexdigest()[:32]


def embedding_key(phi: np.ndarray) -> str:
    """The identity of a point as a less-trusted curator sees it: a hash of its h1 embedding."""
    return hashlib.sha256(np.ascontiguousarray(phi, dtype="<f8").tobytes()).hexdigest()[:32]


def duplicate_groups(X: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """For each row, the index of a group of rows with the same features and label; None when
    every row is distinct (the usual case, so nothing is stored)."""
    X = np.ascontiguousarray(X, dtype="<f8")
    if len(X) < 2:
        return None
    rows = np.concatenate(
        [
            X.view(np.uint8).reshape(len(X), -1),
            np.ascontiguousarray(np.asarray(y, dtype="<i8")).view(np.uint8).reshape(len(X), -1),
        ],
        axis=1,
    )
    keyed = np.ascontiguousarray(rows).view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, inverse, counts = np.unique(keyed, return_inverse=True, return_counts=True)
    if counts.max() == 1:
        return None
    return inverse.ravel()
