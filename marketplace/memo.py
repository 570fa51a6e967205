"""What was computed from some read-only objects, kept by those objects' identities.

A served marketplace builds session after session from the same parsed request: the sessions share
their configuration's sections and plain values, so what is computed from them (a digest, a text, a
key) need not be computed again. Such objects are neither hashable nor cheap to compare, so they are
recognised by identity. A memo keeps the objects themselves with the value, so that their ids are not
reused by other objects while kept; the objects must not change once a value is computed from them
(configurations and a scenario's plain form are read only, as every cache of them assumes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class IdentityMemo(Generic[V]):
    """``compute()`` per tuple of objects, recognised by identity, for the last ``size`` tuples (all
    forgotten at once when full: the values are few and cheap to make again)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: dict[tuple[int, ...], tuple[tuple[object, ...], V]] = {}

    def get(self, objects: tuple[object, ...], compute: Callable[[], V]) -> V:
        """The value kept for exactly these objects, or ``compute()``'s, then kept."""
        key = tuple(map(id, objects))
        kept = self._kept.get(key)
        if kept is not None and all(a is b for a, b in zip(kept[0], objects, strict=True)):
            return kept[1]
        value = compute()
        if len(self._kept) >= self.size:
            self._kept.clear()
        self._kept[key] = (objects, value)
        return value
