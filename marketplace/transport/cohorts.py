"""Batches of frames for the parties of one process, prepared together by their roles' cohorts.

A driver holding many parties (the in-process driver, an owner host) collects the frames it is
about to deliver, lets :func:`prepare` decode each for its node (:meth:`Node.peek
<marketplace.transport.node.Node.peek>`) and hand the decoded messages of each cohort
(:mod:`marketplace.roles.cohort`) to it at once, then delivers every frame as before, each to its
own node, with the envelope already decoded. The frames of a broadcast share their body's bytes:
that body is decoded and checked once, each frame's own head apart. What each party receives, answers, counts and sends
is what it would have without the batch; only the roles' shared work is done once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from marketplace.messages import Envelope, encode_body
from marketplace.roles import Role
from marketplace.roles.cohort import Cohort, cohorts_of
from marketplace.transport.node import Node


class Cohorts:
    """The cohorts of a driver's nodes, found once (:func:`~marketplace.roles.cohort.cohorts_of`)."""

    def __init__(self, nodes: Sequence[Node]) -> None:
        self.of_role = cohorts_of([node.role for node in nodes])

    def __bool__(self) -> bool:
        return bool(self.of_role)

    def prepare(self, batch: Sequence[tuple[Node, bytes | memoryview, str | None]]) -> list[Envelope[Any] | None]:
        """Each frame of ``batch`` (node, frame, transport identity of its sender) decoded for its
        node (None: not in a cohort, or refused: :meth:`Node.receive` decodes it and says why), its
        cohorts prepared for theirs."""
        decoded: list[Envelope[Any] | None] = []
        groups: dict[int, tuple[Cohort, list[tuple[Role, Envelope[Any]]]]] = {}
        like: tuple[Envelope[Any], bytes] | None = None  # the last body decoded in full, and its bytes
        for node, frame, peer in batch:
            cohort = self.of_role.get(id(node.role))
            if cohort is None:
                decoded.append(None)
                continue
            message = node.peek(frame, peer, like)
            decoded.append(message)
            if message is None:
                continue
            if like is None or message.body is not like[0].body:
                like = (message, encode_body(message.body))
            groups.setdefault(id(cohort), (cohort, []))[1].append((node.role, message))
        for cohort, deliveries in groups.values():
            if len(deliveries) > 1:
                cohort.prepare(deliveries)
        return decoded
