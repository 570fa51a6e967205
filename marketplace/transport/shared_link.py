"""One party of one session, driven over a connection that many sessions share.

A marketplace that stays up keeps one authenticated connection per party (each owner's, each
consumer's, to the server) and runs every session over those live links: a session's frames travel
inside control frames tagged with the session's id (:mod:`marketplace.service.control`). This
module is the driver of one party of one session on such a link. It is the ZeroMQ driver's loop
(:class:`~marketplace.transport.zmq_driver.SocketLoop`) given a shared-link side (:class:`SharedSide`:
an inbox and a send callback in place of a socket), so the link policy is the same one: the same
progress deadlines (a party the role waits for that does not deliver in time is dropped), the same
start and run timeouts, the same bounded send queues, quarantine of a peer that floods refused
frames, and the same counting of frames and bytes. What changes:

* **Frames in.** The process that owns the shared connection reads a control frame, checks which
  session it belongs to and who sent it (the key of the connection it came on, never a claim in
  the frame), and puts the session's frame in this loop's inbox with :meth:`SharedLinkLoop.put`;
  :meth:`SharedLinkLoop.pump` then hands every waiting frame to the node.
* **Frames out.** ``send(route, frame)`` wraps the frame for its session and sends it without
  blocking on the shared connection (raising ``zmq.Again`` when the connection's queue is full, or
  ``zmq.ZMQError(EHOSTUNREACH)`` when the peer has no connection any more), exactly what the ZeroMQ
  driver's socket would raise.
* **Liveness from the shared connection.** No heartbeat travels per session: the shared
  connection's ZMTP heartbeats (libzmq's I/O thread) close it when the peer's process stops or
  dies, and the owner of the connection tells every session on it with :meth:`SharedLinkLoop.gone`.
  The policy then loses the peer as it would on a closed socket.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from marketplace.transport.link_policy import LinkPolicy, PeerState
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.node import Node, Outgoing
from marketplace.transport.sides import Read
from marketplace.transport.zmq_driver import SocketLoop, new_link

Send = Callable[[bytes | None, bytes], None]
"""Send one frame of the session to ``route`` without blocking (raises as a ZeroMQ socket would)."""
RouteOf = Callable[[str], "bytes | None"]
"""Where frames to a party go when it has not spoken yet (None: nowhere, it is unreachable)."""


class SharedSide:
    """The side (:class:`~marketplace.transport.sides.Side`) of a session on a shared connection:
    frames come from an inbox the connection's owner fills, and leave through ``send``. A party's
    route is the connection its accepted frames came on; before it has spoken, ``route_of`` says.
    No heartbeat travels per session: the shared connection's ZMTP heartbeats keep liveness for
    every session on it, and the connection's owner reports a closed one (:meth:`SharedLinkLoop.gone`)."""

    answers_first_contact = False

    def __init__(self, inbox: deque[tuple[bytes, str, bytes]], send: Send, route_of: RouteOf, link: LinkPolicy) -> None:
        self.inbox = inbox
        self._send = send
        self._routes = route_of
        self.link = link

    def read(self) -> Read | None:
        if not self.inbox:
            return None
        return self.inbox.popleft()

    def waiting(self) -> bool:
        return bool(self.inbox)

    def send(self, route: bytes | None, frame: bytes) -> None:
        self._send(route, frame)

    def route_of(self, party: str) -> bytes | None:
        peer = self.link.peers.get(party)
        if peer is not None and peer.route is not None:
            return peer.route
        return self._routes(party)

    def fast_route(self, peer: PeerState) -> bytes | None:
        return peer.route

    def order(self, outgoing: list[Outgoing]) -> list[Outgoing]:
        return outgoing

    def heartbeat_targets(self) -> list[str]:
        return []  # the shared connection's ZMTP heartbeats keep liveness for every session on it

    def links_closed(self, now: float) -> None:
        self.link.unnamed_connection_closed()  # no monitor watches a shared connection per session

    def refusal_failure(self) -> str | None:
        return None


class SharedLinkLoop:
    """A node's driver on a shared connection (module docstring): a :class:`SocketLoop` with a
    :class:`SharedSide` and no socket of its own. ``send`` sends a frame of this session;
    ``route_of`` says where frames to a party go before that party has spoken (on the server: the
    party's control connection; on an owner's or the consumer's side, ``b""``, the one connection
    to the server)."""

    def __init__(
        self, node: Node, settings: LinkSettings, send: Send, route_of: RouteOf, connected: Iterable[str] = ()
    ) -> None:
        self.node = node
        self.settings = settings
        self.inbox: deque[tuple[bytes, str, bytes]] = deque()
        self.link = new_link(node, settings)
        self.loop = SocketLoop(
            node, SharedSide(self.inbox, send, route_of, self.link), self.link, None, own_poller=False
        )
        self.stats = self.link.stats
        self.peers = self.link.peers
        self.lost = self.link.lost
        self.backlog = self.link.queues.backlog
        self._routes = route_of
        self._connected = tuple(connected)
        self.started_at = time.monotonic()
        self.closed = False

    def begin(self) -> None:
        """Start the role; the ``connected`` parties (reached over a connection that is already up and
        authenticated: the curator, from an owner's or the consumer's side) count as arrived at once.
        Nothing else would tell: no hello travels per session, and the curator may have nothing to
        send the consumer until it publishes, which under load can take longer than
        ``start_timeout_s``. Their liveness is the shared connection's (:meth:`gone`), and what the
        role waits for from them keeps its progress deadline."""
        self.loop.begin()
        now = time.monotonic()
        for party in self._connected:
            self.link.accepted(party, self._routes(party) or b"", now)

    def tick(self, now: float, *, check_every: float | None = None) -> float:
        """Run the loop's timers that are due (:meth:`SocketLoop.tick`); returns when the next is."""
        return self.loop.tick(now, check_every=check_every)

    # --- frames in and out ------------------------------------------------------------------
    def put(self, route: bytes, party: str, frame: bytes) -> None:
        """A frame of this session from ``party`` (its identity from its connection's key), which
        came on ``route``."""
        self.inbox.append((route, party, frame))

    def pump(self) -> None:
        """Hand every waiting frame to the node (in batches, as the ZeroMQ driver reads a socket),
        then mark the inbox drained: nothing a peer sent before now is unread."""
        while self.inbox and not self.node.done:
            self.loop.read_batch()
        if not self.inbox:
            self.link.drained(time.monotonic())

    def gone(self, party: str, route: bytes | None = None) -> None:
        """``party``'s shared connection closed (or it left the marketplace): the policy loses it
        once the inbox is drained past now, as for a closed socket."""
        if route is None:
            peer = self.peers.get(party)
            route = peer.route if peer is not None else None
        self.link.connection_closed(party, time.monotonic(), route)

    def lose_now(self, party: str, reason: str) -> None:
        """Lose ``party`` at once, with ``reason`` in the report (an owner not present when the
        session started, say)."""
        self.loop.lose(party, reason)

    def close(self) -> None:
        """The session is over for this party: give frames still queued (the last ``bye``) a short
        chance to leave; the shared connection stays open for the next session."""
        if self.node.done and self.backlog:
            self.loop.flush_before_close(min(1.0, self.settings.close_linger_s))
        self.closed = True
