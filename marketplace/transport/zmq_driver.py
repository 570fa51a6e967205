"""The ZeroMQ driver: one party per OS process, a ROUTER at the curator and DEALERs elsewhere.

This module does the I/O: it reads and writes the sockets, and tells the link policy
(:class:`~marketplace.transport.link_policy.LinkPolicy`, a pure state machine with time passed in)
what happened and when; the policy decides who is lost, who gets a heartbeat, what is dropped unread
or queued. Together they make sure that no single peer, hostile or broken, can stop the others:

* **Fair and timed.** Each wake-up reads a bounded batch of frames (ZeroMQ queues each connection
  apart and reads them in turn), and every timer (heartbeats, liveness, progress deadlines, the run
  timeout) is checked on every iteration, so a steady stream of frames cannot starve them.
* **Liveness from the connection, not from the party's loop.** Every socket runs ZeroMQ's own
  ZMTP heartbeats (``ZMQ_HEARTBEAT_IVL``/``_TIMEOUT``/``_TTL``), which libzmq's I/O thread sends and
  answers without the Python interpreter: a party busy computing inside its role still answers
  them, a stopped or dead process does not, and ZeroMQ then closes the connection. A peer is lost
  when its connection closes (the socket monitor's disconnect event; on the curator's ROUTER, which
  the event does not name, the next frame to that peer's route fails with ``EHOSTUNREACH``), and
  only after the socket has been drained past that moment, so a party whose ``bye`` is still queued
  is never mistaken for a lost one. Application ``heartbeat`` messages still go out (the curator's
  are how it finds which route closed, and all are counted), but their absence loses nobody.
* **A peer is known by accepted frames only.** A peer counts as connected when one of its frames is
  accepted (a valid message of this run, from the party it is): frames that are refused, or that
  belong to another run, connect nobody.
* **Never blocked by a reader.** Sends are non-blocking. Frames a peer is not reading wait in that
  peer's own bounded queue; a peer whose queue stays stuck for ``send_timeout_s`` is dropped.
  Error replies are best effort: never queued, dropped if the peer does not read.
* **Progress deadlines.** A party the role is waiting for (a bid, a point, a ``bye``; see
  :meth:`Role.awaited`) that stays connected but does not deliver within ``progress_timeout_s`` (times
  the scale the role declares for that step, :meth:`Role.progress_scale`, at most ``run_timeout_s``) is
  dropped, and the reason, with its last refused frame, goes into the report. Like a lost
  connection, a missed deadline counts only once the socket was drained past it: a waiting party
  that was itself busy does not drop a peer whose answer sits unread in its own queue.
* **Quarantine.** A peer that sends more than ``refusal_budget`` refused frames within a second
  has its frames dropped unread for ``quarantine_s``: a flood of junk costs a read, not a decode.
* **Identity from keys.** Under CURVE the curator's ZAP handler stamps each connection with the
  party id its key belongs to (ZMQ User-Id), and that is the sender's identity; DEALERs set no
  routing id, so the ROUTER picks a fresh one per connection and no one can squat another party's
  name. Without CURVE (development only) a DEALER's routing id is its party id, and anyone can
  claim any name.

Every poll has a timeout; ``LINGER`` is 0 so that no error path can hang on exit; a clean exit
closes with a short, bounded linger so the last message (``bye``) still leaves. ``MAXMSGSIZE`` caps
every frame at the socket, and the decoder bounds what a frame may expand to.
"""

from __future__ import annotations

import errno
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path

import zmq

from marketplace.messages.limits import SCAN_ABOVE
from marketplace.roles import CURATOR
from marketplace.transport.context import new_context
from marketplace.transport.counters import HEARTBEAT
from marketplace.transport.curve import CurveKeys, PartyAuthenticator
from marketplace.transport.link_policy import LinkPolicy, PeerState
from marketplace.transport.link_settings import DriverStats, LinkSettings
from marketplace.transport.monitor import ConnectionWatch, open_monitor, read_events
from marketplace.transport.node import UNKNOWN, Node, Outgoing
from marketplace.transport.quarantine import ConnectionState
from marketplace.transport.sockets import configure_socket, int_option, plaintext_identity
from marketplace.transport.tuning import (
    check_interval,
    frozen_heap,
    io_threads,
    listen_backlog,
    raise_open_files_limit,
    spread_receivers,
)

log = logging.getLogger(__name__)
MIN_BATCH = 64
"""Frames read per wake-up at least; more with many peers (two per known peer), so every
connection with data waiting is read from on every wake-up."""
BATCH_TIME_S = 0.05
"""A wake-up stops reading after this long, so the timers run at least this often."""
NOBLOCK, NOBLOCK_MORE, RCVMORE = int(zmq.NOBLOCK), int(zmq.NOBLOCK | zmq.SNDMORE), int(zmq.RCVMORE)
EVENTS, POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
"""Plain ints: pyzmq's flag enums cost about a microsecond per operation, per frame."""
_SEND = getattr(zmq.backend, "Socket", zmq.Socket).send
"""pyzmq's own socket send, under its Python wrapper (which handles routing ids, groups and
zero-copy thresholds the driver never uses): a microsecond or more saved per frame."""


def _policy_field(name: str) -> property:
    """A clock mark of the loop's link policy, read and written through the loop (an owner host
    marks its sockets drained; tests set the marks)."""
    return property(lambda loop: getattr(loop.link, name), lambda loop, value: setattr(loop.link, name, value))


class _Loop(ABC):
    """The event loop shared by both socket types: it moves frames between the socket and the node
    and tells the link policy (:class:`LinkPolicy`) what happened and when; the policy decides who
    is lost, who gets a heartbeat, what is dropped unread or queued. Subclasses say how frames are
    framed and routed."""

    started = _policy_field("started")
    last_arrival = _policy_field("last_arrival")
    drained_at = _policy_field("drained_at")

    def __init__(self, node: Node, sock: zmq.Socket, settings: LinkSettings, *, own_poller: bool = True) -> None:
        self.node = node
        self.sock = sock
        self.settings = settings
        self.stats = DriverStats()
        self.link = LinkPolicy(settings, parties=len(node.parties or ()), now=time.monotonic(), stats=self.stats)
        self.peers = self.link.peers  # by party id
        self.lost = self.link.lost
        self.backlog = self.link.queues.backlog
        """Peers with frames waiting in their queue (so a flush costs O(waiting), not O(K))."""
        self.poller: zmq.Poller | None = None  # None: an owner host waits for this loop's socket (epoll)
        if own_poller:
            self.poller = zmq.Poller()
            self.poller.register(sock, zmq.POLLIN)
        self.monitor: zmq.Socket | None = None
        self.closed = False
        self.frames_sent = 0

    # --- per socket type --------------------------------------------------------------------
    @abstractmethod
    def _read(self) -> tuple[bytes, str | None, bytes | memoryview | None] | None:
        """One waiting message as (route, party, frame): party None when its identity is unknown;
        frame None for a message with the wrong framing (a large frame may be read in place, a
        memoryview); None when nothing is waiting."""

    @abstractmethod
    def _send_raw(self, route: bytes | None, frame: bytes) -> None:
        """Send one frame without blocking (raises zmq.Again when it would block)."""

    @abstractmethod
    def _route_of(self, party: str) -> bytes | None:
        """Where frames to ``party`` go (None: the only peer)."""

    @abstractmethod
    def _heartbeat_targets(self) -> list[str]:
        """Parties to send a heartbeat to now."""

    # --- the loop -----------------------------------------------------------------------------
    def begin(self) -> None:
        """Start the role (its first messages go out) and arm the timers."""
        self._dispatch(self.node.start())
        self.link.start(time.monotonic())

    def tick(self, now: float, *, check_every: float | None = None) -> float:
        """Run every timer that is due (heartbeats, liveness, progress, queued sends); return the
        time of the next one. Called on every iteration, so no stream of frames can starve them."""
        link, monitor = self.link, self.monitor
        if monitor is not None and link.check_due(now):
            self._drain_monitor(monitor)  # first, so that the checks below see a connection closed by now
        if link.heartbeat_due(now):
            for party in link.heartbeats(now, self._heartbeat_targets()):
                self._dispatch([self.node.heartbeat(party)])
        if link.check_due(now):  # O(K) per check, not per frame
            self._check_liveness(now)
            self._check_progress(now)
            if check_every is None:
                check_every = check_interval(len(self.peers), self.settings.heartbeat_interval_s)
            link.checked(now, check_every)
        if self.backlog:
            self._flush_queues(now)
        return link.next_timer()

    def run(self) -> DriverStats:
        poller = self.poller
        if poller is None:
            raise RuntimeError(f"{self.node.party_id}: this loop has no poller of its own; its owner host runs it")
        self.begin()
        while not self.node.done:
            wake = self.tick(time.monotonic())
            if self.node.done:
                break
            wait = wake - time.monotonic()
            if self.backlog:
                wait = min(wait, 0.005)  # retry stuck sends soon
            t0 = time.perf_counter()
            ready = dict(poller.poll(max(0, int(1000 * wait))))
            self.stats.idle_s += time.perf_counter() - t0
            monitor = self.monitor
            if monitor is not None and monitor in ready:
                self._drain_monitor(monitor)
            if self.sock in ready:
                self._read_batch()
            else:
                self.link.drained(time.monotonic())  # nothing waiting: no frame of anyone is queued
        return self.stats

    def _read_batch(self, *, ask_events: bool = False) -> bool:
        """Read at most a batch of frames (and for at most BATCH_TIME_S), handling each; True when
        the batch ended because nothing more was waiting.

        With ``ask_events`` the socket was signalled (it usually has a frame waiting: the first read
        is tried at once, and fails cheaply when it has none), and between frames it is asked
        (``ZMQ_EVENTS``) rather than read until a read fails: the same work inside ZeroMQ
        (both process the socket's pending commands), without raising ``zmq.Again`` per batch.
        Either way the batch ends on a check made after its last send, so a frame that arrived
        meanwhile is either seen here or signalled again on ``ZMQ_FD``."""
        budget = max(MIN_BATCH, 2 * len(self.peers))
        deadline = time.perf_counter() + BATCH_TIME_S
        count = 0
        drained = False
        while count < budget and not self.node.done:
            if count and ask_events and not int_option(self.sock, EVENTS) & POLLIN:
                drained = True
                break
            read = self._read()
            if read is None:
                drained = True
                break
            route, party, frame = read
            count += 1
            self._handle(route, party, frame)
            if time.perf_counter() > deadline:
                break
        if drained:
            self.link.drained(time.monotonic())
        self.stats.max_batch = max(self.stats.max_batch, count)
        return drained

    def _handle(self, route: bytes, party: str | None, frame: bytes | memoryview | None) -> None:
        now = time.monotonic()
        conn = self.link.quarantine.admit(route, party, now)
        if conn is None:  # its connection is quarantined: dropped unread (one call per frame of a flood)
            return
        if frame is None:  # wrong framing: refused unread
            self._refused(conn, now, party)
            return
        # a connection of unknown identity can speak only as "unknown party", which no role accepts
        delivery = self.node.receive(frame, peer=party if party is not None else UNKNOWN)
        if not delivery.accepted:
            self._refused(conn, now, party)
        elif party is not None and self.link.accepted(party, route, now):
            self._first_contact(party)
        if delivery:
            self._dispatch(delivery, reply_route=route)

    def _first_contact(self, party: str) -> None:
        """A party's first accepted frame (the curator answers at once)."""

    def _links_closed(self, now: float) -> None:
        """The monitor saw a connection close. A ROUTER cannot tell whose: its next heartbeat round
        (at its usual time, so that strangers opening and closing connections cannot make it send
        more often) goes to every connected peer, and the closed route answers ``EHOSTUNREACH``. A
        DEALER's only connection is to the curator (:class:`DealerLoop`)."""
        self.link.unnamed_connection_closed()

    def _refused(self, conn: ConnectionState, now: float, party: str | None) -> None:
        if self.link.refused(conn, now, party):
            log.warning(
                "%s: a connection of %s sent more than %d refused frames in a second: its frames are dropped "
                "unread for %g s",
                self.node.party_id,
                conn.name,
                self.settings.refusal_budget,
                self.settings.quarantine_s,
            )

    # --- timers -------------------------------------------------------------------------------
    def _check_liveness(self, now: float) -> None:
        """Fail the run past ``run_timeout_s``; else lose the peers the policy finds gone."""
        timeout = self.link.run_timeout(now)
        if timeout is not None:
            self.node.role.fail(timeout)
            return
        node = self.node
        for party, reason in self.link.liveness_losses(
            now, node.role.expected_peers(), node.finished_peers, node.last_refusal
        ):
            self._lose(party, reason)

    def _check_progress(self, now: float) -> None:
        """Drop a connected party that does not deliver what the role waits for in time."""
        role, node = self.node.role, self.node
        for party, reason in self.link.progress_losses(now, role.awaited(), role.progress_scale, node.last_refusal):
            self._lose(party, reason)

    def _lose(self, party: str, reason: str) -> None:
        if not self.link.lose(party, reason):
            return
        log.warning("%s: peer %s lost: %s", self.node.party_id, party, reason)
        self._dispatch(self.node.peer_lost(party, reason))

    # --- sending ------------------------------------------------------------------------------
    def _dispatch(self, outgoing: list[Outgoing], *, reply_route: bytes | None = None) -> None:
        """Send each frame, or queue it behind its receiver's waiting frames.

        The common case (a protocol frame to a known peer on an open connection with nothing
        queued for it) goes straight to the socket, with one clock reading for the whole batch: a
        round opened to 10,000 owners is 10,000 of them. Anything else, and any send that does not
        go through at once, takes :meth:`_try_send`'s careful path, in the same order."""
        lost, peers, backlog, send = self.lost, self.peers, self.backlog, self._send_raw
        record, me, sent = self.node.counters.record_sent, self.node.party_id, 0
        io_before, t0 = self.stats.io_s, time.perf_counter()
        now = time.monotonic()
        for out in outgoing:
            receiver = out.receiver
            if receiver in lost:
                continue
            peer = peers.get(receiver)
            if peer is not None and not out.best_effort and receiver not in backlog:
                route = self._fast_route(peer)
                if route is not None:
                    try:
                        send(route, out.frame)
                    except zmq.ZMQError:
                        pass  # full, or gone: the careful path below sees the same and acts on it
                    else:
                        record(me, receiver, out.kind, len(out.frame))
                        sent += 1
                        peer.last_sent = now  # the policy's record, written here once per frame (LinkPolicy.sent)
                        continue
            self._dispatch_one(out, reply_route)
        self.frames_sent += sent
        self.stats.io_s = io_before + (time.perf_counter() - t0)  # the careful path's own timing is inside it

    def _fast_route(self, peer: PeerState) -> bytes | None:
        """Where frames to ``peer`` go without a second look (None: take the careful path)."""
        return peer.route

    def _dispatch_one(self, out: Outgoing, reply_route: bytes | None) -> None:
        receiver = out.receiver
        if out.best_effort:  # an error reply, to the connection the refused frame came from
            self._try_send(reply_route if reply_route is not None else self._route_of(receiver), out)
            return
        if receiver not in self.peers:
            self.link.peer(receiver, self._route_of(receiver))
        if self.link.queues.holds(receiver) or not self._try_send(self._route_of(receiver), out, party=receiver):
            self._enqueue(receiver, out)

    def _try_send(self, route: bytes | None, out: Outgoing, *, party: str | None = None) -> bool:
        """Send without blocking; True when sent or definitely undeliverable, False to queue.
        ``party`` is who the frame is for, when it is a protocol frame."""
        t0 = time.perf_counter()
        try:
            self._send_raw(route, out.frame)
        except zmq.Again:
            self.stats.io_s += time.perf_counter() - t0
            if out.best_effort:
                self.stats.replies_dropped += 1
                return True
            return False
        except zmq.ZMQError as err:
            self.stats.io_s += time.perf_counter() - t0
            if err.errno != errno.EHOSTUNREACH:
                raise
            if out.kind == HEARTBEAT:
                self.link.heartbeat_unreachable(out.receiver, route, time.monotonic())
            elif party is not None and not out.best_effort:
                self._lose(party, f"unreachable when sending {out.kind}")
            else:
                self.stats.replies_dropped += 1
            return True
        self.stats.io_s += time.perf_counter() - t0
        self.node.record_sent(out)
        self.frames_sent += 1
        if party is not None:
            self.link.sent(party, time.monotonic())
        return True

    def _enqueue(self, party: str, out: Outgoing) -> None:
        reason = self.link.queues.push(party, out, time.monotonic())
        if reason is not None:
            self._lose(party, reason)

    def _flush_queues(self, now: float) -> None:
        queues = self.link.queues
        for waiting in queues.waiting():
            party = waiting.party
            while waiting.frames and party not in self.lost:
                if not self._try_send(self._route_of(party), waiting.frames[0], party=party):
                    reason = queues.blocked(waiting, now)
                    if reason is not None:
                        self._lose(party, reason)
                    break
                queues.sent(waiting, now)

    def flush_before_close(self, budget_s: float) -> None:
        """Give frames still queued (the last ``bye``) a bounded chance to leave."""
        deadline = time.monotonic() + budget_s
        while self.backlog and time.monotonic() < deadline:
            self._flush_queues(time.monotonic())
            time.sleep(0.005)

    # --- connections --------------------------------------------------------------------------
    def watch_connections(self, side: str) -> None:
        """Read the socket's connection events (:mod:`marketplace.transport.monitor`): refused
        handshakes are reported at once (a connecting party stops), probes and drops after ``bye``
        stay quiet, and drops nothing explains are warnings, counted in ``stats.dropped_connections``."""
        self.watch = ConnectionWatch(
            self.node.party_id,
            side,
            self.stats.endpoint,
            self.settings.max_message_bytes,
            keys_dir=self.settings.curve_keys,
        )
        self.monitor = open_monitor(self.sock, self.poller)

    def _drain_monitor(self, monitor: zmq.Socket, *, final: bool = False) -> None:
        closed = self.watch.links_closed
        for event, value in read_events(monitor):
            refused = self.watch.on_event(event, value)
            if refused and not self.node.done:
                self.node.role.fail(refused)
        if self.watch.links_closed != closed and not self.node.done:
            self._links_closed(time.monotonic())
        if not self.node.done or final:
            self.watch.check_drops(len(self.node.finished_peers | self.lost), final=final)
        self.stats.dropped_connections = self.watch.warned_drops

    def close(self) -> None:
        if self.node.done:
            self.flush_before_close(self.settings.close_linger_s)
        monitor = self.monitor
        if monitor is not None:
            self._drain_monitor(monitor, final=True)
            self.watch.summary()
            self.sock.disable_monitor()
            monitor.close(linger=0)
        linger = int(self.settings.close_linger_s * 1000) if self.node.done else 0
        self.sock.close(linger=linger)
        self.closed = True


class _RouterLoop(_Loop):
    """The curator's side. Under CURVE a frame's sender is the party its key belongs to (User-Id);
    in plaintext mode, the DEALER's routing id, which is its party id."""

    def __init__(self, node: Node, sock: zmq.Socket, settings: LinkSettings) -> None:
        super().__init__(node, sock, settings)
        self.curve = settings.curve_keys is not None

    def _read(self) -> tuple[bytes, str | None, bytes | memoryview | None] | None:
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

    def _dispatch(self, outgoing: list[Outgoing], *, reply_route: bytes | None = None) -> None:
        """A broadcast (a round opened to every owner) leaves in :func:`~.tuning.spread_order`: owners that
        share an owner host are usually numbered in one block, and sent block by block the last host would start
        its round only once every other host's frames had left."""
        super()._dispatch(spread_receivers(outgoing), reply_route=reply_route)

    def _send_raw(self, route: bytes | None, frame: bytes) -> None:
        if route is None:
            raise zmq.ZMQError(errno.EHOSTUNREACH)
        _SEND(self.sock, route, NOBLOCK_MORE)
        _SEND(self.sock, frame, NOBLOCK)

    def _route_of(self, party: str) -> bytes | None:
        peer = self.peers.get(party)
        if peer is not None and peer.route is not None:
            return peer.route
        return None if self.curve else party.encode()

    def _first_contact(self, party: str) -> None:
        # answer a party at once, so it hears from the curator even if the curator then hangs
        # before its next heartbeat tick (else it could only time out at start_timeout_s)
        if party not in self.lost:
            self._dispatch([self.node.heartbeat(party)])

    def _heartbeat_targets(self) -> list[str]:
        return self.link.open_peers(self.node.finished_peers)


class DealerLoop(_Loop):
    """An owner's or the consumer's side: one connection, to the curator."""

    def _handle(self, route: bytes, party: str | None, frame: bytes | memoryview | None) -> None:
        super()._handle(route, party, frame)
        curator = self.peers.get(CURATOR)
        theirs = self.node.foreign_run.get(CURATOR)
        if theirs is not None and (curator is None or curator.heard is None) and not self.node.done:
            # the curator speaks for another run: nothing it sends will ever be accepted here
            self.node.role.fail(
                f"the curator runs another run: its run id is {theirs!r}, ours {self.node.run_id!r} "
                f"(another seed, scenario or --run-id?)"
            )

    def _read(self) -> tuple[bytes, str | None, bytes | memoryview | None] | None:
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

    def _send_raw(self, route: bytes | None, frame: bytes) -> None:
        _SEND(self.sock, frame, NOBLOCK)

    def _route_of(self, party: str) -> bytes | None:
        return b""

    def _fast_route(self, peer: PeerState) -> bytes | None:
        return b""

    def _links_closed(self, now: float) -> None:
        self.link.connection_closed(CURATOR, now, b"")  # its only connection; every frame comes on route b""

    def _heartbeat_targets(self) -> list[str]:
        return [] if CURATOR in self.lost else [CURATOR]


def serve_curator(
    node: Node, endpoint: str, settings: LinkSettings, *, on_bound: Callable[[str], None] | None = None
) -> DriverStats:
    """Bind a ROUTER at ``endpoint`` (port 0 or ``*`` picks a free port) and run ``node`` to the end."""
    raise_open_files_limit(2 * len(node.parties or ()) + 256)  # one connection per party, and spares
    ctx = new_context(io_threads(len(node.parties or ())))
    auth = None
    sock = ctx.socket(zmq.ROUTER)
    configure_socket(sock, settings)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    sock.setsockopt(zmq.BACKLOG, listen_backlog(len(node.parties or ())))
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
        with frozen_heap():
            stats = loop.run()
    finally:
        loop.close()
        if auth is not None:
            auth.stop()
        ctx.term()
    node.finish()
    return stats


def connect_dealer(
    ctx: zmq.Context, node: Node, endpoint: str, settings: LinkSettings, *, connect: bool = True
) -> zmq.Socket:
    """A configured DEALER for ``node``, connected to the curator at ``endpoint`` (unless
    ``connect`` is false: the caller attaches its monitor first, then connects). Under CURVE it
    sets no routing id (the curator names it by its key); in plaintext mode its routing id is its
    party id."""
    sock = ctx.socket(zmq.DEALER)
    configure_socket(sock, settings)
    if settings.curve_keys is not None:
        CurveKeys(Path(settings.curve_keys), node.party_id).configure_client(sock)
    else:
        plaintext_identity(sock, node.party_id)
    if connect:
        sock.connect(endpoint)
    return sock


def serve_party(node: Node, endpoint: str, settings: LinkSettings) -> DriverStats:
    """Connect a DEALER to the curator at ``endpoint`` and run ``node``."""
    ctx = new_context()
    loop = DealerLoop(node, connect_dealer(ctx, node, endpoint, settings, connect=False), settings)
    loop.stats.endpoint = endpoint
    loop.watch_connections("client")  # before connecting: a handshake the monitor missed would hide the
    loop.sock.connect(endpoint)  # later close of that connection (the curator would never be lost)
    try:
        with frozen_heap():
            stats = loop.run()
    finally:
        loop.close()  # flushes the last messages (the bye) before the role's local work
        ctx.term()
    node.finish()
    return stats
