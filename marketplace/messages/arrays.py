"""numpy arrays on the wire: a map of dtype, shape and raw little-endian bytes.

A plain ``msgpack.unpackb`` reads it as ``{"dtype": "<f8", "shape": [2, 3], "data": b"..."}``.
Only an allowlist of plain numeric dtypes travels (never object arrays, which could carry code),
and the byte length must equal ``prod(shape) * itemsize`` exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from marketplace.schema import SchemaError, describe_value

ALLOWED_DTYPES: dict[str, np.dtype] = {
    np.dtype(name).str: np.dtype(name) for name in ("<f8", "<f4", "<i8", "<i4", "|u1", "|b1")
}
MAX_NDIM = 4


def encode_array(array: np.ndarray) -> dict[str, Any]:
    """The wire form of ``array`` (converted to little-endian; dtype must be allowed)."""
    arr = np.asarray(array)
    dtype = arr.dtype.newbyteorder("<") if arr.dtype.byteorder == ">" else arr.dtype
    if dtype.str not in ALLOWED_DTYPES:
        raise TypeError(f"dtype {arr.dtype} cannot travel; allowed: {sorted(ALLOWED_DTYPES)}")
    arr = np.ascontiguousarray(arr, dtype=dtype)
    return {"dtype": dtype.str, "shape": list(arr.shape), "data": arr.tobytes()}


class Array:
    """Type-hint marker for a numpy array field; building it decodes and checks the wire map."""

    @classmethod
    def __schema_build__(cls, value: Any, path: str) -> np.ndarray:
        if isinstance(value, np.ndarray):  # already decoded (building a body in-process)
            return value
        if not isinstance(value, dict) or set(value) != {"dtype", "shape", "data"}:
            raise SchemaError(path, "an array map with keys dtype, shape, data", describe_value(value))
        dtype, shape, data = value["dtype"], value["shape"], value["data"]
        if not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
            raise SchemaError(f"{path}.dtype", f"one of {sorted(ALLOWED_DTYPES)}", describe_value(dtype))
        if (
            not isinstance(shape, (list, tuple))
            or len(shape) > MAX_NDIM
            or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
        ):
            raise SchemaError(
                f"{path}.shape", f"a list of at most {MAX_NDIM} non-negative integers", describe_value(shape)
            )
        if not isinstance(data, (bytes, bytearray)):
            raise SchemaError(f"{path}.data", "bytes", describe_value(data))
        expected = math.prod(shape) * ALLOWED_DTYPES[dtype].itemsize
        if len(data) != expected:
            raise SchemaError(
                f"{path}.data", f"{expected} bytes for shape {list(shape)} of {dtype}", f"{len(data)} bytes"
            )
        try:
            return np.frombuffer(data, dtype=ALLOWED_DTYPES[dtype]).reshape(shape)
        except (ValueError, OverflowError):  # e.g. [0, 2**63]: zero bytes, but too big for numpy
            raise SchemaError(f"{path}.shape", "a shape numpy can hold", describe_value(shape)) from None


@dataclass(frozen=True)
class ArraySpec:
    """What an array field may hold: dtypes, a shape whose entries are ints (fixed), names
    (must agree across the fields of one message) or None (free), and whether NaN/inf may appear."""

    dtypes: tuple[str, ...]
    shape: tuple[int | str | None, ...]
    finite: bool = True
    _allowed: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """``dtypes`` in numpy's spelling (``float64`` is ``<f8``), worked out once."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allowed", tuple(np.dtype(d).str for d in self.dtypes))

    def check(self, value: np.ndarray, path: str) -> None:
        allowed = list(self._allowed)
        if value.dtype.str not in allowed:
            raise SchemaError(f"{path}.dtype", f"one of {allowed}", repr(value.dtype.str))
        if value.ndim != len(self.shape):
            raise SchemaError(
                f"{path}.shape", f"{len(self.shape)} dimensions {list(self.shape)}", str(list(value.shape))
            )
        for axis, (want, got) in enumerate(zip(self.shape, value.shape)):
            if isinstance(want, int) and want != got:
                raise SchemaError(
                    f"{path}.shape", f"size {want} on axis {axis} of {list(self.shape)}", str(list(value.shape))
                )
        if self.finite and value.dtype.kind == "f" and value.size and not np.isfinite(value).all():
            bad = int(np.flatnonzero(~np.isfinite(value.ravel()))[0])
            raise SchemaError(path, "finite values only", f"{value.ravel()[bad]} at flat index {bad}")

    def bind(self, value: np.ndarray, path: str, sizes: dict[str, tuple[int, str]]) -> None:
        """Check named dimensions against those already seen in the same message."""
        for axis, want in enumerate(self.shape):
            if isinstance(want, str):
                got = value.shape[axis]
                if want in sizes and sizes[want][0] != got:
                    size, where = sizes[want]
                    raise SchemaError(
                        f"{path}.shape", f"{want} = {size} on axis {axis} (as in {where})", str(list(value.shape))
                    )
                sizes.setdefault(want, (got, path))
