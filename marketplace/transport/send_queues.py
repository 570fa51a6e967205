"""Bounded per-peer send queues, as a pure state machine.

Sends never block: a frame a peer is not reading waits in that peer's own queue, behind any frame
already waiting for it, so that one slow reader holds up no one else. A queue longer than
``max_frames``, or one whose first frame has not left for ``send_timeout_s``, is a reason to drop
that peer. The driver tries the sends and reports what happened; time is passed in, and nothing
here touches a socket or reads a clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Waiting:
    """The frames waiting for one peer, oldest first, and since when its first one has not left."""

    party: str
    stuck_since: float
    frames: deque[Any] = field(default_factory=deque)


class SendQueues:
    """The peers with frames waiting (``backlog``, so a flush costs O(waiting peers), not O(peers))."""

    def __init__(self, max_frames: int, send_timeout_s: float) -> None:
        self.max_frames = max_frames
        self.send_timeout_s = send_timeout_s
        self.backlog: dict[str, Waiting] = {}

    def holds(self, party: str) -> bool:
        """Whether frames wait for ``party`` (then a new frame to it goes behind them)."""
        return party in self.backlog

    def push(self, party: str, frame: Any, now: float) -> str | None:
        """Queue ``frame`` for ``party`` at ``now``; returns the reason to drop ``party`` instead,
        when its queue is already full."""
        waiting = self.backlog.get(party)
        if len(waiting.frames if waiting is not None else ()) >= self.max_frames:
            return f"more than {self.max_frames} frames waiting to be read"
        if waiting is None:
            waiting = self.backlog[party] = Waiting(party, now)
        waiting.frames.append(frame)
        return None

    def waiting(self) -> list[Waiting]:
        """The queues with frames, in the order they filled (a copy: a flush may change them)."""
        return list(self.backlog.values())

    def sent(self, waiting: Waiting, now: float) -> None:
        """The first frame of ``waiting`` left at ``now`` (or was found undeliverable, and its
        party dropped meanwhile): the next one is stuck from now on."""
        if waiting.frames:
            waiting.frames.popleft()
        if waiting.frames:
            waiting.stuck_since = now
        elif self.backlog.get(waiting.party) is waiting:
            del self.backlog[waiting.party]

    def blocked(self, waiting: Waiting, now: float) -> str | None:
        """The first frame of ``waiting`` could not leave at ``now``: the reason to drop its peer,
        when it has been stuck longer than ``send_timeout_s``; None to try again later."""
        if now - waiting.stuck_since > self.send_timeout_s:
            return f"did not read for send_timeout_s={self.send_timeout_s:g} ({len(waiting.frames)} frames waiting)"
        return None

    def drop(self, party: str) -> None:
        """Forget every frame waiting for ``party`` (it is lost)."""
        waiting = self.backlog.pop(party, None)
        if waiting is not None:
            waiting.frames.clear()
