"""A point's identity is its bytes, features and label, not the row number its owner gives it.

An owner names each point it sends with a row number of its own, which nobody can check. The curator
therefore tells points apart by content, exactly as the owner counts them (:func:`duplicate_groups`:
the same features and the same label make one point, sold once): a point sold twice under two row
numbers has one key, and is refused the second time, and two different points never share one, so
an honest owner is never refused as a reseller.

* A trusted curator holds the point: :func:`point_key` hashes its features (float64, little-endian)
  and label.
* A less-trusted curator sees only h1 of the point, which is not its identity: h1 ignores the label,
  and features one ulp apart have the same h1. So the owner names each point by
  :func:`sealed_point_key`, a keyed hash of (features, label) under a secret of its own for the run,
  and sends with every point :func:`secret_commitment` of that secret. The curator tells the owner's
  points apart by that key and holds the owner to one commitment; the secret travels sealed with the
  point, so the consumer, who opens it, checks that the key and the commitment are those of the point
  it opened (a key forged to resell a point is caught there). Without the secret, the key is a
  pseudo-random string: the curator learns that the owner's points are distinct, which it knows
  anyway, and nothing of their labels.

:func:`embedding_key` hashes an h1 embedding: the name a less-trusted curator's report gives the
points of D_s (what it verified), never an identity.
"""

from __future__ import annotations

import hashlib
import secrets

import numpy as np

__all__ = [
    "COMMITMENT_BYTES",
    "KEY_BYTES",
    "SECRET_BYTES",
    "duplicate_groups",
    "embedding_key",
    "new_secret",
    "point_key",
    "sealed_point_key",
    "secret_commitment",
]

SECRET_BYTES = 32
"""Length of an owner's point-key secret."""
KEY_BYTES = 16
"""Length of a sealed point's content key."""
COMMITMENT_BYTES = 32
"""Length of the commitment to an owner's point-key secret."""


def point_key(x: np.ndarray, y: int) -> str:
    """The identity of a labelled point: a hash of its float64 features and its label."""
    digest = hashlib.sha256(np.ascontiguousarray(x, dtype="<f8").tobytes())
    digest.update(int(y).to_bytes(8, "little", signed=True))
    return digest.hexdigest()[:32]


def new_secret() -> bytes:
    """An owner's point-key secret for one run, from OS entropy."""
    return secrets.token_bytes(SECRET_BYTES)


def sealed_point_key(secret: bytes, x: np.ndarray, y: int) -> bytes:
    """The content key an owner names a point by for a less-trusted curator: BLAKE2b of the point's
    float64 features and label (the bytes :func:`point_key` hashes), keyed by the owner's secret.

    >>> s = bytes(32)
    >>> sealed_point_key(s, np.array([1.0]), 0) == sealed_point_key(s, np.array([1.0]), 1)
    False
    """
    if len(secret) != SECRET_BYTES:
        raise ValueError(f"The 'secret' parameter of sealed_point_key must be {SECRET_BYTES} bytes. Got {len(secret)}.")
    digest = hashlib.blake2b(key=bytes(secret), digest_size=KEY_BYTES, person=b"summarize-point")
    digest.update(np.ascontiguousarray(x, dtype="<f8").tobytes())
    digest.update(int(y).to_bytes(8, "little", signed=True))
    return digest.digest()


def secret_commitment(secret: bytes) -> bytes:
    """What binds an owner to one point-key secret: a hash of it (it reveals nothing of the secret)."""
    return hashlib.blake2b(bytes(secret), digest_size=COMMITMENT_BYTES, person=b"summarize-commit").digest()


def embedding_key(phi: np.ndarray) -> str:
    """A name for an h1 embedding (a hash of its float64 bytes): how a less-trusted curator's report
    names the points of D_s. Not a point's identity: two points can share an embedding."""
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
