"""Parameter checks shared by the stc modules, in one message format:
"The 'x' parameter of f must be ... Got ... instead." (as in :mod:`marketplace.privacy.mechanisms`).
"""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np

from marketplace.checks import fail, is_real, positive_int, positive_real  # noqa: F401 (re-exported)


def probability(value: Any, name: str, where: str) -> float:
    """A real number in the open interval (0, 1)."""
    if not is_real(value):
        raise fail(TypeError, name, where, "a real number", value)
    if not 0 < value < 1:
        raise fail(ValueError, name, where, "in the open interval (0, 1)", value)
    return float(value)


def points(value: Any, name: str, where: str, *, d: int | None = None, allow_empty: bool = False) -> np.ndarray:
    """``value`` as a finite float64 (rows, d) matrix. With ``allow_empty``, None or an empty array
    becomes a (0, d) matrix (d must then be known)."""
    if value is None and allow_empty and d is not None:
        return np.empty((0, d))
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(TypeError, name, where, "an array of real numbers", value) from None
    if allow_empty and array.size == 0 and d is not None and array.ndim <= 2:
        return np.empty((0, d))
    if array.ndim != 2 or array.shape[1] < 1 or (array.shape[0] < 1 and not allow_empty):
        raise ValueError(
            f"The '{name}' parameter of {where} must be a non-empty 2-D array (rows x d). "
            f"Got shape {array.shape} instead."
        )
    if d is not None and array.shape[1] != d:
        raise ValueError(
            f"The '{name}' parameter of {where} must have d = {d} columns (the width of the other "
            f"point sets). Got shape {array.shape} instead."
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"The '{name}' parameter of {where} must be finite. Got NaN or infinity.")
    return array


def weights(value: Any, n: int, where: str) -> np.ndarray:
    """Non-negative finite point weights of shape (n,) with a positive sum; None means all ones."""
    if value is None:
        return np.ones(n)
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(TypeError, "weights", where, "an array of real numbers", value) from None
    if array.shape != (n,):
        raise ValueError(
            f"The 'weights' parameter of {where} must have shape ({n},) (one per target point). "
            f"Got shape {array.shape} instead."
        )
    if not np.all(np.isfinite(array)) or array.min() < 0 or array.sum() <= 0:
        raise ValueError(f"The 'weights' parameter of {where} must be finite, non-negative and not all zero.")
    return array


@overload
def generator(value: Any, name: str, where: str, *, optional: Literal[False] = False) -> np.random.Generator: ...
@overload
def generator(value: Any, name: str, where: str, *, optional: bool) -> np.random.Generator | None: ...
def generator(value: Any, name: str, where: str, *, optional: bool = False) -> np.random.Generator | None:
    if value is None and optional:
        return None
    if not isinstance(value, np.random.Generator):
        raise fail(
            TypeError,
            name,
            where,
            "a numpy.random.Generator (marketplace.privacy.rng.make_rng)" + (" or None" if optional else ""),
            value,
        )
    return value


def one_budget(eps: Any, rho: Any, where: str) -> tuple[float, None] | tuple[None, float]:
    """Exactly one of eps (pure DP, Laplace noise) and rho (zCDP, Gaussian noise), checked: a
    caller that tests ``budget[0] is not None`` has the other one as a float."""
    if (eps is None) == (rho is None):
        raise ValueError(
            f"{where} needs exactly one of 'eps' (pure DP, Laplace noise) and 'rho' (zCDP, "
            f"Gaussian noise). Got eps={eps!r}, rho={rho!r} instead."
        )
    if eps is not None:
        return positive_real(eps, "eps", where), None
    return None, positive_real(rho, "rho", where)
