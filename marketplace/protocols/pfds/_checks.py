"""Parameter checks shared by the pfds modules, with one message format.

Parameters: "The 'x' parameter of f must be ... Got ... instead." (TypeError for a wrong type,
ValueError for a wrong value). Plain (msgpack) input: :class:`MalformedPlain`, which names the path
of the bad field (``$.nodes.threshold[4]``) and what was expected there.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.checks import (  # noqa: F401 (re-exported)
    choice,
    describe,
    fail,
    generator,
    is_int,
    is_real,
    positive_real,
    real_matrix,
    real_vector,
)
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


def boolean(value: Any, name: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise fail(TypeError, name, where, "a bool", value)
    return value


def noise_generator(rng: Any, secure: Any, where: str) -> tuple[np.random.Generator, bool]:
    """The generator and mode handed on to the mechanisms (which refuse a secure generator with secure=False)."""
    secure = boolean(secure, "secure", where)
    rng = generator(rng, where)
    if isinstance(rng, SecureGenerator) and not secure:
        raise ValueError(
            f"The 'rng' parameter of {where} is a secure generator but secure=False, which would add "
            "floating-point noise that leaks its input. Pass secure=True."
        )
    return rng, secure


def count_sensitivity(neighbours: Any, where: str) -> float:
    """L1 sensitivity of a vector of disjoint counts: 1 when a row is added or removed, 2 when replaced."""
    return 1.0 if choice(neighbours, NEIGHBOURS, "neighbours", where) == "add_remove" else 2.0
