"""Small helpers the file-based sources share: decompression, value codes, random projection."""

from __future__ import annotations

import bz2
import gzip
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

    _Inner = gzip.GzipFile | bz2.BZ2File | io.FileIO
    """What :func:`open_bounded` reads from: a decompressing file or the file itself."""

MISSING_VALUES = frozenset({"", "?"})
"""Text values read as missing."""


def decompress(name: str, data: bytes) -> bytes:
    """Undo gzip or bzip2 compression, chosen by the file name's suffix (``.gz``, ``.bz2``)."""
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".bz2"):
        return bz2.decompress(data)
    return data


def open_bounded(path: Path, max_bytes: int, too_large: Callable[[], Exception]) -> io.BufferedReader:
    """``path`` opened for reading as a stream of bytes, decompressed as it is read when its name
    ends in ``.gz`` or ``.bz2``. Reading more than ``max_bytes`` (after decompression) raises
    ``too_large()``, so a small file that inflates without end is stopped after ``max_bytes``."""
    name = str(path)
    inner: _Inner
    if name.endswith(".gz"):
        inner = gzip.open(path, "rb")
    elif name.endswith(".bz2"):
        inner = bz2.open(path, "rb")
    else:
        inner = open(path, "rb", buffering=0)  # noqa: SIM115 - closed with the stream returned
    return io.BufferedReader(_Bounded(inner, max_bytes, too_large), buffer_size=1 << 16)


class _Bounded(io.RawIOBase):
    """A binary stream that raises ``too_large()`` once more than ``max_bytes`` were read from it."""

    def __init__(self, inner: _Inner, max_bytes: int, too_large: Callable[[], Exception]) -> None:
        self._inner, self._max_bytes, self._too_large = inner, max_bytes, too_large
        self.read_bytes = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        n = self._inner.readinto(buffer)
        self.read_bytes += n
        if self.read_bytes > self._max_bytes:
            raise self._too_large()
        return n

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


def is_number(text: str) -> bool:
    """Whether ``text`` parses as a float."""
    try:
        float(text)
    except ValueError:
        return False
    return True


def codes(values: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes 0..G-1 of the distinct values, sorted numerically when all are numbers, else as text."""
    distinct = set(values)
    key = float if all(is_number(v) for v in distinct) else str
    names = tuple(sorted(distinct, key=key))
    lookup = {name: code for code, name in enumerate(names)}
    return np.array([lookup[v] for v in values], dtype=np.int64), names


EXACT_INTEGERS = 2.0**53
"""The integers a float64 holds exactly: a label beyond them read as a number could merge with another."""


def label_codes(values: list[str]) -> np.ndarray:
    """Integer labels as they are; anything else as codes of the sorted distinct values. A label
    read as a number is kept only when it is a whole number a float64 holds exactly: ``inf`` or
    ``1e300`` would not survive the cast to int64, and two 20-digit labels could become one."""
    try:
        numbers = np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        numbers = None
    if (
        numbers is not None
        and np.all(np.abs(numbers) <= EXACT_INTEGERS)  # False for inf and nan too
        and np.all(numbers == np.round(numbers))
    ):
        return numbers.astype(np.int64)
    return codes(values)[0]


def project(X: np.ndarray, dim: int, rng: np.random.Generator) -> tuple[np.ndarray, tuple[str, ...]]:
    """Gaussian random projection of the rows to ``dim`` dimensions, seeded from ``rng`` (public
    randomness: every party building the same world draws the same projection)."""
    from sklearn.random_projection import GaussianRandomProjection

    projection = GaussianRandomProjection(n_components=dim, random_state=int(rng.integers(2**31 - 1)))
    return projection.fit_transform(X), tuple(f"proj{j}" for j in range(dim))
