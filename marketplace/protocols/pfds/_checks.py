"""Parameter checks shared by the pfds modules, with one message format.

Parameters: "The 'x' parameter of f must be ... Got ... instead." (TypeError for a wrong type,
ValueError for a wrong value). Plain (msgpack) input: :class:`MalformedPlain`, which names the path
of the bad field (``$.nodes.threshold[4]``) and what was expected there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.checks import describe, fail, is_int, is_real, positive_real  # noqa: F401 (re-exported)
from marketplace.privacy.rng import SecureGenerator

NEIGHBOURS = ("add_remove", "replace")
"""Neighbouring relations: one row added or removed (the paper's), or one row replaced."""


class MalformedPlain(ValueError):
    """A plain (msgpack-ready) description that cannot be read back: ``path`` names the bad field."""

    def __init__(self, path: str, expected: str, got: Any) -> None:
        self.path, self.expected = path, expected
        super().__init__(f"Malformed plain input at {path}: expected {expected}. Got {describe(got)} instead.")


def int_at_least(value: Any, minimum: int, name: str, where: str) -> int:
    if not is_int(value):
        raise fail(TypeError, name, where, "an integer", value)
    if value < minimum:
        raise fail(ValueError, name, where, f"an integer >= {minimum}", value)
    return int(value)


def choice(value: Any, options: tuple[str, ...], name: str, where: str) -> str:
    if value not in options:
        raise fail(ValueError, name, where, "one of " + ", ".join(repr(o) for o in options), value)
    return value


def boolean(value: Any, name: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise fail(TypeError, name, where, "a bool", value)
    return value


def generator(rng: Any, where: str) -> np.random.Generator:
    """A numpy Generator, for the randomness that is not privacy noise (coins, candidates, draws)."""
    if not isinstance(rng, np.random.Generator):
        raise fail(TypeError, "rng", where, "a numpy.random.Generator (marketplace.privacy.rng.make_rng)", rng)
    return rng


def noise_generator(rng: Any, secure: Any, where: str) -> tuple[np.random.Generator, bool]:
    """The generator and mode handed on to the mechanisms (which refuse a secure generator with secure=False)."""
    secure = boolean(secure, "secure", where)
    rng = generator(rng, where)
    if isinstance(rng, SecureGenerator) and not secure:
        raise ValueError(f"The 'rng' parameter of {where} is a secure generator but secure=False, which would add "
                         "floating-point noise that leaks its input. Pass secure=True.")
    return rng, secure


def count_sensitivity(neighbours: Any, where: str) -> float:
    """L1 sensitivity of a vector of disjoint counts: 1 when a row is added or removed, 2 when replaced."""
    return 1.0 if choice(neighbours, NEIGHBOURS, "neighbours", where) == "add_remove" else 2.0


def real_matrix(value: Any, name: str, where: str, *, columns: int | None = None, allow_empty: bool = False) -> np.ndarray:
    """A finite float64 2-D array (rows x columns)."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(TypeError, name, where, "an array of real numbers", value) from None
    if array.ndim != 2 or (not allow_empty and array.shape[0] == 0) or (columns is not None and array.shape[1] != columns):
        shape = f"(rows, {columns})" if columns is not None else "(rows, columns)"
        raise ValueError(f"The '{name}' parameter of {where} must be a {'' if allow_empty else 'non-empty '}2-D array "
                         f"of shape {shape}. Got shape {array.shape} instead.")
    if not np.isfinite(array).all():
        row, col = np.argwhere(~np.isfinite(array))[0]
        raise ValueError(f"The '{name}' parameter of {where} must be finite. Got {float(array[row, col])!r} at row {row}, "
                         f"column {col} instead.")
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
        raise ValueError(f"The '{name}' parameter of {where} must be finite. Got {float(array[index])!r} at index {index} instead.")
    return array
