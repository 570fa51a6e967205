"""What a socket's connections did, read from ZeroMQ's socket monitor, told apart and logged once.

ZeroMQ reports connection events (accepted, handshake succeeded or failed, disconnected) but no
party ids, and for most of them no peer address. :class:`ConnectionWatch` turns that stream into
what an operator needs to know, and nothing more:

* **A healthy run logs no warning.** A connection that closes before its handshake is a TCP probe
  (a container healthcheck, ``marketplace probe``) and is logged at debug level. A dropped
  connection is expected once a party said ``bye`` or was declared lost; only drops that nothing
  explains (a frame over ``max_message_bytes``, which ZeroMQ answers by closing the connection, or
  a peer that vanished) are warnings, once the run has had a moment to deliver the ``bye`` that may
  explain them.
* **A refused CURVE handshake is reported within seconds, on both sides.** The curator's ZAP
  handler names the address that offered an unknown key (:class:`~marketplace.transport.curve.
  PartyAuthenticator`); a handshake the curator could not even decrypt (the peer holds another
  curator's public key) is logged here. On the connecting side, a refusal ends the party at once
  with a reason that says to check its keys folder: retrying cannot succeed, and waiting for
  ``start_timeout_s`` would only hide why.

The watch is sans-I/O apart from logging: feed it ``(event, value)`` pairs; the driver owns the
monitor socket (:func:`open_monitor`) and the clock.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import zmq
from zmq.utils.monitor import recv_monitor_message

from marketplace.transport.sockets import int_option

log = logging.getLogger("marketplace.transport.zmq_driver")

WATCHED = (
    zmq.EVENT_ACCEPTED
    | zmq.EVENT_CONNECTED
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
)
FAILED_HANDSHAKE = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
    zmq.EVENT_HANDSHAKE_FAILED_AUTH,
)
CRYPTOGRAPHIC = getattr(zmq, "PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC", 0x11000001)
MECHANISM_MISMATCH = getattr(zmq, "PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH", 0x11000003)
CLIENT_GIVES_UP_AFTER = 3
"""Consecutive failed handshakes (none succeeding in between) after which a connecting party stops:
a curator that cannot decrypt our hello will never be able to."""
EVENTS, POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
DROP_GRACE_S = 1.0
"""How long an unexplained drop waits for the ``bye`` or loss that may explain it before it is a warning."""


def open_monitor(sock: zmq.Socket, poller: zmq.Poller | None) -> zmq.Socket:
    """Start monitoring ``sock`` for the events a :class:`ConnectionWatch` reads; the monitor socket
    is registered with ``poller`` so the driver's loop wakes for it (None: the caller reads it on
    its own schedule)."""
    monitor = sock.get_monitor_socket(WATCHED)
    if poller is not None:
        poller.register(monitor, zmq.POLLIN)
    return monitor


def read_events(monitor: zmq.Socket, limit: int = 256) -> list[tuple[int, int]]:
    """The events waiting on ``monitor`` (at most ``limit``: bounded work per wake-up, however many
    connections a flood opens), as (event, value) pairs, without blocking."""
    events: list[tuple[int, int]] = []
    # ZMQ_EVENTS, not monitor.poll(0): an owner host asks hundreds of monitors at every check, and
    # pyzmq's poll builds a Poller each time (ten times the cost)
    while len(events) < limit and int_option(monitor, EVENTS) & POLLIN:
        message = recv_monitor_message(monitor)
        events.append((int(message["event"]), int(message["value"])))
    return events


@dataclass
class ConnectionWatch:
    """One socket's connection events, interpreted for ``party`` on the ``server`` (the curator's
    ROUTER) or ``client`` (a DEALER connecting to ``endpoint``) side."""

    party: str
    side: str
    endpoint: str
    max_message_bytes: int
    keys_dir: str | None = None
    handshakes: int = 0
    failed_handshakes: int = 0
    consecutive_failures: int = 0
    disconnects: int = 0
    probes: int = 0
    warned_drops: int = 0
    first_unexplained_at: float | None = None
    links_closed: int = 0
    """Closed connections that may have been a peer's: on the client side, drops of a connection
    whose handshake succeeded; on the server side, every drop (ZeroMQ's events do not say which)."""
    linked: bool = False
    reported: set[str] = field(default_factory=set)

    def on_event(self, event: int, value: int) -> str | None:
        """Take one event. On the client side, returns why the party must stop (a refused
        handshake), else None. Logs what an operator should see, once per kind of problem."""
        if event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.handshakes += 1
            self.consecutive_failures = 0
            self.linked = True
        elif event in FAILED_HANDSHAKE:
            self.failed_handshakes += 1
            self.consecutive_failures += 1
            if self.side == "client":
                return self._client_failure(event, value)
            self._server_failure(event, value)
        elif event == zmq.EVENT_DISCONNECTED:
            self.disconnects += 1
            if self.linked or self.side == "server":
                self.links_closed += 1
            self.linked = False
        return None

    def _server_failure(self, event: int, value: int) -> None:
        if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
            self.probes += 1
            log.debug(
                "%s: a connection closed before its handshake completed (a TCP probe such as a healthcheck)", self.party
            )
        elif event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            pass  # the ZAP handler already named the address and the key (PartyAuthenticator)
        elif value == CRYPTOGRAPHIC:
            self._once(
                "crypto",
                "%s: a party failed the CURVE handshake: it does not hold this curator's public key, "
                "so its hello could not be decrypted (its keys come from another `marketplace provision` or "
                "`keys generate`; ZeroMQ does not report its address for this failure)",
                self.party,
            )
        elif value == MECHANISM_MISMATCH:
            self._once(
                "mechanism",
                "%s: a party connected with another security mechanism (CURVE on one side, --insecure on the other)",
                self.party,
            )
        else:
            self._once(f"protocol-{value}", "%s: a handshake failed (ZeroMQ protocol error %#x)", self.party, value)
        return None

    def _client_failure(self, event: int, value: int) -> str | None:
        keys = f" {self.keys_dir}" if self.keys_dir else ""
        if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return (
                f"the curator at {self.endpoint} refused this party's CURVE key: {self.party}'s public key is not in "
                f"the curator's kit. Check the keys folder{keys}: every party's kit must come from the same "
                f"`marketplace provision` (or `marketplace keys generate`)"
            )
        if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value == MECHANISM_MISMATCH:
            return (
                f"the curator at {self.endpoint} uses another security mechanism than this party "
                f"(CURVE on one side, --insecure on the other)"
            )
        if self.consecutive_failures >= CLIENT_GIVES_UP_AFTER:
            return (
                f"the curator at {self.endpoint} refused the CURVE handshake {self.consecutive_failures} times in a "
                f"row: "
                f"it cannot decrypt this party's hello, so the curator.key in the keys folder{keys} is not the "
                f"public key of the curator listening there. Check the keys folder: every party's kit must come from "
                f"the same `marketplace provision` (or `marketplace keys generate`)"
            )
        return None

    def unexplained_drops(self, explained: int) -> int:
        """Drops of established connections that ``explained`` (peers that said bye or were declared
        lost) do not account for."""
        established_drops = self.disconnects - self.failed_handshakes
        return max(0, established_drops - explained) - self.warned_drops

    def check_drops(self, explained: int, *, now: float | None = None, final: bool = False) -> None:
        """Warn about drops nothing explains, after :data:`DROP_GRACE_S` (at once when ``final``).
        Server side only: a connecting party learns that the curator is gone from ``links_closed``."""
        if self.side != "server":
            return
        new = self.unexplained_drops(explained)
        if new <= 0:
            self.first_unexplained_at = None
            return
        now = time.monotonic() if now is None else now
        if self.first_unexplained_at is None:
            self.first_unexplained_at = now
        if final or now - self.first_unexplained_at >= DROP_GRACE_S:
            self.warned_drops += new
            self.first_unexplained_at = None
            what = "a connection was dropped" if new == 1 else f"{new} connections were dropped"
            log.warning(
                "%s: %s that no bye or lost peer explains (a peer that vanished, or a frame over "
                "max_message_bytes = %d, which ZeroMQ answers by closing the connection)",
                self.party,
                what,
                self.max_message_bytes,
            )

    def summary(self) -> None:
        """At close: one line for repeated handshake failures, at the level they deserve."""
        refused = self.failed_handshakes - self.probes
        if refused > 1 and self.side == "server":
            log.warning("%s: %d CURVE handshakes failed in all", self.party, refused)
        if self.probes:
            log.debug("%s: %d connection(s) closed before their handshake (probes)", self.party, self.probes)

    def _once(self, key: str, message: str, *args: object) -> None:
        if key not in self.reported:
            self.reported.add(key)
            log.warning(message, *args)
