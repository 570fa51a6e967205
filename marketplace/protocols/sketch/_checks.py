"""Parameter checks shared by the sketch modules, in the codebase's one error format:
"The 'x' parameter of f must be ... Got ... instead." (TypeError for a wrong type, ValueError for
a wrong value)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from marketplace.checks import is_real

PRECISIONS = ("float64", "float32")


def check_positive(owner: str, name: str, value: Any) -> float:
    if not is_real(value):
        raise TypeError(f"The '{name}' parameter of {owner} must be a real number. Got {type(value).__name__} instead.")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(
            f"The '{name}' parameter of {owner} must be a positive finite real number. Got {value!r} instead."
        )
    return float(value)


def check_int(owner: str, name: str, value: Any, *, minimum: int = 1) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"The '{name}' parameter of {owner} must be an int. Got {type(value).__name__} instead.")
    if value < minimum:
        raise ValueError(f"The '{name}' parameter of {owner} must be an int >= {minimum}. Got {value!r} instead.")
    return int(value)


def check_fraction(owner: str, name: str, value: Any) -> float:
    if not is_real(value):
        raise TypeError(f"The '{name}' parameter of {owner} must be a real number. Got {type(value).__name__} instead.")
    if not 0 < value < 1:
        raise ValueError(
            f"The '{name}' parameter of {owner} must be in the open interval (0, 1). Got {value!r} instead."
        )
    return float(value)


def check_choice(owner: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"The '{name}' parameter of {owner} must be one of {options}. Got {value!r} instead.")
    return value


def check_precision(owner: str, precision: Any) -> str:
    return check_choice(owner, "precision", precision, PRECISIONS)


def check_generator(owner: str, rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"The 'rng' parameter of {owner} must be a numpy.random.Generator "
            f"(marketplace.privacy.rng.make_rng). Got {type(rng).__name__} instead."
        )
    return rng


def as_finite_array(owner: str, name: str, value: Any, *, ndim: int | None = None) -> np.ndarray:
    """A float64 copy-free view of ``value`` when possible, checked finite (and of ``ndim`` dims)."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(
            f"The '{name}' parameter of {owner} must be an array of real numbers. Got {type(value).__name__} instead."
        ) from None
    if ndim is not None and array.ndim != ndim:
        raise ValueError(
            f"The '{name}' parameter of {owner} must be a {ndim}-D array. Got shape {array.shape} instead."
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"The '{name}' parameter of {owner} must be finite. Got NaN or infinity instead.")
    return array
