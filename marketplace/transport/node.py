"""A role plus its codec: frames in, frames out. Both drivers wrap every role in a Node, so decoding,
validation, error replies, replay protection, counting and timing happen in one place."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from marketplace.messages import PROTOCOL_VERSION, Envelope, MessageError, ProtocolError, decode, encode
from marketplace.messages.kinds import Error, Heartbeat
from marketplace.roles import Role, Send
from marketplace.transport.counters import HEARTBEAT, Counters

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outgoing:
    """An encoded frame ready for a driver to move."""

    receiver: str
    kind: str
    frame: bytes


class Node:
    """Runs one role: decodes and checks incoming frames, calls the role, encodes its answers.

    Message ids count per receiver (1, 2, 3, ... for each peer), so the ids a party sees depend only
    on the messages it received itself: a global counter would tell an owner how many messages the
    curator sent to others in between (how many owners were asked, for instance).

    A frame that fails validation, repeats an earlier ``msg_id`` or is addressed to someone else
    never reaches the role; it is counted, logged, and answered with an ``error`` message (except
    an ``error`` itself, so two parties never argue in a loop). A :class:`ProtocolError` raised by
    the role is answered the same way. The role keeps serving in every case.
    """

    def __init__(self, role: Role, *, run_id: str, max_message_bytes: int) -> None:
        self.role = role
        self.party_id = role.party_id
        self.run_id = run_id
        self.max_message_bytes = max_message_bytes
        self.counters = Counters()
        self.next_msg_id: dict[str, int] = {}
        """Per receiver: the msg_id the next protocol message to it takes."""
        self.last_seen_id: dict[str, int] = {}
        self.compute_s = 0.0
        self.codec_s = 0.0
        self.errors: list[str] = []
        self.finished_peers: set[str] = set()
        """Peers that said ``bye``: no more heartbeats to them, and their silence is expected."""

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

    def receive(self, frame: bytes, peer: str) -> list[Outgoing]:
        """Handle one frame that arrived from the transport identity ``peer``."""
        t0 = time.perf_counter()
        try:
            message = decode(frame, max_bytes=self.max_message_bytes, peer=peer)
            self._check_routing(message)
        except MessageError as err:
            self.codec_s += time.perf_counter() - t0
            return self._reject(err, peer, about_kind=err.kind, about_id=err.msg_id)
        self.codec_s += time.perf_counter() - t0
        if message.kind == HEARTBEAT:
            self.counters.record_received(message.sender, self.party_id, HEARTBEAT, len(frame))
            return []
        last = self.last_seen_id.get(peer, 0)
        if message.msg_id <= last:
            self.counters.record_rejected("duplicate")
            log.warning("%s: ignored replayed or duplicate msg_id %d from %s (last %d)", self.party_id, message.msg_id, peer, last)
            return []
        self.last_seen_id[peer] = message.msg_id
        if message.kind == "bye":
            self.finished_peers.add(peer)
        self.counters.record_received(message.sender, self.party_id, message.kind, len(frame))
        t1 = time.perf_counter()
        try:
            sends = self.role.on_error(message) if message.kind == "error" else self.role.handle(message)
        except ProtocolError as err:
            self.compute_s += time.perf_counter() - t1
            self.counters.record_rejected("protocol")
            self.errors.append(str(err))
            log.warning("%s: %s", self.party_id, err)
            error = Error(code="protocol", detail=str(err)[:2000], about_kind=message.kind, about_msg_id=message.msg_id)
            return self._encode_all([Send(peer, error, reply_to=message.msg_id)])
        self.compute_s += time.perf_counter() - t1
        return self._encode_all(sends)

    def peer_lost(self, peer: str) -> list[Outgoing]:
        t0 = time.perf_counter()
        sends = self.role.peer_lost(peer)
        self.compute_s += time.perf_counter() - t0
        return self._encode_all(sends)

    def _check_routing(self, message: Envelope) -> None:
        if message.receiver != self.party_id:
            raise MessageError(party=message.sender, kind=message.kind, field="receiver", expected=repr(self.party_id), got=repr(message.receiver), msg_id=message.msg_id)
        if message.run_id != self.run_id:
            raise MessageError(party=message.sender, kind=message.kind, field="run_id", expected=repr(self.run_id), got=repr(message.run_id), msg_id=message.msg_id)

    def _reject(self, err: MessageError, peer: str, *, about_kind: str | None, about_id: int | None) -> list[Outgoing]:
        self.counters.record_rejected("bad_message")
        self.errors.append(str(err))
        log.warning("%s: %s", self.party_id, err)
        if about_kind == "error":
            return []
        error = Error(code="bad_message", detail=str(err)[:2000], about_kind=about_kind, about_msg_id=about_id)
        t0 = time.perf_counter()
        follow_up = self.role.frame_refused(peer, about_kind)
        self.compute_s += time.perf_counter() - t0
        return self._encode_all([Send(peer, error, reply_to=about_id), *follow_up])

    def _encode_all(self, sends: list[Send]) -> list[Outgoing]:
        return [self._encode(s) for s in sends]

    def _encode(self, send: Send, msg_id: int | None = None) -> Outgoing:
        t0 = time.perf_counter()
        kind = type(send.body).KIND
        if msg_id is None:
            msg_id = self.next_msg_id.get(send.to, 1)
            self.next_msg_id[send.to] = msg_id + 1
        envelope = Envelope(PROTOCOL_VERSION, self.run_id, msg_id, self.party_id, send.to, kind, send.reply_to, send.body)
        frame = encode(envelope)
        self.counters.record_sent(self.party_id, send.to, kind, len(frame))
        self.codec_s += time.perf_counter() - t0
        return Outgoing(send.to, kind, frame)

    def timing(self) -> dict[str, float]:
        return {"compute_s": self.compute_s, "codec_s": self.codec_s}
