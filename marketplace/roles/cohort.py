"""Roles of one process that answer a broadcast together: a *cohort*.

A driver that runs many parties in one process (the in-process driver, an owner host) often hands
the same broadcast to each of them in a row: every owner gets the round's ``round_open``. Each
party still decodes, checks and answers its own message (its identity, message ids, replay guard
and keys stay its own), but a role class may name a :class:`Cohort`, built once over all the roles
of that class in the process, which sees the batch of their decoded messages first and prepares
what is shared (one matrix product for every owner's bid, say). Preparing must never change what
any role answers: only how fast it gets there. Nothing one role holds is handed to another; a
cohort reads each role's state to compute that role's own answer, and gives it back to that role.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from marketplace.messages import Envelope

if TYPE_CHECKING:
    from marketplace.roles import Role


class Cohort(ABC):
    """The roles of one class in one process, prepared together for the messages they receive at once."""

    @abstractmethod
    def __init__(self, roles: Sequence[Role]) -> None:
        """Built once, over every role of its class in the process, before any message."""

    @abstractmethod
    def prepare(self, deliveries: Sequence[tuple[Role, Envelope]]) -> None:
        """About to hand each role its message (decoded and checked, in this order): precompute
        what the roles' :meth:`Role.handle` would compute one by one. Roles not of this cohort, and
        messages it has nothing to prepare for, are ignored."""


def cohorts_of(roles: Sequence[Role]) -> dict[int, Cohort]:
    """Each role (by ``id``) that belongs to a cohort of two or more, to its cohort: one cohort per
    role class with a :attr:`Role.cohort` factory, over every role of that class in ``roles``."""
    by_class: dict[type[Role], list[Role]] = {}
    for role in roles:
        if type(role).cohort is not None:
            by_class.setdefault(type(role), []).append(role)
    found: dict[int, Cohort] = {}
    for cls, members in by_class.items():
        if len(members) < 2:
            continue
        make = cls.cohort
        if make is None:
            continue
        cohort = make(members)
        for role in members:
            found[id(role)] = cohort
    return found
