"""The owners still taking part in a run, in their public order, with constant-time membership.

A curator asks "is this sender still active?" for every bid it receives, and drops an owner when
it is lost or caught cheating. With a list both are O(K), so a round of K bids costs O(K^2); at
K = 10,000 that is most of a round. A dict keeps the insertion order (the public owner order) and
answers both in O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator


class ActiveOwners:
    """An ordered set of owner ids: iteration in the order given, O(1) ``in`` and ``remove``.

    It reads like the list it replaces (``in``, ``len``, iteration, truth value, ``remove`` raising
    ``ValueError`` for an id it does not hold), so code written against a list keeps working.

    >>> active = ActiveOwners(["owner-1", "owner-2", "owner-3"])
    >>> active.remove("owner-2")
    >>> list(active), "owner-2" in active, len(active)
    (['owner-1', 'owner-3'], False, 2)
    """

    __slots__ = ("_ids",)

    def __init__(self, ids: Iterable[str]) -> None:
        self._ids: dict[str, None] = dict.fromkeys(ids)

    def __contains__(self, owner: object) -> bool:
        return owner in self._ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __bool__(self) -> bool:
        return bool(self._ids)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ActiveOwners):
            return list(self._ids) == list(other._ids)
        if isinstance(other, (list, tuple)):
            return list(self._ids) == list(other)
        return NotImplemented

    # mutable, like the list it replaces; typeshed types object.__hash__ as a method only, though the
    # data model documents None as how a class declares itself unhashable
    __hash__ = None  # type: ignore[assignment]

    def remove(self, owner: str) -> None:
        """Drop ``owner``; ``ValueError`` if it is not active (as ``list.remove``)."""
        try:
            del self._ids[owner]
        except KeyError:
            raise ValueError(f"{owner!r} is not an active owner") from None

    def __repr__(self) -> str:
        shown = list(self._ids)[:5]
        more = f", ... ({len(self._ids)} in all)" if len(self._ids) > 5 else ""
        return f"ActiveOwners({shown!r}{more})"
