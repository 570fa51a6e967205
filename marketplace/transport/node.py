"""A party plus its codec: frames in, frames out. Both drivers wrap every party (a role as it runs,
:class:`~marketplace.roles.party.Party`) in a Node, so decoding, validation, error replies, replay
protection, counting and timing happen in one place."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

from marketplace.messages import (
    PROTOCOL_VERSION,
    Envelope,
    MessageError,
    ProtocolError,
    decode,
    decode_sharing,
    encode,
    encode_body,
    encode_framed,
)
from marketplace.messages.errors import cut
from marketplace.messages.kinds import Bye, Error, Heartbeat
from marketplace.roles import Role, Send
from marketplace.roles.party import Party
from marketplace.transport.counters import HEARTBEAT, Counters

log = logging.getLogger(__name__)

MAX_KEPT_ERRORS = 100
"""Refusal texts kept for the report; past that only the count grows (bounded memory under a flood)."""
LOGGED_REFUSALS_PER_PEER = 20
"""Refusals logged one by one per peer; after that one line every :data:`LOG_EVERY` refusals."""
LOG_EVERY = 1000
MAX_TRACKED_PEERS = 1000
"""Per-peer refusal counts kept for this many peers; the rest are counted together."""
UNKNOWN = "unknown party"
"""The name refusals go to when the sender's identity is not established (its claim is not echoed)."""


class Outgoing(NamedTuple):
    """An encoded frame ready for a driver to move. ``best_effort`` frames (error replies) are
    dropped rather than queued when the receiver is not reading. (A named tuple: one is made per
    frame, and a frozen dataclass costs three times as much to build.)"""

    receiver: str
    kind: str
    frame: bytes
    best_effort: bool = False


class Delivery(list):
    """What :meth:`Node.receive` did with one frame: the frames to send (it is that list), whether
    the frame was ``accepted`` (a valid message of this run from the party it claims to be, not a
    replay; liveness counts only these), and if not, the ``refusal`` in one short line."""

    def __init__(self, outgoing: list[Outgoing], accepted: bool, refusal: str | None = None) -> None:
        super().__init__(outgoing)
        self.accepted = accepted
        self.refusal = refusal

    @property
    def outgoing(self) -> list[Outgoing]:
        return list(self)


class Node:
    """Runs one party's role: decodes and checks incoming frames, calls the role, encodes its answers.

    Message ids count per receiver (1, 2, 3, ... for each peer), so the ids a party sees depend only
    on the messages it received itself: a global counter would tell an owner how many messages the
    curator sent to others in between (how many owners were asked, for instance).

    A frame that fails validation, repeats an earlier ``msg_id`` or is addressed to someone else
    never reaches the role; it is counted, logged (a few per peer, then in summary) and answered with
    an ``error`` message (except an ``error`` itself, so two parties never argue in a loop). A
    :class:`ProtocolError` raised by the role is answered the same way. The role keeps serving in
    every case. Memory for refusals is bounded: the first :data:`MAX_KEPT_ERRORS` texts are kept.

    Counting: a frame counts as *sent* when the driver hands it to the transport
    (:meth:`record_sent`), so frames a driver drops on purpose (to a lost peer, an error reply to
    a peer that does not read) are not counted as sent. What the party sent on its role's behalf is
    counted by the party (:meth:`Party.sent <marketplace.roles.party.Party.sent>`) as each frame is encoded.

    ``party`` is the party to run, or a bare role (then run as a party of its own, with the identity
    it was built with). ``on_message``, when given, sees every validated message before the role
    handles it (``error`` messages, which go to :meth:`Role.on_error`, excepted): a recorder's hook.
    """

    def __init__(
        self,
        party: Party | Role,
        *,
        run_id: str,
        max_message_bytes: int,
        parties: frozenset[str] | None = None,
        on_message: Callable[[Envelope[Any]], None] | None = None,
    ) -> None:
        self.party = party if isinstance(party, Party) else Party(party)
        self.on_message = on_message
        self.parties = parties
        """The run's party ids, when known: a frame from anyone else is refused before the role sees it
        (and leaves no per-sender state behind)."""
        self.party_id = self.party.party_id
        self.run_id = run_id
        self.max_message_bytes = max_message_bytes
        self.counters = Counters()
        self.next_msg_id: dict[str, int] = {}
        """Per receiver: the msg_id the next protocol message to it takes."""
        self.last_seen_id: dict[str, int] = {}
        self.compute_s = 0.0
        self.codec_s = 0.0
        self.errors: list[str] = []
        self.errors_dropped = 0
        self.refusals_by_peer: Counter[str] = Counter()
        self.last_refusal: dict[str, str] = {}
        self.foreign_run: dict[str, str] = {}
        """Peer -> the run id its frames carried, when they carried another run's (cut short)."""
        self.finished_peers: set[str] = set()
        """Peers whose ``bye`` the role accepted: no more heartbeats to them, and their closing connection is
        expected."""

    @property
    def role(self) -> Role:
        """The party's role (its protocol state machine)."""
        return self.party.role

    @property
    def done(self) -> bool:
        return self.role.done

    def start(self) -> list[Outgoing]:
        t0 = time.perf_counter()
        sends = self.role.start()
        self.compute_s += time.perf_counter() - t0
        return self._encode_all(sends)

    def finish(self) -> None:
        """Run the role's local work after its last message (:meth:`Role.finish`), timed as compute."""
        t0 = time.perf_counter()
        self.role.finish()
        self.compute_s += time.perf_counter() - t0

    def heartbeat(self, receiver: str) -> Outgoing:
        """A heartbeat frame. It reuses the last protocol msg_id instead of taking a new one, so the
        protocol's ids (and so its byte counts) do not depend on how many heartbeats timing allowed."""
        return self._encode(Send(receiver, Heartbeat()), msg_id=max(1, self.next_msg_id.get(receiver, 1) - 1))

    def record_sent(self, out: Outgoing) -> None:
        """The driver handed ``out`` to the transport."""
        self.counters.record_sent(self.party_id, out.receiver, out.kind, len(out.frame))

    def peek(
        self, frame: bytes | memoryview, peer: str | None, like: tuple[Envelope[Any], bytes] | None = None
    ) -> Envelope[Any] | None:
        """``frame`` decoded and checked as :meth:`receive` would, without receiving it (nothing is
        counted or remembered); None when :meth:`receive` would refuse it. A driver peeks at a batch
        to let the roles' cohort prepare it (:mod:`marketplace.roles.cohort`), then hands each
        envelope to :meth:`receive`, which does not decode it again. ``like``: an envelope already
        accepted from another frame and its body's bytes; a frame with that same body (a broadcast)
        gets that very body, only its own head decoded (:func:`~marketplace.messages.decode_sharing`)."""
        t0 = time.perf_counter()
        try:
            message = decode_sharing(frame, like[0], like[1], peer) if like is not None else None
            if message is None:
                message = decode(frame, max_bytes=self.max_message_bytes, peer=peer)
            self._check_routing(message)
        except MessageError:
            return None
        finally:
            self.codec_s += time.perf_counter() - t0
        return message

    def receive(self, frame: bytes | memoryview, peer: str | None, decoded: Envelope[Any] | None = None) -> Delivery:
        """Handle one frame that arrived from the transport identity ``peer`` (None: not known yet;
        then the envelope's own claim names the sender). ``decoded``: what :meth:`peek` made of this
        very frame (it is not decoded again)."""
        if decoded is not None:
            message = decoded
        else:
            t0 = time.perf_counter()
            try:
                message = decode(frame, max_bytes=self.max_message_bytes, peer=peer)
                self._check_routing(message)
            except MessageError as err:
                self.codec_s += time.perf_counter() - t0
                return self._reject(err, peer or UNKNOWN, about_kind=err.kind, about_id=err.msg_id)
            self.codec_s += time.perf_counter() - t0
        sender = message.sender
        if isinstance(message.body, Heartbeat):
            self.counters.record_received(sender, self.party_id, HEARTBEAT, len(frame))
            return Delivery([], True)
        last = self.last_seen_id.get(sender, 0)
        if message.msg_id <= last:
            self.counters.record_rejected("duplicate")
            self._note(sender, f"replayed or duplicate msg_id {message.msg_id} (last {last})")
            return Delivery([], False, "duplicate msg_id")
        self.last_seen_id[sender] = message.msg_id
        self.counters.record_received(sender, self.party_id, message.kind, len(frame))
        t1 = time.perf_counter()
        try:
            sends = self.role.on_error(message) if isinstance(message.body, Error) else self._handle(message)
        except ProtocolError as err:
            self.compute_s += time.perf_counter() - t1
            self.counters.record_rejected("protocol")
            text = str(err)
            self._note(sender, text)
            error = Error(code="protocol", detail=cut(text, 2000), about_kind=message.kind, about_msg_id=message.msg_id)
            return Delivery(
                self._encode_all([Send(sender, error, reply_to=message.msg_id)], best_effort=True), True, cut(text, 200)
            )
        self.compute_s += time.perf_counter() - t1
        if isinstance(message.body, Bye):  # only once the role took it: a refused bye changes nothing
            self.finished_peers.add(sender)
        return Delivery(self._encode_all(sends), True)

    def _handle(self, message: Envelope[Any]) -> list[Send]:
        if self.on_message is not None:
            self.on_message(message)
        return self.role.handle(message)

    def peer_lost(self, peer: str, reason: str = "") -> list[Outgoing]:
        t0 = time.perf_counter()
        sends = self.role.peer_lost(peer, reason)
        self.compute_s += time.perf_counter() - t0
        return self._encode_all(sends)

    def _check_routing(self, message: Envelope) -> None:
        if self.parties is not None and message.sender not in self.parties:
            raise MessageError(
                party=UNKNOWN,
                kind=message.kind,
                field="sender",
                expected="a party of this run",
                got=repr(message.sender),
                msg_id=message.msg_id,
            )
        if message.receiver != self.party_id:
            raise MessageError(
                party=message.sender,
                kind=message.kind,
                field="receiver",
                expected=repr(self.party_id),
                got=repr(message.receiver),
                msg_id=message.msg_id,
            )
        if message.run_id != self.run_id:
            if message.sender in (self.parties or ()) or self.parties is None:
                self.foreign_run[message.sender] = cut(message.run_id, 64)
            raise MessageError(
                party=message.sender,
                kind=message.kind,
                field="run_id",
                expected=f"{self.run_id!r} (this run; another seed, scenario or --run-id?)",
                got=repr(message.run_id),
                msg_id=message.msg_id,
            )

    def _note(self, peer: str, text: str) -> None:
        """Keep (boundedly) and log (a few per peer) why a frame from ``peer`` was refused."""
        short = cut(text, 1000)
        if peer not in self.refusals_by_peer and len(self.refusals_by_peer) >= MAX_TRACKED_PEERS:
            peer = "others"
        self.last_refusal[peer] = short
        count = self.refusals_by_peer[peer] = self.refusals_by_peer[peer] + 1
        if len(self.errors) < MAX_KEPT_ERRORS:
            self.errors.append(short)
        else:
            self.errors_dropped += 1
        if count <= LOGGED_REFUSALS_PER_PEER:
            log.warning("%s: %s", self.party_id, short)
        elif count % LOG_EVERY == 0:
            log.warning(
                "%s: %d frames refused from %s so far; the last: %s", self.party_id, count, cut(peer, 64), short
            )

    def _reject(self, err: MessageError, peer: str, *, about_kind: str | None, about_id: int | None) -> Delivery:
        self.counters.record_rejected("bad_message")
        text = str(err)
        self._note(peer, text)
        if about_kind == "error":
            return Delivery([], False, cut(text, 200))
        error = Error(code="bad_message", detail=cut(text, 2000), about_kind=about_kind, about_msg_id=about_id)
        t0 = time.perf_counter()
        follow_up = self.role.frame_refused(peer, about_kind, cut(text, 200)) if peer != UNKNOWN else []
        self.compute_s += time.perf_counter() - t0
        return Delivery(
            [*self._encode_all([Send(peer, error, reply_to=about_id)], best_effort=True), *self._encode_all(follow_up)],
            False,
            cut(text, 200),
        )

    def _encode_all(self, sends: list[Send], *, best_effort: bool = False) -> list[Outgoing]:
        if len(sends) < 2:
            return [self._encode(s, best_effort=best_effort) for s in sends]
        # a broadcast (one body object to many receivers, a round_open to every owner): its body is
        # encoded once, and each receiver's frame wraps those bytes in its own envelope
        shared: dict[int, bytes] = {}
        seen: set[int] = set()
        for send in sends:
            key = id(send.body)
            if key in seen and key not in shared:
                t0 = time.perf_counter()
                shared[key] = encode_body(send.body)
                self.codec_s += time.perf_counter() - t0
            seen.add(key)
        return [self._encode(s, best_effort=best_effort, body=shared.get(id(s.body))) for s in sends]

    def _encode(
        self, send: Send, msg_id: int | None = None, *, best_effort: bool = False, body: bytes | None = None
    ) -> Outgoing:
        t0 = time.perf_counter()
        kind = type(send.body).KIND
        if msg_id is None:
            msg_id = self.next_msg_id.get(send.to, 1)
            self.next_msg_id[send.to] = msg_id + 1
        if body is None:
            frame = encode(
                Envelope(PROTOCOL_VERSION, self.run_id, msg_id, self.party_id, send.to, kind, send.reply_to, send.body)
            )
        else:
            frame = encode_framed(
                Envelope(PROTOCOL_VERSION, self.run_id, msg_id, self.party_id, send.to, kind, send.reply_to, None), body
            )
        self.codec_s += time.perf_counter() - t0
        if not isinstance(send.body, (Heartbeat, Error)):
            # what the party sent so far in the protocol, for its history: not heartbeats (they follow
            # the clock) nor answers to refused frames. Before its first frame of the protocol's own
            # kinds, its lifetime ledger records, durably, that the release left (Party.sent)
            self.party.sent(kind, len(frame))
        return Outgoing(send.to, kind, frame, best_effort)

    def timing(self) -> dict[str, float]:
        return {"compute_s": self.compute_s, "codec_s": self.codec_s}

    def error_summary(self) -> dict[str, object]:
        """For the party's report: the kept refusal texts, how many more there were, and per peer."""
        return {
            "kept": list(self.errors),
            "dropped": self.errors_dropped,
            "by_peer": {cut(p, 64): n for p, n in self.refusals_by_peer.most_common(20)},
        }
