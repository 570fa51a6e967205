"""The in-process driver: every party in one Python process, messages through one FIFO queue.

It is the reference run: deterministic by construction (parties start in a fixed order, frames are
delivered first-in first-out), and it moves the same encoded frames as the ZeroMQ driver, so message
and byte counts are comparable one to one.

Liveness and progress are emulated: when the queue runs dry while a party still expects a peer
that has ended without saying ``bye`` (it failed, or was refused), that party is told the peer is
lost, as the ZeroMQ driver would tell it once the ended process stops sending heartbeats. And when
the queue runs dry while a party still waits for something from a peer that is alive (a bid that
will never come), the peer is lost too: with nothing left to deliver it can never arrive, which is
what the ZeroMQ driver's progress deadline finds out with a clock. So a run where an owner fails or
stops progressing goes on without it under both drivers instead of stalling here.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from marketplace.transport.cohorts import Cohorts
from marketplace.transport.node import Node, Outgoing


class StalledRun(RuntimeError):
    """The queue ran dry (or hit its step bound) while some party still waited for messages."""


@dataclass
class InProcessStats:
    delivered: int = 0
    transport_s: float = 0.0
    undeliverable: list[str] = field(default_factory=list)
    lost_peers: list[str] = field(default_factory=list)
    """"waiter: peer" for every peer declared lost by the liveness emulation, in order."""


def run_inprocess(
    nodes: list[Node], *, max_steps: int = 50_000_000, after_delivery: Callable[[], None] | None = None
) -> InProcessStats:
    """Start every node in list order and deliver frames until the queue is empty.

    ``after_delivery`` is called after each delivered frame (the runner uses it for progress).

    Raises :class:`StalledRun` if some node is not done when nothing is left to deliver.
    """
    by_id = {n.party_id: n for n in nodes}
    queue: deque[tuple[str, Outgoing]] = deque()
    stats = InProcessStats()
    lost: dict[str, set[str]] = {n.party_id: set() for n in nodes}

    def post(sender: Node, outgoing: list[Outgoing]) -> None:
        for out in outgoing:
            sender.record_sent(out)
            queue.append((sender.party_id, out))

    cohorts = Cohorts(nodes)
    for node in nodes:
        post(node, node.start())
    while True:
        while queue:
            t0 = time.perf_counter()
            batch = _next_batch(queue, by_id, cohorts)
            stats.transport_s += time.perf_counter() - t0
            deliverable = _deliverable(batch, by_id, lost, stats)
            decoded = cohorts.prepare(deliverable) if len(deliverable) > 1 else [None] * len(deliverable)
            for (receiver, frame, sender), message in zip(deliverable, decoded, strict=True):
                if stats.delivered >= max_steps:
                    raise StalledRun(f"in-process run exceeded {max_steps} deliveries")
                stats.delivered += 1
                delivery = (
                    receiver.receive(frame, peer=sender)  # (the plain call, for parties not prepared together)
                    if message is None
                    else receiver.receive(frame, peer=sender, decoded=message)
                )
                post(receiver, delivery.outgoing)
                if after_delivery is not None:
                    after_delivery()
        silent = _ended_peers(nodes, by_id, lost) or _stuck_peers(nodes, lost)
        if not silent:
            break
        for waiter, peer, reason in silent:
            lost[waiter.party_id].add(peer)
            stats.lost_peers.append(f"{waiter.party_id}: {peer}")
            if not waiter.done:
                post(waiter, waiter.peer_lost(peer, reason))
    waiting = [n.party_id for n in nodes if not n.done]
    if waiting:
        raise StalledRun(f"in-process run stalled: {', '.join(waiting)} still waiting and no message left to deliver")
    for node in nodes:
        node.finish()
    return stats


def _deliverable(
    batch: list[tuple[str, Outgoing]], by_id: dict[str, Node], lost: dict[str, set[str]], stats: InProcessStats
) -> list[tuple[Node, bytes, str]]:
    """(receiver, frame, sender) of each frame of ``batch`` that can be delivered; the others noted."""
    deliverable = []
    for sender, out in batch:
        receiver = by_id.get(out.receiver)
        if receiver is None or receiver.done or sender in lost[receiver.party_id]:
            stats.undeliverable.append(f"{out.kind} from {sender} to {out.receiver}")
        else:
            deliverable.append((receiver, out.frame, sender))
    return deliverable


def _next_batch(
    queue: deque[tuple[str, Outgoing]], by_id: dict[str, Node], cohorts: Cohorts
) -> list[tuple[str, Outgoing]]:
    """The frame at the head of the queue, with the frames right behind it of the same sender and
    kind to other parties of the same cohort (a broadcast: every owner's ``round_open``), taken off
    the queue together. Delivered in this order, one after another, they are delivered exactly as
    one by one: the answers each party posts go behind them either way."""
    head = queue.popleft()
    first = by_id.get(head[1].receiver)
    cohort = cohorts.of_role.get(id(first.role)) if first is not None and cohorts else None
    if cohort is None:
        return [head]
    batch = [head]
    sender, kind = head[0], head[1].kind
    while queue:
        nxt_sender, nxt = queue[0]
        node = by_id.get(nxt.receiver)
        if nxt_sender != sender or nxt.kind != kind or node is None or cohorts.of_role.get(id(node.role)) is not cohort:
            break
        batch.append(queue.popleft())
    return batch


def _ended_peers(nodes: list[Node], by_id: dict[str, Node], lost: dict[str, set[str]]) -> list[tuple[Node, str, str]]:
    """(waiter, peer, reason) for every party still running that expects a peer which has ended (or
    does not exist) without saying bye to it: what a closed connection reveals over ZeroMQ."""
    found = []
    for waiter in nodes:
        if waiter.done:
            continue
        for peer in waiter.role.expected_peers():
            node = by_id.get(peer)
            if (node is None or node.done) and peer not in waiter.finished_peers and peer not in lost[waiter.party_id]:
                found.append((waiter, peer, "ended without saying bye"))
    return found


def _stuck_peers(nodes: list[Node], lost: dict[str, set[str]]) -> list[tuple[Node, str, str]]:
    """(waiter, peer, reason) for every running party that waits for something from a peer while
    nothing is left to deliver: it will never come (the progress deadline, without a clock)."""
    found = []
    for waiter in nodes:
        if waiter.done:
            continue
        for peer, what in waiter.role.awaited().items():
            if peer not in lost[waiter.party_id]:
                why = waiter.last_refusal.get(peer)
                found.append(
                    (
                        waiter,
                        peer,
                        f"no {what} (nothing left to deliver)" + (f"; its last refused frame: {why}" if why else ""),
                    )
                )
    return found
