"""The accountant's parameter checks, with one message format: "The 'x' parameter of f must be ...
Got ... instead." (TypeError for a wrong type, ValueError for a wrong value). The composition
theorems, a ledger's steps and the ledger itself check their arguments with these, so a wrong eps
reads the same wherever it is given."""

from __future__ import annotations

import math
import numbers
from typing import Any


def fail(kind: type[Exception], name: str, where: str, expected: str, value: Any) -> Exception:
    """The exception for parameter ``name`` of ``where`` (with the type too, for a wrong type)."""
    got = f"{value!r} ({type(value).__name__})" if kind is TypeError else repr(value)
    return kind(f"The {name!r} parameter of {where} must be {expected}. Got {got} instead.")


def real(value: Any, name: str, where: str) -> float:
    """``value`` as a float, if it is a real number (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise fail(TypeError, name, where, "a real number", value)
    return float(value)


def positive(value: Any, name: str, where: str) -> float:
    """``value`` as a float, if it is a finite number > 0."""
    x = real(value, name, where)
    if not (math.isfinite(x) and x > 0):
        raise fail(ValueError, name, where, "a finite number > 0", value)
    return x


def nonnegative(value: Any, name: str, where: str) -> float:
    """``value`` as a float, if it is a finite number >= 0."""
    x = real(value, name, where)
    if not (math.isfinite(x) and x >= 0):
        raise fail(ValueError, name, where, "a finite number >= 0", value)
    return x


def probability(value: Any, name: str, where: str, *, positive: bool = False) -> float:
    """``value`` as a float, if it is in [0, 1) (in (0, 1) when ``positive``): a delta."""
    x = real(value, name, where)
    ok = (0 < x < 1) if positive else (0 <= x < 1)
    if not ok:
        raise fail(ValueError, name, where, "in (0, 1)" if positive else "in [0, 1)", value)
    return x


def nonnegative_int(value: Any, name: str, where: str) -> int:
    """``value`` as an int, if it is an integer >= 0 (not a bool): a count of steps."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise fail(TypeError, name, where, "an integer", value)
    if value < 0:
        raise fail(ValueError, name, where, "an integer >= 0", value)
    return int(value)


def one_of(value: Any, options: tuple[str, ...], name: str, where: str) -> str:
    """``value``, if it is one of ``options``."""
    if value not in options:
        raise fail(ValueError, name, where, f"one of {list(options)}", value)
    return value
