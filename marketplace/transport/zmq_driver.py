"""The ZeroMQ driver: one party per OS process, a ROUTER at the curator and DEALERs elsewhere.

* The curator binds a ROUTER (``ROUTER_MANDATORY``, so sending to a vanished peer is an error, not a
  silent drop); owners and the consumer connect DEALERs whose identity is their party id. The ROUTER
  identity is the authority on who sent a frame: an envelope claiming another sender is refused.
* No REQ/REP lockstep: either side may send at any time. Every poll has a timeout.
* Application heartbeats flow both ways every ``heartbeat_interval_s``; a peer silent for longer
  than ``heartbeat_timeout_s`` (crashed, hung, partitioned) is declared lost and the role decides.
  An expected peer that never shows up within ``start_timeout_s`` is lost too.
* ``LINGER`` is 0 so that no error path can hang on exit; a clean exit closes with a short, bounded
  linger and terminates its own context, which waits for that linger, so the last message
  (``bye``) still leaves even from a forked process that ends with ``os._exit``. ``MAXMSGSIZE`` caps every frame at the socket,
  and the decoder caps it again; high-water marks bound memory under a flood.
"""

from __future__ import annotations

import errno
import logging
from abc import ABC, abstractmethod
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import zmq

from marketplace.roles import CURATOR
from marketplace.transport.curve import CurveKeys, PartyAuthenticator
from marketplace.transport.monitor import ConnectionWatch, open_monitor, read_events
from marketplace.transport.node import Node, Outgoing

log = logging.getLogger(__name__)
LIVENESS_CHECK_S = 0.05


@dataclass(frozen=True)
class LinkSettings:
    """Timeouts and limits of the ZeroMQ driver (all scenario settings under ``transport``)."""

    heartbeat_interval_s: float = 0.5
    heartbeat_timeout_s: float = 5.0
    start_timeout_s: float = 30.0
    run_timeout_s: float = 600.0
    max_message_bytes: int = 64 * 1024 * 1024
    high_water_mark: int = 10_000
    send_timeout_s: float = 5.0
    close_linger_s: float = 1.0
    curve_keys: str | None = None
    """Key folder: CURVE on (see :mod:`marketplace.transport.curve`); None: plaintext."""


@dataclass
class DriverStats:
    io_s: float = 0.0
    idle_s: float = 0.0
    lost_peers: dict[str, str] = field(default_factory=dict)
    endpoint: str = ""
    dropped_connections: int = 0

    def to_dict(self) -> dict[str, object]:
        return {"io_s": self.io_s, "idle_s": self.idle_s, "lost_peers": dict(self.lost_peers), "endpoint": self.endpoint,
                "dropped_connections": self.dropped_connections}


def _configure(sock: zmq.Socket, settings: LinkSettings) -> None:
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, settings.max_message_bytes)
    sock.setsockopt(zmq.SNDHWM, settings.high_water_mark)
    sock.setsockopt(zmq.RCVHWM, settings.high_water_mark)
    sock.setsockopt(zmq.SNDTIMEO, int(settings.send_timeout_s * 1000))


class _Loop(ABC):
    """The event loop shared by both socket types; subclasses say how frames are framed."""

    def __init__(self, node: Node, sock: zmq.Socket, settings: LinkSettings) -> None:
        self.node = node
        self.sock = sock
        self.settings = settings
        self.stats = DriverStats()
        self.started = time.monotonic()
        self.last_heard: dict[str, float] = {}
        self.lost: set[str] = set()
        self.poller = zmq.Poller()
        self.poller.register(sock, zmq.POLLIN)
        self.monitor: zmq.Socket | None = None

    def _recv(self) -> tuple[str | None, bytes | None]:
        """One waiting message as (peer, frame); (None, None) when none is waiting, and
        (None, b"") for a message with the wrong framing (counted and dropped)."""
        t0 = time.perf_counter()
        try:
            parts = self.sock.recv_multipart(zmq.NOBLOCK, copy=True)
        except zmq.Again:
            return None, None
        finally:
            self.stats.io_s += time.perf_counter() - t0
        return self._unframe(parts)

    # framing, per socket type
    @abstractmethod
    def _unframe(self, parts: list[bytes]) -> tuple[str | None, bytes]:
        """(peer, frame) from a received multipart message."""

    @abstractmethod
    def _send_frame(self, out: Outgoing) -> None:
        """Send one frame to ``out.receiver``."""

    @abstractmethod
    def _heartbeat_targets(self) -> list[str]:
        """Peers to send a heartbeat to now."""

    def run(self) -> DriverStats:
        self._dispatch(self.node.start())
        next_beat = next_check = time.monotonic()
        check_every = min(LIVENESS_CHECK_S, self.settings.heartbeat_interval_s)
        while not self.node.done:
            now = time.monotonic()
            if now >= next_beat:
                for peer in self._heartbeat_targets():
                    self._dispatch([self.node.heartbeat(peer)])
                next_beat = now + self.settings.heartbeat_interval_s
            if now >= next_check:  # O(K) per check: not on every wake-up, which is once per message burst
                self._check_liveness(now)
                if self.monitor is not None:
                    self._drain_monitor()
                next_check = now + check_every
            if self.node.done:
                break
            timeout_ms = max(1, int(1000 * min(next_beat - time.monotonic(), self.settings.heartbeat_interval_s)))
            t0 = time.perf_counter()
            ready = dict(self.poller.poll(timeout_ms))
            self.stats.idle_s += time.perf_counter() - t0
            if self.monitor is not None and self.monitor in ready:
                self._drain_monitor()
            while self.sock in ready and not self.node.done:
                peer, frame = self._recv()
                if frame is None:
                    break
                if peer is None:
                    continue
                first_contact = peer not in self.last_heard
                self.last_heard[peer] = time.monotonic()
                if first_contact and isinstance(self, _RouterLoop):
                    # answer a new peer at once, so it hears from the curator even if the curator
                    # hangs before its next heartbeat tick (else it could only time out at start_timeout_s)
                    self._dispatch([self.node.heartbeat(peer)])
                self._dispatch(self.node.receive(frame, peer=peer))
        return self.stats

    def watch_connections(self, side: str) -> None:
        """Read the socket's connection events (:mod:`marketplace.transport.monitor`): refused
        handshakes are reported at once (a connecting party stops), probes and drops after ``bye``
        stay quiet, and drops nothing explains are warnings, counted in ``stats.dropped_connections``."""
        self.watch = ConnectionWatch(self.node.party_id, side, self.stats.endpoint, self.settings.max_message_bytes,
                                     keys_dir=self.settings.curve_keys)
        self.monitor = open_monitor(self.sock, self.poller)

    def _drain_monitor(self, *, final: bool = False) -> None:
        for event, value in read_events(self.monitor):
            refused = self.watch.on_event(event, value)
            if refused and not self.node.done:
                self.node.role.fail(refused)
        if not self.node.done or final:
            self.watch.check_drops(len(self.node.finished_peers | self.lost), final=final)
        self.stats.dropped_connections = self.watch.warned_drops

    def _check_liveness(self, now: float) -> None:
        if now - self.started > self.settings.run_timeout_s:
            self.node.role.fail(f"run timeout: {self.settings.run_timeout_s:g} s elapsed")
            return
        for peer in self.node.role.expected_peers():
            if peer in self.lost or peer in self.node.finished_peers:
                continue
            heard = self.last_heard.get(peer)
            if heard is None and now - self.started > self.settings.start_timeout_s:
                self._lose(peer, f"never connected within start_timeout_s={self.settings.start_timeout_s:g}")
            elif heard is not None and now - heard > self.settings.heartbeat_timeout_s:
                self._lose(peer, f"silent for more than heartbeat_timeout_s={self.settings.heartbeat_timeout_s:g}")

    def _lose(self, peer: str, reason: str) -> None:
        if peer in self.lost:
            return
        self.lost.add(peer)
        self.stats.lost_peers[peer] = reason
        log.warning("%s: peer %s lost: %s", self.node.party_id, peer, reason)
        self._dispatch(self.node.peer_lost(peer))

    def _dispatch(self, outgoing: list[Outgoing]) -> None:
        pending = list(outgoing)
        while pending:
            out = pending.pop(0)
            if out.receiver in self.lost:
                continue
            t0 = time.perf_counter()
            try:
                self._send_frame(out)
            except zmq.Again:
                self.stats.io_s += time.perf_counter() - t0
                self._lose(out.receiver, f"send of {out.kind} blocked for send_timeout_s={self.settings.send_timeout_s:g}")
                continue
            except zmq.ZMQError as err:
                self.stats.io_s += time.perf_counter() - t0
                if err.errno != errno.EHOSTUNREACH:
                    raise
                self._lose(out.receiver, f"unreachable when sending {out.kind}")
                continue
            self.stats.io_s += time.perf_counter() - t0

    def close(self) -> None:
        if self.monitor is not None:
            self._drain_monitor(final=True)
            self.watch.summary()
            self.sock.disable_monitor()
            self.monitor.close(linger=0)
        linger = int(self.settings.close_linger_s * 1000) if self.node.done else 0
        self.sock.close(linger=linger)


class _RouterLoop(_Loop):
    def _recv(self) -> tuple[str | None, bytes | None]:
        if self.settings.curve_keys is None:
            return super()._recv()
        t0 = time.perf_counter()
        try:  # as frames, to read the User-Id the authenticator bound to the sender's key
            frames = self.sock.recv_multipart(zmq.NOBLOCK, copy=False)
        except zmq.Again:
            return None, None
        finally:
            self.stats.io_s += time.perf_counter() - t0
        peer, frame = self._unframe([f.bytes for f in frames])
        if peer is not None:
            key_owner = frames[-1].get("User-Id")
            if key_owner != peer:
                self.node.counters.record_rejected("identity_mismatch")
                log.warning("%s: refused a message from identity %r sent with %r's key", self.node.party_id, peer, key_owner)
                return None, b""
        return peer, frame

    def _unframe(self, parts: list[bytes]) -> tuple[str | None, bytes]:
        identity = parts[0].decode("utf-8", errors="replace")[:64]
        if len(parts) != 2:
            self.node.counters.record_rejected("bad_framing")
            log.warning("%s: %d-part message from %s refused (expected exactly one frame)", self.node.party_id, len(parts) - 1, identity)
            return None, b""
        return identity, parts[1]

    def _send_frame(self, out: Outgoing) -> None:
        self.sock.send_multipart([out.receiver.encode(), out.frame])

    def _heartbeat_targets(self) -> list[str]:
        return [p for p in self.last_heard if p not in self.lost and p not in self.node.finished_peers]


class _DealerLoop(_Loop):
    def _unframe(self, parts: list[bytes]) -> tuple[str | None, bytes]:
        if len(parts) != 1:
            self.node.counters.record_rejected("bad_framing")
            return None, b""
        return CURATOR, parts[0]

    def _send_frame(self, out: Outgoing) -> None:
        self.sock.send(out.frame)

    def _heartbeat_targets(self) -> list[str]:
        return [] if CURATOR in self.lost else [CURATOR]


def serve_curator(node: Node, endpoint: str, settings: LinkSettings, *, on_bound: Callable[[str], None] | None = None) -> DriverStats:
    """Bind a ROUTER at ``endpoint`` (port 0 or ``*`` picks a free port) and run ``node`` to the end."""
    ctx = zmq.Context()
    auth = None
    sock = ctx.socket(zmq.ROUTER)
    _configure(sock, settings)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    if settings.curve_keys is not None:
        keys = CurveKeys(Path(settings.curve_keys), node.party_id)
        auth = PartyAuthenticator(ctx, keys.allowlist())
        auth.start()
        keys.configure_server(sock)
    base, _, port = endpoint.rpartition(":")
    if port in ("0", "*"):
        port_no = sock.bind_to_random_port(base)
        endpoint = f"{base}:{port_no}"
    else:
        sock.bind(endpoint)
    if on_bound is not None:
        on_bound(endpoint)
    loop = _RouterLoop(node, sock, settings)
    loop.stats.endpoint = endpoint
    loop.watch_connections("server")
    try:
        stats = loop.run()
    finally:
        loop.close()
        if auth is not None:
            auth.stop()
        ctx.term()
    node.finish()
    return stats


def serve_party(node: Node, endpoint: str, settings: LinkSettings) -> DriverStats:
    """Connect a DEALER (identity = party id) to the curator at ``endpoint`` and run ``node``."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    _configure(sock, settings)
    sock.setsockopt(zmq.IDENTITY, node.party_id.encode())
    if settings.curve_keys is not None:
        CurveKeys(Path(settings.curve_keys), node.party_id).configure_client(sock)
    sock.connect(endpoint)
    loop = _DealerLoop(node, sock, settings)
    loop.stats.endpoint = endpoint
    loop.watch_connections("client")
    try:
        stats = loop.run()
    finally:
        loop.close()  # flushes the last messages (the bye) before the role's local work
        ctx.term()
    node.finish()
    return stats
