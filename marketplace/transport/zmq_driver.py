"""The ZeroMQ driver: one party per OS process, a ROUTER at the curator and DEALERs elsewhere.

The loop is built so that no single peer, hostile or broken, can stop the others:

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
import gc
import logging
import resource
import time
from abc import ABC, abstractmethod
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import zmq

from marketplace.messages.errors import cut
from marketplace.messages.limits import SCAN_ABOVE
from marketplace.roles import CURATOR
from marketplace.transport.curve import CurveKeys, PartyAuthenticator
from marketplace.transport.monitor import ConnectionWatch, open_monitor, read_events
from marketplace.transport.counters import HEARTBEAT
from marketplace.transport.deadlines import missed_text, step_deadline
from marketplace.transport.node import UNKNOWN, Node, Outgoing

log = logging.getLogger(__name__)
LIVENESS_CHECK_S = 0.05
CHECK_S_PER_PEER = 0.0005
"""The liveness and progress checks cost O(peers): with many peers they run less often (every
0.5 ms per peer, never more than half a heartbeat interval apart), so they stay a small, fixed share
of the loop's time (at 1,000 owners, every 50 ms, they took a tenth of the curator's)."""
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
MAX_CONNECTIONS = 4096
"""Connections tracked for quarantine beyond two per party of the run; the least recently heard are
forgotten first. (A fixed 4,096 made a curator of 10,000 owners forget and rebuild a record for
almost every frame it read.)"""


@dataclass(frozen=True)
class LinkSettings:
    """Timeouts and limits of the ZeroMQ driver (all scenario settings under ``transport``)."""

    heartbeat_interval_s: float = 0.5
    heartbeat_timeout_s: float = 5.0
    start_timeout_s: float = 30.0
    run_timeout_s: float = 600.0
    progress_timeout_s: float = 30.0
    max_message_bytes: int = 64 * 1024 * 1024
    high_water_mark: int = 10_000
    send_timeout_s: float = 5.0
    max_queued_frames: int = 10_000
    refusal_budget: int = 50
    quarantine_s: float = 5.0
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
    quarantined: dict[str, int] = field(default_factory=dict)
    """Peer (or stranger) -> frames dropped unread while it was in quarantine."""
    replies_dropped: int = 0
    """Best-effort replies (errors) dropped because their receiver was not reading."""
    max_batch: int = 0
    arrivals: int = 0
    """Parties whose first frame this loop accepted."""
    last_arrival_s: float = 0.0
    """Seconds from this loop's start to the last of those first frames: at the curator, the
    connection set-up of the whole run (every CURVE handshake and hello)."""

    def to_dict(self) -> dict[str, object]:
        return {"io_s": self.io_s, "idle_s": self.idle_s, "lost_peers": dict(self.lost_peers), "endpoint": self.endpoint,
                "dropped_connections": self.dropped_connections, "quarantined": dict(self.quarantined),
                "replies_dropped": self.replies_dropped, "max_batch": self.max_batch, "arrivals": self.arrivals,
                "last_arrival_s": self.last_arrival_s}


@dataclass
class _Peer:
    """What the loop knows about one party: the connection its frames are accepted from (where
    frames to it go), when it was last heard, when it first made contact, and its send queue."""

    name: str
    route: bytes | None = None
    heard: float | None = None  # last accepted frame
    contact: float | None = None  # first frame of any kind
    queue: deque = field(default_factory=deque)
    stuck_since: float | None = None
    last_sent: float = float("-inf")  # last frame handed to the transport for it
    closed_at: float | None = None  # when its connection was seen closed (None: open, or never)
    closed_route: bytes | None = None  # the route that closed: frames still queued from it change nothing


@dataclass
class _Connection:
    """What the loop knows about one connection: its refusals in the current second, and until
    when its frames are dropped unread. Kept per connection, not per party, so that a second
    connection holding a party's key cannot get that party's own connection quarantined."""

    name: str
    window_start: float = 0.0
    window_refusals: int = 0
    quarantine_until: float = 0.0


def raise_open_files_limit(needed: int) -> int:
    """Raise this process's soft limit on open files to at least ``needed`` (up to the hard limit);
    returns the limit now in force. A host of many owners, or a curator of many, needs one file per
    connection."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    return soft


HEARTBEAT_S_PER_PARTY = 0.0005
"""With many parties, heartbeats come less often. libzmq's I/O threads ping every connection every
interval from both ends, whatever else flows on it, and each ping is a CURVE-encrypted frame and
its answer another: at 10,000 parties and 0.5 s that is 40,000 frames a second through the
curator's I/O threads, more than the rounds themselves move, and the curator's Python loop sends an
application ``heartbeat`` to every party it has not written to lately. The interval is stretched to
at least this much per party (0.5 s up to 1,000 parties, 5 s at 10,000), and the timeout with it,
so it still spans as many missed heartbeats. A party that exits, crashes or is killed is still
seen at once (its kernel closes the connection); only a stopped process or a broken network waits
for the timeout."""


def scaled_heartbeats(interval_s: float, timeout_s: float, parties: int) -> tuple[float, float]:
    """The heartbeat interval and timeout a run of ``parties`` parties uses for the configured
    ``interval_s`` and ``timeout_s``: unchanged up to ``interval_s / HEARTBEAT_S_PER_PARTY``
    parties, then both stretched by the same factor (so the timeout still spans as many missed
    heartbeats). Every party computes it from the run's party count, so both ends agree."""
    factor = max(1.0, parties * HEARTBEAT_S_PER_PARTY / interval_s)
    return interval_s * factor, timeout_s * factor


CONNECTIONS_PER_IO_THREAD = 2000
"""Connections one ZeroMQ I/O thread serves at most; a context for more gets more threads.

Each connection keeps timers in its I/O thread (its ZMTP heartbeat, the timeout of an unanswered
ping, the handshake's limit), and libzmq cancels a timer by walking every timer of the thread
(``poller_base_t::cancel_timer`` is O(timers)); it cancels one whenever any frame arrives after a
ping, and when a handshake completes. Over N connections in one thread that is O(N^2) work each
heartbeat interval: at 10,000 connections the curator's one I/O thread spent its whole core
walking timers (55 s of CPU in the first minute of a run), answered nothing in time, and
connections closed as dead. libzmq gives each new connection to its least loaded I/O thread, so
with one thread per 2,000 connections every walk stays short (with heartbeats stretched past
1,000 parties, :data:`HEARTBEAT_S_PER_PARTY`); more threads than that cost more in wake-ups
than they save."""


def io_threads(connections: int) -> int:
    """ZeroMQ I/O threads for a context serving ``connections`` connections (see
    :data:`CONNECTIONS_PER_IO_THREAD`)."""
    return max(1, -(-connections // CONNECTIONS_PER_IO_THREAD))


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Take everything built so far (the role, its data, the peers' records, imported modules) out
    of the cyclic garbage collector's sight while the loop runs, and give it back after. None of it
    becomes garbage meanwhile, yet every full collection walked all of it: at 10,000 owners the
    curator spent 4 % of its CPU in the collector. Objects made inside are collected as usual."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def check_interval(peers: int, heartbeat_interval_s: float) -> float:
    """Seconds between a loop's liveness and progress checks: every 50 ms (or every heartbeat
    interval, if shorter), and with many peers every :data:`CHECK_S_PER_PEER` per peer, up to half a
    heartbeat interval (so a closed connection is still acted on well within a heartbeat timeout)."""
    return max(min(LIVENESS_CHECK_S, heartbeat_interval_s), min(CHECK_S_PER_PEER * peers, heartbeat_interval_s / 2))


SPREAD_ABOVE = 8
"""Sends of one step to at least this many parties go out in :func:`spread_order`."""


def spread_order(n: int) -> list[int]:
    """A permutation of 0..n-1 that visits contiguous blocks in turn: bit-reversed order (0, n/2,
    n/4, 3n/4, ...), so that whatever the number of equal blocks, each is reached early. Only the
    order in which frames leave changes: every receiver's frames, message ids and counts stay the
    same."""
    bits = max(1, (n - 1).bit_length())
    order = [int(format(i, f"0{bits}b")[::-1], 2) for i in range(1 << bits)]
    return [i for i in order if i < n]


def spread_receivers(outgoing: list[Outgoing]) -> list[Outgoing]:
    """``outgoing`` with its receivers taken in :func:`spread_order` (of their first appearance),
    each receiver's own frames still in their order (a target embedding before the first round)."""
    if len(outgoing) < SPREAD_ABOVE:  # the usual reply of one or two frames: nothing to spread
        return outgoing
    receivers = list(dict.fromkeys(out.receiver for out in outgoing))
    if len(receivers) < SPREAD_ABOVE:
        return outgoing
    rank = {receivers[i]: r for r, i in enumerate(spread_order(len(receivers)))}
    return sorted(outgoing, key=lambda out: rank[out.receiver])  # stable: per receiver, order kept


def listen_backlog(parties: int) -> int:
    """The curator's TCP listen backlog: room for every party to connect at once. ZeroMQ's default
    (100) is too small for a run of hundreds of owners that all connect at start: while the I/O
    thread is busy with CURVE handshakes the kernel's accept queue fills, further SYNs are dropped,
    and each of those owners waits for TCP's one-second SYN retransmission (1.1 s instead of 0.18 s
    for 256 owners under CURVE here). The kernel caps the value at ``net.core.somaxconn``."""
    return max(100, parties + 64)


def plaintext_identity(sock: zmq.Socket, party: str) -> None:
    """Without CURVE (development only) a DEALER's routing id is its party id: its claim, unchecked."""
    sock.setsockopt(zmq.IDENTITY, party.encode())


def zmtp_heartbeats(settings: LinkSettings) -> dict[int, int]:
    """ZeroMQ's own heartbeat options for ``settings``, in milliseconds: a PING every
    ``heartbeat_interval_s``, and the connection closed when no traffic came back within
    ``heartbeat_timeout_s`` (``HEARTBEAT_TIMEOUT``). libzmq's I/O thread does all of it, so a party
    computing in Python keeps its connections; a stopped or dead one loses them.

    Both ends of every connection ping and time out on their own, so neither asks the other to
    keep a timer for it (``HEARTBEAT_TTL`` 0). A TTL would be a third timer per connection, armed
    by every PING received and cancelled by the next frame, and libzmq cancels a timer by walking
    every timer of its I/O thread: at 10,000 connections those walks were a tenth of the
    curator's CPU."""
    ivl = max(1, round(1000 * settings.heartbeat_interval_s))
    timeout = max(1, round(1000 * settings.heartbeat_timeout_s))
    return {int(zmq.HEARTBEAT_IVL): ivl, int(zmq.HEARTBEAT_TIMEOUT): timeout, int(zmq.HEARTBEAT_TTL): 0}


def configure_socket(sock: zmq.Socket, settings: LinkSettings) -> None:
    """Every socket of the driver: no linger on error paths, the frame cap, the high-water marks,
    ZMTP heartbeats (:func:`zmtp_heartbeats`)."""
    sock.setsockopt(zmq.LINGER, 0)
    for option, value in zmtp_heartbeats(settings).items():
        sock.setsockopt(option, value)
    sock.setsockopt(zmq.MAXMSGSIZE, settings.max_message_bytes)
    sock.setsockopt(zmq.SNDHWM, settings.high_water_mark)
    sock.setsockopt(zmq.RCVHWM, settings.high_water_mark)


class _Loop(ABC):
    """The event loop shared by both socket types; subclasses say how frames are framed and routed."""

    def __init__(self, node: Node, sock: zmq.Socket, settings: LinkSettings, *, own_poller: bool = True) -> None:
        self.node = node
        self.sock = sock
        self.settings = settings
        self.stats = DriverStats()
        self.started = time.monotonic()
        self.last_arrival = self.started
        """When a party's first frame was last accepted: the start deadline counts from here."""
        self.peers: dict[str, _Peer] = {}  # by party id
        self.connections: OrderedDict[bytes, _Connection] = OrderedDict()  # by route (most recent last)
        self.max_connections = MAX_CONNECTIONS + 2 * len(node.parties or ())
        self.lost: set[str] = set()
        self.drained_at = 0.0
        self.awaiting: dict[str, tuple[str, float, float, float]] = {}  # party -> (what, since, scale, deadline)
        self.backlog: dict[str, _Peer] = {}
        """Peers with frames waiting in their queue (so a flush costs O(waiting), not O(K))."""
        self.next_beat = self.next_check = 0.0
        self.poller: zmq.Poller | None = None  # None: an owner host waits for this loop's socket (epoll)
        if own_poller:
            self.poller = zmq.Poller()
            self.poller.register(sock, zmq.POLLIN)
        self.monitor: zmq.Socket | None = None
        self.closed = False
        self.frames_sent = 0
        self.probe = False
        """A connection closed and the monitor cannot say whose: the next heartbeat round goes to every
        connected peer, even one that had a frame from us lately (it may have gone into the closing pipe)."""

    # --- per socket type --------------------------------------------------------------------
    @abstractmethod
    def _read(self) -> tuple[bytes | None, str | None, bytes | None]:
        """One waiting message as (route, party, frame): party None when its identity is unknown;
        (None, None, None) when nothing is waiting; frame None for a message with the wrong framing."""

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
        self.next_beat = self.next_check = time.monotonic()

    def tick(self, now: float, *, check_every: float | None = None) -> float:
        """Run every timer that is due (heartbeats, liveness, progress, queued sends); return the
        time of the next one. Called on every iteration, so no stream of frames can starve them."""
        if self.monitor is not None and now >= self.next_check:
            self._drain_monitor()  # first, so that the checks below see a connection closed by now
        if now >= self.next_beat:
            probe, self.probe = self.probe, False
            for party in self._heartbeat_targets():
                peer = self.peers.get(party)
                if not probe and peer is not None and now - peer.last_sent < self.settings.heartbeat_interval_s:
                    continue  # it had a frame from us lately: that says we are alive
                self._dispatch([self.node.heartbeat(party)])
            self.next_beat = now + self.settings.heartbeat_interval_s
        if now >= self.next_check:  # O(K) per check, not per frame
            self._check_liveness(now)
            self._check_progress(now)
            if check_every is None:
                check_every = check_interval(len(self.peers), self.settings.heartbeat_interval_s)
            self.next_check = now + check_every
        if self.backlog:
            self._flush_queues(now)
        return min(self.next_beat, self.next_check)

    def run(self) -> DriverStats:
        self.begin()
        while not self.node.done:
            wake = self.tick(time.monotonic())
            if self.node.done:
                break
            wait = wake - time.monotonic()
            if self.backlog:
                wait = min(wait, 0.005)  # retry stuck sends soon
            t0 = time.perf_counter()
            ready = dict(self.poller.poll(max(0, int(1000 * wait))))
            self.stats.idle_s += time.perf_counter() - t0
            if self.monitor is not None and self.monitor in ready:
                self._drain_monitor()
            if self.sock in ready:
                self._read_batch()
            else:
                self.drained_at = time.monotonic()  # nothing waiting: no frame of anyone is queued
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
            if count and ask_events and not self.sock.get(EVENTS) & POLLIN:
                drained = True
                break
            route, party, frame = self._read()
            if route is None and frame is None:
                drained = True
                break
            count += 1
            self._handle(route, party, frame)
            if time.perf_counter() > deadline:
                break
        if drained:
            self.drained_at = time.monotonic()
        self.stats.max_batch = max(self.stats.max_batch, count)
        return drained

    def _handle(self, route: bytes, party: str | None, frame: bytes | None) -> None:
        now = time.monotonic()
        conn = self._connection(route, party)
        if conn.quarantine_until > now:
            self.stats.quarantined[conn.name] = self.stats.quarantined.get(conn.name, 0) + 1
            return
        peer = None
        if party is not None:
            peer = self.peers.get(party)
            if peer is None:
                peer = self.peers[party] = _Peer(party)
            if peer.contact is None:
                peer.contact = now
        if frame is None:  # wrong framing: refused unread
            self._refused(conn, now)
            return
        # a connection of unknown identity can speak only as "unknown party", which no role accepts
        delivery = self.node.receive(frame, peer=party if party is not None else UNKNOWN)
        if delivery.accepted and peer is not None:
            if peer.heard is None:
                self.last_arrival = now  # parties are still arriving: the others' handshakes are slow, not dead
                self.stats.arrivals += 1
                self.stats.last_arrival_s = now - self.started
            peer.heard = now
            if peer.route != route:  # frames to a party go where its accepted frames come from
                first = peer.route is None and peer.closed_at is None
                peer.route = route
                if peer.closed_at is not None and route != peer.closed_route:
                    peer.closed_at = None  # it came back on a new connection
                if first:
                    self._first_contact(peer)
        elif not delivery.accepted:
            self._refused(conn, now)
        if delivery:
            self._dispatch(delivery, reply_route=route)

    def _connection(self, route: bytes, party: str | None) -> _Connection:
        conn = self.connections.get(route)
        if conn is None:
            label = party if party is not None else f"unidentified connection {route!r:.24}"
            conn = self.connections[route] = _Connection(cut(label, 64))
            while len(self.connections) > self.max_connections:
                self.connections.popitem(last=False)
        else:
            self.connections.move_to_end(route)
        return conn

    def _first_contact(self, peer: _Peer) -> None:
        """A party's first accepted frame (the curator answers at once)."""

    def _links_closed(self, now: float) -> None:
        """The monitor saw a connection close. A ROUTER cannot tell whose: its next heartbeat round
        (at its usual time, so that strangers opening and closing connections cannot make it send
        more often) goes to every connected peer, and the closed route answers ``EHOSTUNREACH``. A
        DEALER's only connection is to the curator (:class:`DealerLoop`)."""
        self.probe = True

    def _refused(self, conn: _Connection, now: float) -> None:
        if now - conn.window_start > 1.0:
            conn.window_start, conn.window_refusals = now, 0
        conn.window_refusals += 1
        if conn.window_refusals > self.settings.refusal_budget and conn.quarantine_until <= now:
            conn.quarantine_until = now + self.settings.quarantine_s
            log.warning("%s: a connection of %s sent more than %d refused frames in a second: its frames are dropped "
                        "unread for %g s", self.node.party_id, conn.name, self.settings.refusal_budget, self.settings.quarantine_s)

    # --- timers -------------------------------------------------------------------------------
    def _check_liveness(self, now: float) -> None:
        if now - self.started > self.settings.run_timeout_s:
            self.node.role.fail(f"run timeout: {self.settings.run_timeout_s:g} s elapsed")
            return
        for party in self.node.role.expected_peers():
            if party in self.lost or party in self.node.finished_peers:
                continue
            peer = self.peers.get(party)
            closed = peer.closed_at if peer else None
            # lost only once the socket was drained after its connection closed (nothing of it, a
            # bye say, is still queued), or, under a flood that never lets the socket drain, after
            # a further heartbeat timeout
            if closed is not None:
                if self.drained_at > closed or now - closed > self.settings.heartbeat_timeout_s:
                    self._lose(party, f"its connection closed: no answer to ZeroMQ heartbeats within heartbeat_timeout_s="
                                      f"{self.settings.heartbeat_timeout_s:g} (a stopped or dead process, or a broken network)")
                continue
            if peer is None or peer.heard is None:
                # lost once start_timeout_s passed with no party arriving: while others keep completing
                # their handshakes (thousands of CURVE owners at once), a slow one is still on its way
                if now - self.last_arrival > self.settings.start_timeout_s:
                    why = self._last_refusal(party)
                    self._lose(party, f"never connected within start_timeout_s={self.settings.start_timeout_s:g}"
                                      f" (the last party arrived {self.last_arrival - self.started:.1f} s after the start)"
                                      + (f"; it sent only refused frames (the last: {why})" if why else ""))

    def _connection_closed(self, party: str, now: float, route: bytes | None) -> None:
        """``party``'s connection (``route``) is gone: the liveness check loses it once the socket
        is drained, unless an accepted frame comes on another connection first."""
        peer = self.peers.get(party)
        if peer is None:
            peer = self.peers[party] = _Peer(party)
        if peer.closed_at is None:
            peer.closed_at = now
            peer.closed_route = route
        peer.route = None

    def _check_progress(self, now: float) -> None:
        """Drop a connected party that does not deliver what the role waits for in time."""
        base = self.settings.progress_timeout_s
        role = self.node.role
        wanted = role.awaited()
        for party in list(self.awaiting):
            if party not in wanted or self.awaiting[party][0] != wanted[party]:
                del self.awaiting[party]
        for party, what in wanted.items():
            if party in self.lost:
                continue
            peer = self.peers.get(party)
            if peer is None or peer.contact is None:
                continue  # not connected yet: start_timeout_s applies
            entry = self.awaiting.get(party)
            if entry is None:  # the step's deadline is fixed when the wait starts (see deadlines.py)
                scale = role.progress_scale(party)
                entry = self.awaiting[party] = (what, now, scale, step_deadline(base, scale, self.settings.run_timeout_s))
            _, since, scale, limit = entry
            # as for a lost connection: only once the socket was drained past the deadline, so that
            # an answer queued while this party was busy is read before anyone is dropped
            if now - since > limit and (self.drained_at > since + limit or now - since > 2 * limit):
                why = self._last_refusal(party)
                self._lose(party, missed_text(what, base, scale, limit) + (f" (its last refused frame: {why})" if why else ""))

    def _last_refusal(self, party: str) -> str | None:
        return self.node.last_refusal.get(party)

    def _lose(self, party: str, reason: str) -> None:
        if party in self.lost:
            return
        self.lost.add(party)
        self.awaiting.pop(party, None)
        peer = self.peers.get(party)
        if peer is not None:
            peer.queue.clear()
        self.backlog.pop(party, None)
        self.stats.lost_peers[party] = reason
        log.warning("%s: peer %s lost: %s", self.node.party_id, party, reason)
        self._dispatch(self.node.peer_lost(party, reason))

    # --- sending ------------------------------------------------------------------------------
    def _dispatch(self, outgoing: list[Outgoing], *, reply_route: bytes | None = None) -> None:
        """Send each frame, or queue it behind its receiver's waiting frames.

        The common case (a protocol frame to a known peer on an open connection with nothing
        queued for it) goes straight to the socket, with one clock reading for the whole batch: a
        round opened to 10,000 owners is 10,000 of them. Anything else, and any send that does not
        go through at once, takes :meth:`_try_send`'s careful path, in the same order."""
        lost, peers, send, record = self.lost, self.peers, self._send_raw, self.node.counters.record_sent
        me, sent = self.node.party_id, 0
        io_before, t0 = self.stats.io_s, time.perf_counter()
        now = time.monotonic()
        for out in outgoing:
            receiver = out.receiver
            if receiver in lost:
                continue
            peer = peers.get(receiver)
            route = self._fast_route(peer) if peer is not None and not out.best_effort and not peer.queue else None
            if route is not None:
                try:
                    send(route, out.frame)
                except zmq.ZMQError:
                    pass  # full, or gone: the careful path below sees the same and acts on it
                else:
                    record(me, receiver, out.kind, len(out.frame))
                    sent += 1
                    peer.last_sent = now
                    continue
            self._dispatch_one(out, reply_route)
        self.frames_sent += sent
        self.stats.io_s = io_before + (time.perf_counter() - t0)  # the careful path's own timing is inside it

    def _fast_route(self, peer: _Peer) -> bytes | None:
        """Where frames to ``peer`` go without a second look (None: take the careful path)."""
        return peer.route

    def _dispatch_one(self, out: Outgoing, reply_route: bytes | None) -> None:
        receiver = out.receiver
        if out.best_effort:  # an error reply, to the connection the refused frame came from
            self._try_send(reply_route if reply_route is not None else self._route_of(receiver), out)
            return
        peer = self.peers.get(receiver)
        if peer is None:
            peer = self.peers[receiver] = _Peer(receiver, self._route_of(receiver))
        if peer.queue:
            self._enqueue(peer, out)
        elif not self._try_send(self._route_of(receiver), out, party=receiver, peer=peer):
            self._enqueue(peer, out)

    def _try_send(self, route: bytes | None, out: Outgoing, *, party: str | None = None, peer: _Peer | None = None) -> bool:
        """Send without blocking; True when sent or definitely undeliverable, False to queue.
        ``party`` (and its ``peer`` record, if the caller has it) is who the frame is for, when
        it is a protocol frame."""
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
                # its connection is gone, but what it sent before may still be waiting to be read (a
                # bye): no more heartbeats to it; the liveness check decides once the socket is drained
                peer = self.peers.get(out.receiver)
                if peer is not None and peer.route == route:
                    self._connection_closed(out.receiver, time.monotonic(), route)
            elif party is not None and not out.best_effort:
                self._lose(party, f"unreachable when sending {out.kind}")
            else:
                self.stats.replies_dropped += 1
            return True
        self.stats.io_s += time.perf_counter() - t0
        self.node.record_sent(out)
        self.frames_sent += 1
        if party is not None:
            if peer is None:
                peer = self.peers.get(party)
            if peer is not None:
                peer.last_sent = time.monotonic()
        return True

    def _enqueue(self, peer: _Peer, out: Outgoing) -> None:
        if len(peer.queue) >= self.settings.max_queued_frames:
            self._lose(peer.name, f"more than {self.settings.max_queued_frames} frames waiting to be read")
            return
        peer.queue.append(out)
        self.backlog[peer.name] = peer
        if peer.stuck_since is None:
            peer.stuck_since = time.monotonic()

    def _flush_queues(self, now: float) -> None:
        for peer in list(self.backlog.values()):
            while peer.queue and peer.name not in self.lost:
                if not self._try_send(self._route_of(peer.name), peer.queue[0], party=peer.name, peer=peer):
                    if now - (peer.stuck_since or now) > self.settings.send_timeout_s:
                        self._lose(peer.name, f"did not read for send_timeout_s={self.settings.send_timeout_s:g} "
                                              f"({len(peer.queue)} frames waiting)")
                    break
                peer.queue.popleft()
                peer.stuck_since = now if peer.queue else None
            if not peer.queue:
                self.backlog.pop(peer.name, None)

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
        self.watch = ConnectionWatch(self.node.party_id, side, self.stats.endpoint, self.settings.max_message_bytes,
                                     keys_dir=self.settings.curve_keys)
        self.monitor = open_monitor(self.sock, self.poller)

    def _drain_monitor(self, *, final: bool = False) -> None:
        closed = self.watch.links_closed
        for event, value in read_events(self.monitor):
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
        if self.monitor is not None:
            self._drain_monitor(final=True)
            self.watch.summary()
            self.sock.disable_monitor()
            self.monitor.close(linger=0)
        linger = int(self.settings.close_linger_s * 1000) if self.node.done else 0
        self.sock.close(linger=linger)
        self.closed = True


class _RouterLoop(_Loop):
    """The curator's side. Under CURVE a frame's sender is the party its key belongs to (User-Id);
    in plaintext mode, the DEALER's routing id, which is its party id."""

    def __init__(self, node: Node, sock: zmq.Socket, settings: LinkSettings) -> None:
        super().__init__(node, sock, settings)
        self.curve = settings.curve_keys is not None

    def _read(self) -> tuple[bytes | None, str | None, bytes | None]:
        t0 = time.perf_counter()
        try:
            route = self.sock.recv(NOBLOCK)
        except zmq.Again:
            self.stats.io_s += time.perf_counter() - t0
            return None, None, None
        # the rest of this message: a ROUTER gives it whole, its routing id and at least one frame,
        # so the frames themselves say whether more follow (no ZMQ_RCVMORE query per frame)
        parts = [self.sock.recv(NOBLOCK, copy=False)]
        while parts[-1].more:
            parts.append(self.sock.recv(NOBLOCK, copy=False))
        self.stats.io_s += time.perf_counter() - t0
        last = parts[-1] if parts else None
        if self.curve:
            party = (last.get("User-Id") if last is not None else None) or None
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
        """A broadcast (a round opened to every owner) leaves in :func:`spread_order`: owners that
        share an owner host are usually numbered in one block, and sent block by block the last
        host would start its round only once every other host's frames had left."""
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

    def _first_contact(self, peer: _Peer) -> None:
        # answer a party at once, so it hears from the curator even if the curator then hangs
        # before its next heartbeat tick (else it could only time out at start_timeout_s)
        if peer.name not in self.lost:
            self._dispatch([self.node.heartbeat(peer.name)])

    def _heartbeat_targets(self) -> list[str]:
        return [p for p, peer in self.peers.items()
                if peer.route is not None and p not in self.lost and p not in self.node.finished_peers]


class DealerLoop(_Loop):
    """An owner's or the consumer's side: one connection, to the curator."""

    def _handle(self, route: bytes, party: str | None, frame: bytes | None) -> None:
        super()._handle(route, party, frame)
        curator = self.peers.get(CURATOR)
        theirs = self.node.foreign_run.get(CURATOR)
        if theirs is not None and (curator is None or curator.heard is None) and not self.node.done:
            # the curator speaks for another run: nothing it sends will ever be accepted here
            self.node.role.fail(f"the curator runs another run: its run id is {theirs!r}, ours {self.node.run_id!r} "
                                f"(another seed, scenario or --run-id?)")

    def _read(self) -> tuple[bytes | None, str | None, bytes | None]:
        t0 = time.perf_counter()
        try:
            parts = [self.sock.recv(NOBLOCK)]
        except zmq.Again:
            return None, None, None
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

    def _fast_route(self, peer: _Peer) -> bytes | None:
        return b""

    def _links_closed(self, now: float) -> None:
        self._connection_closed(CURATOR, now, b"")  # its only connection; every frame comes on route b""

    def _heartbeat_targets(self) -> list[str]:
        return [] if CURATOR in self.lost else [CURATOR]


def serve_curator(node: Node, endpoint: str, settings: LinkSettings, *, on_bound: Callable[[str], None] | None = None) -> DriverStats:
    """Bind a ROUTER at ``endpoint`` (port 0 or ``*`` picks a free port) and run ``node`` to the end."""
    raise_open_files_limit(2 * len(node.parties or ()) + 256)  # one connection per party, and spares
    ctx = zmq.Context(io_threads=io_threads(len(node.parties or ())))
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


def connect_dealer(ctx: zmq.Context, node: Node, endpoint: str, settings: LinkSettings, *,
                   connect: bool = True) -> zmq.Socket:
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
    ctx = zmq.Context()
    loop = DealerLoop(node, connect_dealer(ctx, node, endpoint, settings, connect=False), settings)
    loop.stats.endpoint = endpoint
    loop.watch_connections("client")  # before connecting: a handshake the monitor missed would hide the
    loop.sock.connect(endpoint)       # later close of that connection (the curator would never be lost)
    try:
        with frozen_heap():
            stats = loop.run()
    finally:
        loop.close()  # flushes the last messages (the bye) before the role's local work
        ctx.term()
    node.finish()
    return stats
