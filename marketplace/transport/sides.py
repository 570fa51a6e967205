"""The socket sides of the ZeroMQ driver's loop: what differs between the curator's ROUTER and a
party's DEALER (and, in :mod:`marketplace.transport.shared_link`, a session on a shared connection).

The loop (:class:`~marketplace.transport.zmq_driver.SocketLoop`) is one class: it reads a batch,
hands each frame to the node, sends what the node answers, flushes the send queues and ticks the
link policy. It is given a side (:class:`Side`), which says how frames are read and framed, where
frames to a party go, whom to send heartbeats to, and what a closed connection means:

* **Router** (the curator): a frame's sender comes from its connection (the key's party id under
  CURVE, the routing id in plaintext); a party's route is the connection its accepted frames came
  on, learnt at its first contact, which the curator answers at once; every connected peer gets
  heartbeats; a closed connection names nobody, so the next heartbeat round probes every peer.
* **Dealer** (an owner or the consumer): one connection, to the curator: one route, heartbeats to
  the curator only, and a closed connection is the curator's.

The choices that need no socket are plain functions of numbers and names (:func:`identity_route`,
:func:`curator_targets`, :func:`curator_of_another_run`), tested without one.
"""

from __future__ import annotations

import errno
import time
from collections.abc import Collection, Mapping
from typing import Protocol

import zmq

from marketplace.messages.limits import SCAN_ABOVE
from marketplace.roles import CURATOR
from marketplace.transport.link_policy import LinkPolicy, PeerState
from marketplace.transport.node import Node, Outgoing
from marketplace.transport.sockets import EVENTS, NOBLOCK, NOBLOCK_MORE, POLLIN, RAW_SEND, RCVMORE, int_option
from marketplace.transport.tuning import spread_receivers

Read = tuple[bytes, str | None, bytes | memoryview | None]
"""One message read: (route, party, frame). Party None when its identity is unknown; frame None for
a message with the wrong framing; a large frame may be read in place (a memoryview)."""


class Side(Protocol):
    """How one loop's frames are read, sent and routed, and whom it sends heartbeats to."""

    answers_first_contact: bool
    """Whether a party's first accepted frame is answered at once with a heartbeat (the curator's
    side: so a party hears from it even if the curator then hangs before its next heartbeat tick)."""

    def read(self) -> Read | None:
        """One waiting message (:data:`Read`); None when nothing is waiting."""

    def waiting(self) -> bool:
        """Whether a message is waiting to be read (asked between the frames of a batch)."""

    def send(self, route: bytes | None, frame: bytes) -> None:
        """Send one frame without blocking: raises ``zmq.Again`` when it would block, and
        ``zmq.ZMQError(EHOSTUNREACH)`` when ``route`` leads nowhere."""

    def route_of(self, party: str) -> bytes | None:
        """Where frames to ``party`` go (None: nowhere known)."""

    def fast_route(self, peer: PeerState) -> bytes | None:
        """Where frames to a known ``peer`` go without a second look (None: take the careful path)."""

    def order(self, outgoing: list[Outgoing]) -> list[Outgoing]:
        """The order in which a batch of frames leaves."""

    def heartbeat_targets(self) -> list[str]:
        """The parties to consider for the next heartbeat round."""

    def links_closed(self, now: float) -> None:
        """The socket's monitor saw a connection close at ``now``: tell the link policy."""

    def refusal_failure(self) -> str | None:
        """After the node refused a frame: why the whole run fails because of it, or None."""


# --- choices without a socket ---------------------------------------------------------------------
def identity_route(peer: PeerState | None, party: str, *, curve: bool) -> bytes | None:
    """Where the curator sends frames to ``party``: the connection its accepted frames came on;
    before it has one, in plaintext, the routing id a DEALER sets, its party id; under CURVE
    nowhere (the ROUTER picks a fresh routing id per connection)."""
    if peer is not None and peer.route is not None:
        return peer.route
    return None if curve else party.encode()


def curator_targets(lost: Collection[str]) -> list[str]:
    """A party's heartbeat targets: the curator, its only peer, until it is lost."""
    return [] if CURATOR in lost else [CURATOR]


def curator_of_another_run(foreign_run: Mapping[str, str], curator: PeerState | None, run_id: str) -> str | None:
    """Why a party's run fails when the curator, never heard from in this run, sent a frame of
    another run (``foreign_run``: party -> the run id its refused frames carried): nothing it sends
    will ever be accepted here. None otherwise."""
    theirs = foreign_run.get(CURATOR)
    if theirs is None or (curator is not None and curator.heard is not None):
        return None
    return (
        f"the curator runs another run: its run id is {theirs!r}, ours {run_id!r} (another seed, scenario or --run-id?)"
    )


# --- the sides ------------------------------------------------------------------------------------
class RouterSide:
    """The curator's ROUTER. Under CURVE a frame's sender is the party its key belongs to (User-Id);
    in plaintext mode, the DEALER's routing id, which is its party id (when it names a party of the run)."""

    answers_first_contact = True

    def __init__(self, sock: zmq.Socket, node: Node, link: LinkPolicy, *, curve: bool) -> None:
        self.sock = sock
        self.node = node
        self.link = link
        self.stats = link.stats
        self.curve = curve

    def read(self) -> Read | None:
        t0 = time.perf_counter()
        try:
            route = self.sock.recv(NOBLOCK)
        except zmq.Again:
            self.stats.io_s += time.perf_counter() - t0
            return None
        # the rest of this message: a ROUTER gives it whole, its routing id and at least one frame,
        # so the frames themselves say whether more follow (no ZMQ_RCVMORE query per frame)
        parts = [self.sock.recv(NOBLOCK, copy=False)]
        while parts[-1].more:
            parts.append(self.sock.recv(NOBLOCK, copy=False))
        self.stats.io_s += time.perf_counter() - t0
        last = parts[-1] if parts else None
        if self.curve:
            user = last.get("User-Id") if last is not None else None
            party = user if isinstance(user, str) and user else None  # the ZAP handler's party id, a str
        else:
            party = route.decode("utf-8", errors="replace") if route and not route.startswith(b"\x00") else None
            if party is not None and self.node.parties is not None and party not in self.node.parties:
                party = None  # a name that is no party of the run: an unidentified connection
        if len(parts) != 1:
            self.node.counters.record_rejected("bad_framing")
            return route, party, None
        body = parts[0]
        # a large frame is read in place (no copy): a hostile one then costs its own size once
        return route, party, (body.buffer if len(body) > SCAN_ABOVE else body.bytes)

    def waiting(self) -> bool:
        return bool(int_option(self.sock, EVENTS) & POLLIN)

    def send(self, route: bytes | None, frame: bytes) -> None:
        if route is None:
            raise zmq.ZMQError(errno.EHOSTUNREACH)
        RAW_SEND(self.sock, route, NOBLOCK_MORE)
        RAW_SEND(self.sock, frame, NOBLOCK)

    def route_of(self, party: str) -> bytes | None:
        return identity_route(self.link.peers.get(party), party, curve=self.curve)

    def fast_route(self, peer: PeerState) -> bytes | None:
        return peer.route

    def order(self, outgoing: list[Outgoing]) -> list[Outgoing]:
        """A broadcast (a round opened to every owner) leaves in :func:`~.tuning.spread_order`: owners that
        share an owner host are usually numbered in one block, and sent block by block the last host would start
        its round only once every other host's frames had left."""
        return spread_receivers(outgoing)

    def heartbeat_targets(self) -> list[str]:
        """Every connected peer, neither lost nor finished."""
        return self.link.open_peers(self.node.finished_peers)

    def links_closed(self, now: float) -> None:
        """A ROUTER cannot tell whose connection closed: its next heartbeat round (at its usual time,
        so that strangers opening and closing connections cannot make it send more often) goes to
        every connected peer, and the closed route answers ``EHOSTUNREACH``."""
        self.link.unnamed_connection_closed()

    def refusal_failure(self) -> str | None:
        return None  # a refused frame fails one party's step at most, never the curator's run


class DealerSide:
    """An owner's or the consumer's DEALER: one connection, to the curator, on route ``b""``."""

    answers_first_contact = False

    def __init__(self, sock: zmq.Socket, node: Node, link: LinkPolicy) -> None:
        self.sock = sock
        self.node = node
        self.link = link
        self.stats = link.stats

    def read(self) -> Read | None:
        t0 = time.perf_counter()
        try:
            parts = [self.sock.recv(NOBLOCK)]
        except zmq.Again:
            return None
        finally:
            self.stats.io_s += time.perf_counter() - t0
        while self.sock.get(RCVMORE):
            parts.append(self.sock.recv(NOBLOCK))
        if len(parts) != 1:
            self.node.counters.record_rejected("bad_framing")
            return b"", CURATOR, None
        return b"", CURATOR, parts[0]

    def waiting(self) -> bool:
        return bool(int_option(self.sock, EVENTS) & POLLIN)

    def send(self, route: bytes | None, frame: bytes) -> None:
        RAW_SEND(self.sock, frame, NOBLOCK)

    def route_of(self, party: str) -> bytes | None:
        return b""

    def fast_route(self, peer: PeerState) -> bytes | None:
        return b""

    def order(self, outgoing: list[Outgoing]) -> list[Outgoing]:
        return outgoing

    def heartbeat_targets(self) -> list[str]:
        return curator_targets(self.link.lost)

    def links_closed(self, now: float) -> None:
        self.link.connection_closed(CURATOR, now, b"")  # its only connection; every frame comes on route b""

    def refusal_failure(self) -> str | None:
        """The curator speaks for another run (:func:`curator_of_another_run`). Asked after each
        refused frame, the only kind that tells of another run."""
        return curator_of_another_run(self.node.foreign_run, self.link.peers.get(CURATOR), self.node.run_id)
