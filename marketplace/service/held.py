"""Which of an owner's sessions its agent ends because the server no longer holds the owner in them.

The server tells every owner's connection, every second, the sessions it still holds that owner in
(:class:`~marketplace.service.control.OwnerSessions`): running or collecting, the owner invited and not
lost. A session missing from the list is over for the owner, whatever ended it (its connection
missed the heartbeats during a network blip or a pause of either process and the server lost it, it
did not deliver in time, the session finished or the server started again), and the server will send
it nothing more of that session. The agent then ends its part of it as lost, so the owner's lifetime
reservation settles at once (kept if anything of the protocol left the owner, rolled back if nothing
did) instead of staying reserved, counted as spent, until the agent stops.

A list the server sent before it invited the owner cannot name the session yet: only a list the
agent received at least :data:`GRACE_S` after it joined the session ends it. Nothing here reads a
clock or a socket: :func:`sessions_to_end` takes the times as numbers (the agent's monotonic clock),
and tests/service/test_held.py tests it on a fake clock.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

GRACE_S = 2.0
"""How long after joining a session the agent waits before a list without it ends it."""


def sessions_to_end(
    joined: Mapping[str, float], held: Collection[str] | None, received_at: float, *, grace_s: float = GRACE_S
) -> list[str]:
    """The sessions of ``joined`` (session -> when this owner's agent joined it) to end as lost:
    those the server's latest list ``held`` (received at ``received_at``; None: no list yet, from this
    server or any) omits, joined at least ``grace_s`` before that list arrived. Sorted."""
    if held is None:
        return []
    return sorted(s for s, at in joined.items() if s not in held and received_at - at >= grace_s)
