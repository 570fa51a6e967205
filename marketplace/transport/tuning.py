"""How the ZeroMQ driver sizes itself to a run: heartbeat intervals and I/O threads that grow with
the party count, how often the liveness checks run, the order a broadcast leaves in, the listen
backlog, the open-files limit, and the garbage collector kept off the loop's long-lived objects.

Pure arithmetic (and two process settings) with no socket in sight, so both ends of a run, the
owner host and the benchmarks compute the same numbers; :mod:`marketplace.transport.zmq_driver`
applies them.
"""

from __future__ import annotations

import gc
import resource
from collections.abc import Iterator
from contextlib import contextmanager

from marketplace.transport.node import Outgoing

LIVENESS_CHECK_S = 0.05
CHECK_S_PER_PEER = 0.0005
"""The liveness and progress checks cost O(peers): with many peers they run less often (every
0.5 ms per peer, never more than half a heartbeat interval apart), so they stay a small, fixed share
of the loop's time (at 1,000 owners, every 50 ms, they took a tenth of the curator's)."""


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
