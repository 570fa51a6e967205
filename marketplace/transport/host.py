"""An owner host: one OS process serving many owners, each still a party of its own on the wire.

Every hosted owner keeps what makes it a party: its own party id, its own DEALER socket and TCP
connection to the curator, its own CURVE key (so the curator's ZAP handler names the connection
after that owner's key, exactly as for an owner in a process of its own), its own message ids,
counters, timers and send queue. What the owners of a host share is the process: one ZeroMQ
context (one I/O thread), one poller and one thread running all of their loops.

Why one socket per owner rather than one connection per host carrying many owners: CURVE
authenticates a *connection*, and the curator takes a frame's sender from the key of the connection
it came on. One connection per host would need a second, application-level authentication per owner
inside it, and the curator would have to trust the host to keep its owners apart. With one socket
per owner, the curator cannot tell a hosted owner from one in its own process, and the wire, the
message counts and the security model do not depend on how owners are packed into processes. The
ZeroMQ guide's advice fits this layout: one context per process, sockets used only by the thread
that made them, and one ``zmq_poll`` over many sockets in one thread. Its cost is one TCP connection
and one file descriptor per owner (plus one for the socket's mailbox); the host raises its open-files
limit and the context's socket cap (``MAX_SOCKETS``, 1,023 by default) to what it needs.

The loop is fair the same way a single party's is: each wake-up reads a bounded batch from every
socket that has frames, and every owner's timers run on every pass. Owners' local work after their
last message (:meth:`Role.finish`, e.g. fitting a model) runs once every hosted owner's exchange is
over, so one owner's fitting never holds up the others' exchanges (their connections stay up
meanwhile regardless: ZeroMQ's I/O thread answers their ZMTP heartbeats).
"""

from __future__ import annotations

import logging
import select
import time

import zmq

from marketplace.transport.cohorts import Cohorts
from marketplace.transport.context import new_context
from marketplace.transport.link_settings import DriverStats, LinkSettings
from marketplace.transport.node import Node
from marketplace.transport.sides import Read
from marketplace.transport.sockets import int_option
from marketplace.transport.tuning import check_interval, frozen_heap, io_threads, raise_open_files_limit
from marketplace.transport.zmq_driver import SocketLoop, connect_dealer, dealer_loop

log = logging.getLogger(__name__)

SOCKETS_PER_OWNER = 3
"""The owner's DEALER and its monitor's two PAIR ends."""
FILES_PER_OWNER = 4
"""Its TCP connection and three socket mailboxes."""
HOST_SPARE_FILES = 256
"""Descriptors a host keeps for itself beyond its owners' (its context, log, imports, reports)."""
GATHER_PASSES = 4
"""Owners prepared together read their sockets in up to this many passes before handling: each
pass asks epoll (without waiting) for sockets whose frames came meanwhile, so that a round's
broadcast, which reaches the host's sockets over a few milliseconds, is prepared in few batches."""
HOST_CHECK_S = 0.1
"""How often each hosted owner's liveness and progress are checked (a single party: every 50 ms)."""


def serve_owners(nodes: list[Node], endpoint: str, settings: LinkSettings) -> dict[str, DriverStats]:
    """Connect one DEALER per node to the curator at ``endpoint`` (each under its own key from
    ``settings.curve_keys``, as :func:`serve_party` does for one) and run them all to the end in this
    thread; returns each owner's driver statistics by party id."""
    needed = FILES_PER_OWNER * len(nodes) + HOST_SPARE_FILES
    limit = raise_open_files_limit(needed)
    if limit < needed:
        raise OSError(
            f"an owner host of {len(nodes)} owners needs {needed} open files ({FILES_PER_OWNER} per owner), and "
            f"this process may open at most {limit} (ulimit -n): serve fewer owners per host "
            f"(parties.owners_per_process), or raise the limit"
        )
    ctx = new_context(io_threads(len(nodes)))
    ctx.set(zmq.MAX_SOCKETS, max(ctx.get(zmq.MAX_SOCKETS), SOCKETS_PER_OWNER * len(nodes) + 16))
    loops: list[SocketLoop] = []
    try:
        for node in nodes:
            sock = connect_dealer(ctx, node, endpoint, settings, connect=False)
            loop = dealer_loop(node, sock, settings, own_poller=False)
            loops.append(loop)
            loop.stats.endpoint = endpoint
            loop.watch_connections("client")  # before connecting, so that no handshake goes unseen
            sock.connect(endpoint)
        with frozen_heap():
            _run_all(loops)
    finally:
        for loop in loops:
            if not loop.closed:
                loop.close()
        ctx.destroy(linger=0)  # a socket made before an error and never closed must not hold up the exit
    for node in nodes:  # local work after the exchange (e.g. fitting a model), owner by owner
        node.finish()
    return {loop.node.party_id: loop.stats for loop in loops}


def _run_all(loops: list[SocketLoop]) -> None:
    """Run every loop until its role is done, in this thread (:class:`_HostRun`)."""
    run = _HostRun(loops)
    try:
        run.serve()
    finally:
        run.epoll.close()
    for loop in loops:
        loop.stats.idle_s += run.idle / len(loops)


class _HostRun:
    """The loops of one host, driven in one thread until every role is done.

    Readiness comes from epoll over the sockets' ZMQ_FD, so a wake-up costs O(sockets with news),
    not O(sockets) as a ``zmq_poll`` over hundreds of them would. ZMQ_FD only says that a socket's
    state *may* have changed, and an operation on a socket can consume that signal, so a socket is
    re-checked (``ZMQ_EVENTS``) after every read or send on it, and stays on the ``pending`` list
    while it still has frames waiting (a read takes a bounded batch at a time). A batch that ends
    on an empty socket made that check after its own sends, so it is not repeated (one fewer pair
    of system calls per owner and round). Loops with timers due, or with queued sends, are ticked
    on every pass; connection events are read at each liveness check.
    """

    def __init__(self, loops: list[SocketLoop]) -> None:
        self.epoll = select.epoll()
        self.by_fd: dict[int, SocketLoop] = {}
        for loop in loops:
            fd = int_option(loop.socket, zmq.FD)
            self.by_fd[fd] = loop
            self.epoll.register(fd, select.EPOLLIN)
            loop.begin()
        self.cohorts = Cohorts([loop.node for loop in loops])
        self.pending: set[SocketLoop] = set(loops)  # sockets that may have frames waiting
        self.backlogged: set[SocketLoop] = set()  # loops with frames waiting to be sent
        self.finished: set[SocketLoop] = set()
        self.active = list(loops)
        interval = min(loop.settings.heartbeat_interval_s for loop in loops) if loops else 1.0
        # every owner's checks run in one burst: like the curator's, they come less often as owners grow
        self.check_every = max(HOST_CHECK_S, interval / 4, check_interval(len(loops), interval))
        self.next_drain_mark = 0.0
        self.next_timer = 0.0  # the earliest timer of any loop: before it, only loops with a backlog are ticked
        self.idle = 0.0

    def serve(self) -> None:
        """Pass after pass until every loop is closed."""
        while True:
            now = time.monotonic()
            if now >= self.next_drain_mark:
                self._mark_drained(now)
            self._tick(now)
            self._read_pending()
            if self.finished and not self._close_finished():
                return
            self._wait()

    def _after(self, loop: SocketLoop, sent: int) -> None:
        """Note what an operation on ``loop`` changed: a send, a backlog, the end of its role."""
        if loop.frames_sent != sent:
            self.pending.add(loop)  # a send may have taken the socket's read signal
        if loop.backlog:
            self.backlogged.add(loop)
        else:
            self.backlogged.discard(loop)
        if loop.node.done:
            self.finished.add(loop)

    def _mark_drained(self, now: float) -> None:
        """Before the liveness checks: whose socket has nothing waiting (drained now), whose has."""
        for loop in self.active:
            if loop.side.waiting():
                self.pending.add(loop)
            else:
                loop.drained_at = now
        self.next_drain_mark = now + self.check_every

    def _tick(self, now: float) -> None:
        """Every loop's timers when the earliest is due; else only the loops with sends waiting."""
        if now >= self.next_timer:
            self.next_timer = self.next_drain_mark
            for loop in self.active:
                if not loop.node.done:
                    sent = loop.frames_sent
                    self.next_timer = min(self.next_timer, loop.tick(now, check_every=self.check_every))
                    self._after(loop, sent)
            return
        for loop in list(self.backlogged):
            if not loop.node.done:
                sent = loop.frames_sent
                loop.tick(now, check_every=self.check_every)
                self._after(loop, sent)

    def _read_pending(self) -> None:
        if self.cohorts:
            self._read_together()
            return
        for loop in list(self.pending):
            # no ZMQ_EVENTS check first: a socket here was signalled, and almost always has a frame
            # waiting; when it has none the batch's first read says so (one failed read instead
            # of a check that costs as much on every socket that does have one)
            if loop.closed or loop.node.done:
                self.pending.discard(loop)
                continue
            sent = loop.frames_sent
            if loop.read_batch(ask_events=True):
                # it ended on an empty socket, asked after its last send: nothing to re-check
                self.pending.discard(loop)
                sent = loop.frames_sent
            self._after(loop, sent)

    def _read_together(self) -> None:
        """:meth:`_read_pending` for owners whose roles prepare a broadcast together (a cohort,
        :mod:`marketplace.roles.cohort`): read every signalled socket's frames first, let the
        cohort prepare them all at once (every owner's bid of a round in one matrix product), then
        handle each owner's frames in order, on its own loop, and send its answers from its own
        socket. A socket that sent asks once more whether frames wait (its read check came before
        its sends)."""
        reads: list[tuple[SocketLoop, list[Read], bool]] = []
        seen: set[SocketLoop] = set()
        for _ in range(GATHER_PASSES):
            fresh = [loop for loop in self.pending if loop not in seen]
            if not fresh:
                break
            for loop in fresh:
                seen.add(loop)
                if loop.closed or loop.node.done:
                    self.pending.discard(loop)
                    continue
                frames, drained = loop.read_frames(ask_events=True)
                reads.append((loop, frames, drained))
            self._poll_ready()  # sockets that got frames meanwhile join this batch (a broadcast arrives over time)
        # only frames of an identified connection are decoded ahead, for that party exactly as
        # the loop's own handling would (a frame of an unknown one takes the loop's careful path)
        batch = [
            (loop.node, frame, party)
            for loop, frames, _ in reads
            for _, party, frame in frames
            if frame is not None and party is not None
        ]
        decoded = iter(self.cohorts.prepare(batch))
        for loop, frames, drained in reads:
            sent = loop.frames_sent
            for route, party, frame in frames:
                message = next(decoded) if frame is not None and party is not None else None
                if not loop.node.done:
                    loop.handle(route, party, frame, message)
            if drained:
                loop.link.drained(time.monotonic())
                if loop.frames_sent == sent or not loop.side.waiting():
                    self.pending.discard(loop)
                    sent = loop.frames_sent
            self._after(loop, sent)

    def _poll_ready(self) -> None:
        """Add the sockets epoll says have news now to ``pending``, without waiting."""
        for fd, _ in self.epoll.poll(0):
            loop = self.by_fd.get(fd)
            if loop is not None and not loop.closed:
                self.pending.add(loop)

    def _close_finished(self) -> bool:
        """Close the loops whose roles are done (their bye leaves); False once none is left."""
        for loop in self.finished:
            if not loop.closed:
                self.epoll.unregister(int_option(loop.socket, zmq.FD))
                self.pending.discard(loop)
                self.backlogged.discard(loop)
                loop.close()  # its bye leaves
        self.finished.clear()
        self.active = [loop for loop in self.active if not loop.closed]
        return bool(self.active)

    def _wait(self) -> None:
        """Sleep in epoll until the next timer, a retry of stuck sends, or news on a socket."""
        wait = self.next_timer - time.monotonic()
        if self.backlogged:
            wait = min(wait, 0.005)  # retry stuck sends soon
        if self.pending:
            wait = 0.0  # frames still waiting somewhere: check the timers, then read on
        t0 = time.perf_counter()
        events = self.epoll.poll(max(0.0, wait))
        self.idle += time.perf_counter() - t0
        for fd, _ in events:
            loop = self.by_fd.get(fd)
            if loop is not None and not loop.closed:
                self.pending.add(loop)
