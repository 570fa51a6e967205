"""Sealing points for the consumer, so a less-trusted curator relays them without reading them.

In the less-trusted form of `summarize` the curator works on h1 embeddings only. The raw point
(features and label) still has to reach the consumer, so the owner seals it to the consumer's
public key (libsodium's sealed box: an ephemeral X25519 key, XSalsa20-Poly1305; anyone can seal,
only the consumer can open, and tampering is detected). The curator stores the sealed bytes next
to the embedding it verified and forwards only the points that end in the summary; owners never
learn which of their points were kept.

The plaintext has a fixed layout, ``dim`` little-endian float64 features, one int64 label, then the
owner's point-key secret (:mod:`~marketplace.protocols.summarize.identity`: the consumer checks the
point's content key with it), so every sealed point of a run has the same length
(``sealed_size(dim)``) and its length says nothing.

>>> key = ConsumerKey.generate()
>>> blob = seal_point(np.array([0.5, -1.0]), 3, key.public, secret=bytes(32))
>>> len(blob) == sealed_size(2)
True
>>> x, y, secret = key.open_point(blob, dim=2)
>>> x.tolist(), y, secret == bytes(32)
([0.5, -1.0], 3, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from marketplace.protocols.summarize.identity import SECRET_BYTES

__all__ = ["KEY_BYTES", "ConsumerKey", "OpenedPoint", "SealingError", "seal_point", "sealed_size"]

KEY_BYTES = 32
"""Length of an X25519 public key."""

_OVERHEAD = 48  # ephemeral public key (32) + Poly1305 tag (16)


class SealingError(ValueError):
    """A sealed point that cannot be opened or does not have the expected layout."""


class OpenedPoint(NamedTuple):
    """A sealed point opened: its features, its label and its owner's point-key secret."""

    x: np.ndarray
    y: int
    secret: bytes


def sealed_size(dim: int) -> int:
    """Length in bytes of every sealed point with ``dim`` features."""
    return 8 * dim + 8 + SECRET_BYTES + _OVERHEAD


def seal_point(x: np.ndarray, y: int, public_key: bytes, *, secret: bytes) -> bytes:
    """Encrypt one point (features ``x``, label ``y``) and its owner's point-key ``secret`` so only
    the holder of ``public_key``'s private key can read them."""
    if len(public_key) != KEY_BYTES:
        raise SealingError(
            f"The 'public_key' parameter of seal_point must be {KEY_BYTES} bytes. Got {len(public_key)} bytes instead."
        )
    if len(secret) != SECRET_BYTES:
        raise SealingError(
            f"The 'secret' parameter of seal_point must be {SECRET_BYTES} bytes. Got {len(secret)} bytes instead."
        )
    plain = np.ascontiguousarray(x, dtype="<f8").tobytes() + np.int64(y).astype("<i8").tobytes() + bytes(secret)
    return SealedBox(PublicKey(bytes(public_key))).encrypt(plain)


@dataclass(frozen=True)
class ConsumerKey:
    """The consumer's key pair for one run (drawn from OS entropy; it never leaves the consumer)."""

    private: PrivateKey

    @classmethod
    def generate(cls) -> ConsumerKey:
        return cls(PrivateKey.generate())

    @property
    def public(self) -> bytes:
        return bytes(self.private.public_key)

    def open_point(self, blob: bytes, *, dim: int) -> OpenedPoint:
        """Decrypt a sealed point: (features (dim,), label, its owner's point-key secret). Raises
        SealingError if the box was not sealed to this key, was altered, or has the wrong layout."""
        if len(blob) != sealed_size(dim):
            raise SealingError(f"sealed point has {len(blob)} bytes, expected {sealed_size(dim)} for {dim} features")
        try:
            plain = SealedBox(self.private).decrypt(bytes(blob))
        except CryptoError as exc:
            raise SealingError(f"sealed point cannot be opened with this consumer's key ({exc})") from None
        x = np.frombuffer(plain[: 8 * dim], dtype="<f8").astype(np.float64)
        y = int(np.frombuffer(plain[8 * dim : 8 * dim + 8], dtype="<i8")[0])
        return OpenedPoint(x, y, bytes(plain[8 * dim + 8 :]))
