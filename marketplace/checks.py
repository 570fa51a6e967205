"""Parameter checks shared by the pure cores, with one message format:
"The 'x' parameter of f must be ... Got ... instead." (TypeError for a wrong type, ValueError for a
wrong value). Each protocol's ``_checks`` module adds what only it needs."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np


def describe(value: Any) -> str:
    """A short description of a value for an error message (its repr, cut, or its type)."""
    if isinstance(value, (str, bytes, numbers.Number, type(None))):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return type(value).__name__


def fail(kind: type[Exception], name: str, where: str, expected: str, value: Any) -> Exception:
    """The exception for parameter ``name`` of ``where`` (the type of a wrong type, the value of a wrong value)."""
    got = type(value).__name__ if kind is TypeError else describe(value)
    return kind(f"The '{name}' parameter of {where} must be {expected}. Got {got} instead.")


def is_real(value: Any) -> bool:
    """A real number, not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def is_int(value: Any) -> bool:
    """An integer, not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def positive_real(value: Any, name: str, where: str) -> float:
    """``value`` as a float, if it is a positive finite real number."""
    if not is_real(value):
        raise fail(TypeError, name, where, "a real number", value)
    if not (math.isfinite(value) and value > 0):
        raise fail(ValueError, name, where, "a positive finite real number", value)
    return float(value)


def positive_int(value: Any, name: str, where: str) -> int:
    """``value`` as an int, if it is an integer >= 1."""
    if not is_int(value):
        raise fail(TypeError, name, where, "an integer", value)
    if value < 1:
        raise fail(ValueError, name, where, "an integer >= 1", value)
    return int(value)


def choice(value: Any, options: tuple[str, ...], name: str, where: str) -> str:
    """``value``, if it is one of ``options``."""
    if value not in options:
        raise fail(ValueError, name, where, "one of " + ", ".join(repr(o) for o in options), value)
    return value


def generator(rng: Any, where: str) -> np.random.Generator:
    """A numpy Generator, for the randomness that is not privacy noise (coins, candidates, draws)."""
    if not isinstance(rng, np.random.Generator):
        raise fail(TypeError, "rng", where, "a numpy.random.Generator (marketplace.privacy.rng.make_rng)", rng)
    return rng


def real_matrix(
    value: Any, name: str, where: str, *, columns: int | None = None, allow_empty: bool = False
) -> np.ndarray:
    """A finite float64 2-D array (rows x columns)."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(TypeError, name, where, "an array of real numbers", value) from None
    if (
        array.ndim != 2
        or (not allow_empty and array.shape[0] == 0)
        or (columns is not None and array.shape[1] != columns)
    ):
        shape = f"(rows, {columns})" if columns is not None else "(rows, columns)"
        raise ValueError(
            f"The '{name}' parameter of {where} must be a {'' if allow_empty else 'non-empty '}2-D array "
            f"of shape {shape}. Got shape {array.shape} instead."
        )
    if not np.isfinite(array).all():
        row, col = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(
            f"The '{name}' parameter of {where} must be finite. Got {float(array[row, col])!r} at row {row}, "
            f"column {col} instead."
        )
    return array


def real_vector(value: Any, name: str, where: str, *, size: int | None = None) -> np.ndarray:
    """A finite float64 1-D array."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(TypeError, name, where, "an array of real numbers", value) from None
    if array.ndim != 1 or (size is not None and array.size != size):
        expected = f"a 1-D array of {size} values" if size is not None else "a 1-D array"
        raise ValueError(f"The '{name}' parameter of {where} must be {expected}. Got shape {array.shape} instead.")
    if not np.isfinite(array).all():
        index = int(np.argmax(~np.isfinite(array)))
        raise ValueError(
            f"The '{name}' parameter of {where} must be finite. Got {float(array[index])!r} at index {index} instead."
        )
    return array
