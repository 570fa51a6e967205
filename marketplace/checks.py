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
