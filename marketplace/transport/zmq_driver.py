"""The ZeroMQ driver: one party per OS process, a ROUTER at the curator and DEALERs elsewhere.

This module does the I/O: one loop (:class:`SocketLoop`), given the side of its socket
(:mod:`marketplace.transport.sides`: the curator's ROUTER, a party's DEALER), reads and writes the
socket, and tells the link policy (:class:`~marketplace.transport.link_policy.LinkPolicy`, a pure
state machine with time passed in) what happened and when; the policy decides who is lost, who gets
a heartbeat, what is dropped unread or queued, and the side how frames are framed and routed.
Together they make sure that no single peer, hostile or broken, can stop the others:

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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq

from marketplace.messages import Envelope
from marketplace.transport.context import new_context
from marketplace.transport.counters import HEARTBEAT
from marketplace.transport.curve import CurveKeys, PartyAuthenticator
from marketplace.transport.link_policy import LinkPolicy
from marketplace.transport.link_settings import DriverStats, LinkSettings
from marketplace.transport.monitor import ConnectionWatch, open_monitor, read_events
from marketplace.transport.node import UNKNOWN, Node, Outgoing
from marketplace.transport.quarantine import ConnectionState
from marketplace.transport.sides import DealerSide, Read, RouterSide, Side
from marketplace.transport.sockets import configure_socket, plaintext_identity
from marketplace.transport.tuning import (
    check_interval,
    frozen_heap,
    io_threads,
    listen_backlog,
    raise_open_files_limit,
)

log = logging.getLogger(__name__)
MIN_BATCH = 64
"""Frames read per wake-up at least; more with many peers (two per known peer), so every
connection with data waiting is read from on every wake-up."""
BATCH_TIME_S = 0.05
"""A wake-up stops reading after this long, so the timers run at least this often."""


def _policy_field(name: str) -> property:
    """A clock mark of the loop's link policy, read and written through the loop (an owner host
    marks its sockets drained; tests set the marks)."""
    return property(lambda loop: getattr(loop.link, name), lambda loop, value: setattr(loop.link, name, value))


def new_link(node: Node, settings: LinkSettings) -> LinkPolicy:
    """A fresh link policy for ``node``'s loop, starting now, with fresh driver statistics."""
    return LinkPolicy(settings, parties=len(node.parties or ()), now=time.monotonic(), stats=DriverStats())


class SocketLoop:
    """The event loop of one party: it moves frames between its side (:class:`~.sides.Side`: a
    ROUTER, a DEALER, a session on a shared connection) and the node, and tells the link policy
    (:class:`LinkPolicy`) what happened and when; the policy decides who is lost, who gets a
    heartbeat, what is dropped unread or queued; the side says how frames are read, framed and
    routed. ``sock`` is the socket this loop owns and closes (None: its side's connection is
    someone else's); with ``own_poller`` the loop waits for it itself (:meth:`run`), else an owner
    host waits for it (epoll)."""

    started = _policy_field("started")
    last_arrival = _policy_field("last_arrival")
    drained_at = _policy_field("drained_at")

    def __init__(
        self, node: Node, side: Side, link: LinkPolicy, sock: zmq.Socket | None, *, own_poller: bool = True
    ) -> None:
        self.node = node
        self.side = side
        self.link = link
        self.sock = sock
        self.settings = link.settings
        self.stats = link.stats
        self.peers = link.peers  # by party id
        self.lost = link.lost
        self.backlog = link.queues.backlog
        """Peers with frames waiting in their queue (so a flush costs O(waiting), not O(K))."""
        self.poller: zmq.Poller | None = None
        if own_poller:
            self.poller = zmq.Poller()
            self.poller.register(self.socket, zmq.POLLIN)
        self.monitor: zmq.Socket | None = None
        self.closed = False
        self.frames_sent = 0

    @property
    def socket(self) -> zmq.Socket:
        """The socket this loop owns (a loop on a shared connection has none)."""
        if self.sock is None:
            raise RuntimeError(f"{self.node.party_id}: this loop has no socket of its own")
        return self.sock

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
            for party in link.heartbeats(now, self.side.heartbeat_targets()):
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
        sock = self.socket
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
            if sock in ready:
                self.read_batch()
            else:
                self.link.drained(time.monotonic())  # nothing waiting: no frame of anyone is queued
        return self.stats

    def read_batch(self, *, ask_events: bool = False) -> bool:
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
        read, waiting = self.side.read, self.side.waiting
        count = 0
        drained = False
        while count < budget and not self.node.done:
            if count and ask_events and not waiting():
                drained = True
                break
            message = read()
            if message is None:
                drained = True
                break
            route, party, frame = message
            count += 1
            self._handle(route, party, frame)
            if time.perf_counter() > deadline:
                break
        if drained:
            self.link.drained(time.monotonic())
        self.stats.max_batch = max(self.stats.max_batch, count)
        return drained

    def read_frames(self, *, ask_events: bool = False) -> tuple[list[Read], bool]:
        """Read at most a batch of frames without handling them (an owner host handles the frames of
        all its owners together, :mod:`marketplace.transport.host`); True when the batch ended
        because nothing more was waiting. The last check was made before the frames' answers are
        sent: a caller that sends asks again (:meth:`Side.waiting`) before it trusts it."""
        budget = max(MIN_BATCH, 2 * len(self.peers))
        read, waiting = self.side.read, self.side.waiting
        frames: list[Read] = []
        drained = False
        while len(frames) < budget:
            if frames and ask_events and not waiting():
                drained = True
                break
            message = read()
            if message is None:
                drained = True
                break
            frames.append(message)
        self.stats.max_batch = max(self.stats.max_batch, len(frames))
        return frames, drained

    def handle(
        self, route: bytes, party: str | None, frame: bytes | memoryview | None, decoded: Envelope[Any] | None = None
    ) -> None:
        """Handle one frame read from this loop's side (``decoded``: :meth:`Node.peek
        <marketplace.transport.node.Node.peek>`'s envelope of it, when the caller decoded it)."""
        self._handle(route, party, frame, decoded)

    def _handle(
        self, route: bytes, party: str | None, frame: bytes | memoryview | None, decoded: Envelope[Any] | None = None
    ) -> None:
        now = time.monotonic()
        conn = self.link.quarantine.admit(route, party, now)
        if conn is None:  # its connection is quarantined: dropped unread (one call per frame of a flood)
            return
        if frame is None:  # wrong framing: refused unread
            self._refused(conn, now, party)
            return
        # a connection of unknown identity can speak only as "unknown party", which no role accepts
        peer = party if party is not None else UNKNOWN
        delivery = self.node.receive(frame, peer=peer) if decoded is None else self.node.receive(frame, peer, decoded)
        if delivery.accepted:
            if party is not None and self.link.accepted(party, route, now):
                self._first_contact(party)
            if delivery:
                self._dispatch(delivery, reply_route=route)
            return
        self._refused(conn, now, party)
        if delivery:
            self._dispatch(delivery, reply_route=route)
        failure = self.side.refusal_failure()
        if failure is not None and not self.node.done:
            self.node.role.fail(failure)

    def _first_contact(self, party: str) -> None:
        """A party's first accepted frame: the curator's side answers it at once, so the party hears
        from it even if the curator then hangs before its next heartbeat tick (else the party could
        only time out at start_timeout_s)."""
        if self.side.answers_first_contact and party not in self.lost:
            self._dispatch([self.node.heartbeat(party)])

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
            self.lose(party, reason)

    def _check_progress(self, now: float) -> None:
        """Drop a connected party that does not deliver what the role waits for in time."""
        role, node = self.node.role, self.node
        for party, reason in self.link.progress_losses(now, role.awaited(), role.progress_scale, node.last_refusal):
            self.lose(party, reason)

    def lose(self, party: str, reason: str) -> None:
        """Lose ``party`` for ``reason`` (once): its role hears of it, and its answers go out."""
        if not self.link.lose(party, reason):
            return
        log.warning("%s: peer %s lost: %s", self.node.party_id, party, reason)
        self._dispatch(self.node.peer_lost(party, reason))

    # --- sending ------------------------------------------------------------------------------
    def _dispatch(self, outgoing: list[Outgoing], *, reply_route: bytes | None = None) -> None:
        """Send each frame (in the side's order), or queue it behind its receiver's waiting frames.

        The common case (a protocol frame to a known peer on an open connection with nothing
        queued for it) goes straight to the socket, with one clock reading for the whole batch: a
        round opened to 10,000 owners is 10,000 of them. Anything else, and any send that does not
        go through at once, takes :meth:`_try_send`'s careful path, in the same order."""
        side = self.side
        lost, peers, backlog, send, fast_route = self.lost, self.peers, self.backlog, side.send, side.fast_route
        record, me, sent = self.node.counters.record_sent, self.node.party_id, 0
        io_before, t0 = self.stats.io_s, time.perf_counter()
        now = time.monotonic()
        for out in side.order(outgoing):
            receiver = out.receiver
            if receiver in lost:
                continue
            peer = peers.get(receiver)
            if peer is not None and not out.best_effort and receiver not in backlog:
                route = fast_route(peer)
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

    def _dispatch_one(self, out: Outgoing, reply_route: bytes | None) -> None:
        receiver, route_of = out.receiver, self.side.route_of
        if out.best_effort:  # an error reply, to the connection the refused frame came from
            self._try_send(reply_route if reply_route is not None else route_of(receiver), out)
            return
        if receiver not in self.peers:
            self.link.peer(receiver, route_of(receiver))
        if self.link.queues.holds(receiver) or not self._try_send(route_of(receiver), out, party=receiver):
            self._enqueue(receiver, out)

    def _try_send(self, route: bytes | None, out: Outgoing, *, party: str | None = None) -> bool:
        """Send without blocking; True when sent or definitely undeliverable, False to queue.
        ``party`` is who the frame is for, when it is a protocol frame."""
        t0 = time.perf_counter()
        try:
            self.side.send(route, out.frame)
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
                self.lose(party, f"unreachable when sending {out.kind}")
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
            self.lose(party, reason)

    def _flush_queues(self, now: float) -> None:
        queues, route_of = self.link.queues, self.side.route_of
        for waiting in queues.waiting():
            party = waiting.party
            while waiting.frames and party not in self.lost:
                if not self._try_send(route_of(party), waiting.frames[0], party=party):
                    reason = queues.blocked(waiting, now)
                    if reason is not None:
                        self.lose(party, reason)
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
        self.monitor = open_monitor(self.socket, self.poller)

    def _drain_monitor(self, monitor: zmq.Socket, *, final: bool = False) -> None:
        closed = self.watch.links_closed
        for event, value in read_events(monitor):
            refused = self.watch.on_event(event, value)
            if refused and not self.node.done:
                self.node.role.fail(refused)
        if self.watch.links_closed != closed and not self.node.done:
            self.side.links_closed(time.monotonic())
        if not self.node.done or final:
            self.watch.check_drops(len(self.node.finished_peers | self.lost), final=final)
        self.stats.dropped_connections = self.watch.warned_drops

    def close(self) -> None:
        sock = self.socket
        if self.node.done:
            self.flush_before_close(self.settings.close_linger_s)
        monitor = self.monitor
        if monitor is not None:
            self._drain_monitor(monitor, final=True)
            self.watch.summary()
            sock.disable_monitor()
            monitor.close(linger=0)
        linger = int(self.settings.close_linger_s * 1000) if self.node.done else 0
        sock.close(linger=linger)
        self.closed = True


def router_loop(node: Node, sock: zmq.Socket, settings: LinkSettings) -> SocketLoop:
    """The curator's loop over its ROUTER ``sock``."""
    link = new_link(node, settings)
    return SocketLoop(node, RouterSide(sock, node, link, curve=settings.curve_keys is not None), link, sock)


def dealer_loop(node: Node, sock: zmq.Socket, settings: LinkSettings, *, own_poller: bool = True) -> SocketLoop:
    """An owner's or the consumer's loop over its DEALER ``sock``, one connection to the curator
    (``own_poller`` false: an owner host waits for it)."""
    link = new_link(node, settings)
    return SocketLoop(node, DealerSide(sock, node, link), link, sock, own_poller=own_poller)


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
    loop = router_loop(node, sock, settings)
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
    sock = connect_dealer(ctx, node, endpoint, settings, connect=False)
    loop = dealer_loop(node, sock, settings)
    loop.stats.endpoint = endpoint
    loop.watch_connections("client")  # before connecting: a handshake the monitor missed would hide the
    sock.connect(endpoint)  # later close of that connection (the curator would never be lost)
    try:
        with frozen_heap():
            stats = loop.run()
    finally:
        loop.close()  # flushes the last messages (the bye) before the role's local work
        ctx.term()
    node.finish()
    return stats
