"""Quarantine of connections that flood a party with refused frames, as a pure state machine.

A connection that sends more than ``refusal_budget`` refused frames (frames the node did not
accept, or with the wrong framing) within one second has its frames dropped unread for
``quarantine_s``: a flood of junk then costs a read, not a decode. Records are kept per
connection (its route), not per party, so that a second connection holding a party's key cannot
get that party's own connection quarantined. Time is passed in; nothing here reads a clock or
touches a socket.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from marketplace.messages.errors import cut

WINDOW_S = 1.0
"""The window refusals are counted in: more than the budget within it starts a quarantine."""


@dataclass
class ConnectionState:
    """One connection: its name (the party it spoke as, or a stranger's label), its refusals in
    the current window, and until when its frames are dropped unread."""

    name: str
    window_start: float = 0.0
    window_refusals: int = 0
    quarantine_until: float = 0.0


class Quarantine:
    """The connections heard from (the ``max_connections`` most recently heard; older records are
    forgotten first) and their refusal windows.

    ``dropped`` counts, per connection name, the frames dropped unread while it was quarantined
    (it is the driver's ``stats.quarantined``, when the driver passes that dict in)."""

    def __init__(
        self, refusal_budget: int, quarantine_s: float, max_connections: int, dropped: dict[str, int] | None = None
    ) -> None:
        self.refusal_budget = refusal_budget
        self.quarantine_s = quarantine_s
        self.max_connections = max_connections
        self.connections: OrderedDict[bytes, ConnectionState] = OrderedDict()  # by route, most recent last
        self.dropped: dict[str, int] = {} if dropped is None else dropped

    def admit(self, route: bytes, party: str | None, now: float) -> ConnectionState | None:
        """A frame came on connection ``route`` at ``now``: the connection's record (made on its first
        frame, named after ``party``, or as an unidentified connection when its identity is
        unknown), or None when the frame is dropped unread (counted in ``dropped``) because the
        connection is quarantined. One call per frame read: under a flood this is most of the cost."""
        connections = self.connections
        conn = connections.get(route)
        if conn is None:
            label = party if party is not None else f"unidentified connection {route!r:.24}"
            conn = connections[route] = ConnectionState(cut(label, 64))
            while len(connections) > self.max_connections:
                connections.popitem(last=False)
        else:
            connections.move_to_end(route)
        if conn.quarantine_until > now:
            self.dropped[conn.name] = self.dropped.get(conn.name, 0) + 1
            return None
        return conn

    def refused(self, conn: ConnectionState, now: float) -> bool:
        """A frame that came on ``conn`` at ``now`` was refused; True when this refusal puts the
        connection in quarantine (from ``now`` for ``quarantine_s``)."""
        if now - conn.window_start > WINDOW_S:
            conn.window_start, conn.window_refusals = now, 0
        conn.window_refusals += 1
        if conn.window_refusals > self.refusal_budget and conn.quarantine_until <= now:
            conn.quarantine_until = now + self.quarantine_s
            return True
        return False
