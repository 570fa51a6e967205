"""The ZeroMQ driver's policy as a pure state machine: who is connected, who is lost, who missed a
progress deadline, whom to send a heartbeat, which connection is quarantined, what waits to be sent.

The driver (:mod:`marketplace.transport.zmq_driver`) reads and writes the sockets and tells the
policy what happened, with the time it happened: a frame arrived on a connection, the node accepted
or refused it, a connection closed, the socket was read until empty, a frame left. The policy
answers with decisions: drop this frame unread, quarantine this connection (say so), answer this
party's first frame, send these parties a heartbeat, lose this party (for this reason). Nothing
here reads a clock, touches a socket or imports ZeroMQ, so every rule is tested with times given
as numbers (tests/transport/test_link_policy.py). The rules:

* **Liveness from the connection.** A peer is lost when its connection closed, and only once the
  socket was drained past that moment (a ``bye`` still queued is read first), or, under a flood
  that never lets the socket drain, a further ``heartbeat_timeout_s`` later. Silence alone loses
  nobody: a party computing inside its role keeps its connection (ZeroMQ's I/O thread answers
  ZMTP heartbeats for it).
* **Start.** An expected party never heard from is lost ``start_timeout_s`` after the last party
  arrived (while others keep arriving, a slow handshake is on its way, not dead); the whole run
  fails after ``run_timeout_s``.
* **Known by accepted frames only.** A party's route (where frames to it go) is the connection its
  last accepted frame came on; refused frames connect nobody.
* **Progress deadlines.** A connected party the role waits for gets ``progress_timeout_s`` times
  the step's declared scale (:mod:`marketplace.transport.deadlines`), fixed when the wait starts,
  and, like a closed connection, a missed deadline counts once the socket was drained past it.
* **Heartbeats** go to each target not sent anything within a heartbeat interval, or to every
  target after a connection closed that the socket could not name (a probe).
* **Quarantine** (:mod:`marketplace.transport.quarantine`) and **send queues**
  (:mod:`marketplace.transport.send_queues`) are kept here too, and a lost party's queue and
  deadline are forgotten with it.

Decisions that lose a party are generators, evaluated lazily: the driver acts on each loss (its
role's answers go out, which may close another connection) before the next party is judged, as
one loop over the parties would.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from marketplace.transport.deadlines import missed_text, step_deadline
from marketplace.transport.link_settings import DriverStats, LinkSettings
from marketplace.transport.quarantine import ConnectionState, Quarantine
from marketplace.transport.send_queues import SendQueues

MAX_CONNECTIONS = 4096
"""Connections tracked for quarantine beyond two per party of the run; the least recently heard are
forgotten first. (A fixed 4,096 made a curator of 10,000 owners forget and rebuild a record for
almost every frame it read.)"""

Loss = tuple[str, str]
"""A party to lose, and why (the reason goes into the report and to the role)."""


@dataclass
class PeerState:
    """What the policy knows about one party: the connection its frames are accepted from (where
    frames to it go), when it was last heard, when it first made contact, when a frame last left
    for it, and whether (and which of) its connections was seen closed."""

    name: str
    route: bytes | None = None
    heard: float | None = None  # last accepted frame
    contact: float | None = None  # first frame of any kind
    last_sent: float = float("-inf")  # last frame handed to the transport for it
    closed_at: float | None = None  # when its connection was seen closed (None: open, or never)
    closed_route: bytes | None = None  # the route that closed: frames still queued from it change nothing


class LinkPolicy:
    """One loop's peers, losses, deadlines, timers, quarantine and send queues.

    ``parties`` (the run's party count) sizes the quarantine table; ``now`` is the loop's start,
    from which the run and start deadlines count; ``stats`` receives the losses, arrivals and
    quarantine counts (a fresh :class:`DriverStats` when not given)."""

    def __init__(self, settings: LinkSettings, *, parties: int, now: float, stats: DriverStats | None = None) -> None:
        self.settings = settings
        self.stats = DriverStats() if stats is None else stats
        self.started = now
        self.last_arrival = now
        """When a party's first frame was last accepted: the start deadline counts from here."""
        self.peers: dict[str, PeerState] = {}  # by party id
        self.lost: set[str] = set()
        self.drained_at = 0.0
        """When the socket was last read until empty: nothing any peer sent before then is unread."""
        self.awaiting: dict[str, tuple[str, float, float, float]] = {}  # party -> (what, since, scale, deadline)
        self.quarantine = Quarantine(
            settings.refusal_budget, settings.quarantine_s, MAX_CONNECTIONS + 2 * parties, self.stats.quarantined
        )
        self.queues = SendQueues(settings.max_queued_frames, settings.send_timeout_s)
        self.next_beat = self.next_check = 0.0
        self.probe = False
        """A connection closed and nobody can say whose: the next heartbeat round goes to every target,
        even one that had a frame lately (it may have gone into the closing pipe)."""

    def peer(self, party: str, route: bytes | None = None) -> PeerState:
        """``party``'s record, made (with ``route``) if it has none yet."""
        peer = self.peers.get(party)
        if peer is None:
            peer = self.peers[party] = PeerState(party, route)
        return peer

    # --- events -------------------------------------------------------------------------------
    def start(self, now: float) -> None:
        """The loop starts its role at ``now``: heartbeats and checks are due at once."""
        self.next_beat = self.next_check = now

    def contacted(self, party: str, now: float) -> PeerState:
        """A frame from ``party`` was read at ``now`` (its connection admitted by the quarantine,
        :meth:`Quarantine.admit`): its first such frame is its contact, from which a progress
        deadline may count, whether or not the node accepts the frame. Returns its record."""
        peer = self.peers.get(party)
        if peer is None:
            peer = self.peers[party] = PeerState(party)
        if peer.contact is None:
            peer.contact = now
        return peer

    def refused(self, conn: ConnectionState, now: float, party: str | None = None) -> bool:
        """The node refused a frame that came on ``conn`` at ``now`` from ``party`` (None: unknown
        identity), or it had the wrong framing. Still a contact of ``party``'s. True when ``conn``
        goes into quarantine."""
        if party is not None:
            self.contacted(party, now)
        return self.quarantine.refused(conn, now)

    def accepted(self, party: str, route: bytes, now: float) -> bool:
        """The node accepted a frame from ``party`` on ``route`` at ``now`` (also a contact): the
        party is heard, and frames to it go to ``route`` from now on. True on its first route (the
        curator answers at once, so that a party hears from it even if it then hangs)."""
        peer = self.peers.get(party)
        if peer is None or peer.contact is None:
            peer = self.contacted(party, now)
        if peer.heard is None:
            self.last_arrival = now  # parties are still arriving: the others' handshakes are slow, not dead
            self.stats.arrivals += 1
            self.stats.last_arrival_s = now - self.started
        peer.heard = now
        if peer.route == route:
            return False
        first = peer.route is None and peer.closed_at is None
        peer.route = route
        if peer.closed_at is not None and route != peer.closed_route:
            peer.closed_at = None  # it came back on a new connection
        return first

    def sent(self, party: str, now: float) -> None:
        """A frame for ``party`` was handed to the transport at ``now``."""
        peer = self.peers.get(party)
        if peer is not None:
            peer.last_sent = now

    def connection_closed(self, party: str, now: float, route: bytes | None) -> None:
        """``party``'s connection ``route`` closed at ``now``: the party is lost once the socket is
        drained (:meth:`liveness_losses`), unless an accepted frame comes on another connection first."""
        peer = self.peer(party)
        if peer.closed_at is None:
            peer.closed_at = now
            peer.closed_route = route
        peer.route = None

    def heartbeat_unreachable(self, party: str, route: bytes | None, now: float) -> None:
        """A heartbeat to ``party`` found its connection ``route`` gone (how the curator learns which
        route closed): that connection closed at ``now``, if it still is the party's route. No more
        heartbeats go to it; what it sent before (a ``bye``) may still wait to be read, so the
        liveness check decides once the socket is drained."""
        peer = self.peers.get(party)
        if peer is not None and peer.route == route:
            self.connection_closed(party, now, route)

    def unnamed_connection_closed(self) -> None:
        """A connection closed and the socket cannot say whose: the next heartbeat round probes every target."""
        self.probe = True

    def drained(self, now: float) -> None:
        """The socket was read until nothing was waiting, at ``now``."""
        self.drained_at = now

    def lose(self, party: str, reason: str) -> bool:
        """Record ``party`` as lost for ``reason``, forgetting its queue and deadline; False when it
        already was (nothing to do)."""
        if party in self.lost:
            return False
        self.lost.add(party)
        self.awaiting.pop(party, None)
        self.queues.drop(party)
        self.stats.lost_peers[party] = reason
        return True

    # --- timers -------------------------------------------------------------------------------
    def heartbeat_due(self, now: float) -> bool:
        return now >= self.next_beat

    def check_due(self, now: float) -> bool:
        return now >= self.next_check

    def checked(self, now: float, every: float) -> None:
        """The liveness and progress checks ran at ``now``; the next are due ``every`` seconds later."""
        self.next_check = now + every

    def next_timer(self) -> float:
        """When the next heartbeat round or check is due."""
        return min(self.next_beat, self.next_check)

    def heartbeats(self, now: float, targets: Iterable[str]) -> Iterator[str]:
        """The heartbeat round at ``now``: each of ``targets`` that had no frame from us within a
        heartbeat interval (every one, after an unnamed close). The next round is due an interval on."""
        interval = self.settings.heartbeat_interval_s
        self.next_beat = now + interval
        probe, self.probe = self.probe, False
        for party in targets:
            peer = self.peers.get(party)
            if not probe and peer is not None and now - peer.last_sent < interval:
                continue  # it had a frame from us lately: that says we are alive
            yield party

    def open_peers(self, finished: Collection[str]) -> list[str]:
        """Parties with a connection frames go to, neither lost nor ``finished`` (their ``bye`` taken)."""
        lost = self.lost
        return [p for p, peer in self.peers.items() if peer.route is not None and p not in lost and p not in finished]

    # --- decisions ----------------------------------------------------------------------------
    def run_timeout(self, now: float) -> str | None:
        """Why the run fails at ``now`` (``run_timeout_s`` passed since the start), or None."""
        if now - self.started > self.settings.run_timeout_s:
            return f"run timeout: {self.settings.run_timeout_s:g} s elapsed"
        return None

    def liveness_losses(
        self, now: float, expected: Iterable[str], finished: Collection[str], last_refusal: Mapping[str, str]
    ) -> Iterator[Loss]:
        """The ``expected`` parties (neither lost nor ``finished``) to lose at ``now``: those whose
        connection closed before the socket was last drained (or a heartbeat timeout before
        ``now``), and those never heard from ``start_timeout_s`` after the last arrival (with the
        last refused frame of theirs, from ``last_refusal``, when there is one)."""
        settings = self.settings
        for party in expected:
            if party in self.lost or party in finished:
                continue
            peer = self.peers.get(party)
            closed = peer.closed_at if peer else None
            if closed is not None:
                if self.drained_at > closed or now - closed > settings.heartbeat_timeout_s:
                    yield (
                        party,
                        (
                            f"its connection closed: no answer to ZeroMQ heartbeats within heartbeat_timeout_s="
                            f"{settings.heartbeat_timeout_s:g} (a stopped or dead process, or a broken network)"
                        ),
                    )
                continue
            if (peer is None or peer.heard is None) and now - self.last_arrival > settings.start_timeout_s:
                why = last_refusal.get(party)
                yield (
                    party,
                    (
                        f"never connected within start_timeout_s={settings.start_timeout_s:g}"
                        f" (the last party arrived {self.last_arrival - self.started:.1f} s after the start)"
                        + (f"; it sent only refused frames (the last: {why})" if why else "")
                    ),
                )

    def pressure(self, now: float) -> float:
        """How much of its progress deadline the longest-pressed wait has used at ``now``: 0 when the
        role waits for nobody, 1 when a wait reaches its deadline. A server reads it to see whether
        the sessions it runs keep up with their deadlines before it starts another."""
        used = [(now - since) / limit for _, since, _, limit in self.awaiting.values() if limit > 0]
        return max(used, default=0.0)

    def progress_losses(
        self, now: float, wanted: Mapping[str, str], scale_of: Callable[[str], float], last_refusal: Mapping[str, str]
    ) -> Iterator[Loss]:
        """The connected parties to lose at ``now`` for not delivering what the role waits for
        (``wanted``: party -> what) within their step's deadline. A wait starts when a party first
        appears in ``wanted`` with that ``what``; its deadline is fixed then, from ``scale_of(party)``
        (the role's declared scale, asked once per wait). A deadline counts as missed only once the
        socket was drained past it, or twice the deadline has passed."""
        base, cap = self.settings.progress_timeout_s, self.settings.run_timeout_s
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
            if entry is None:
                scale = scale_of(party)
                entry = self.awaiting[party] = (what, now, scale, step_deadline(base, scale, cap))
            _, since, scale, limit = entry
            if now - since > limit and (self.drained_at > since + limit or now - since > 2 * limit):
                why = last_refusal.get(party)
                last = f" (its last refused frame: {why})" if why else ""
                yield party, missed_text(what, base, scale, limit) + last
