"""Tests of marketplace.transport.node: frames in, frames out around a sans-I/O role."""

from __future__ import annotations

from typing import Any

import msgpack
import numpy as np
import pytest

from marketplace.messages import PROTOCOL_VERSION, Envelope, ProtocolError, decode, encode
from marketplace.messages.kinds import Bye, Error, Heartbeat
from marketplace.protocols.summarize.messages import Bid, Point, Request
from marketplace.roles import Role, Send
from marketplace.transport.node import Node, Outgoing

RUN = "run-1"
ME = "echo"
PEER = "owner-1"


class EchoRole(Role):
    """Answers every ``bid`` with a ``request`` for the same round, refuses every ``point``,
    and takes anything else silently."""

    party_id = ME
    role_name = "echo"

    def __init__(self) -> None:
        super().__init__()
        self.handled: list[Envelope] = []

    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope) -> list[Send]:
        self.handled.append(message)
        if message.kind == "point":
            raise ProtocolError(party=message.sender, kind="point", reason="echo takes no points")
        if message.kind == "bid":
            return [Send(message.sender, Request(round=message.body.round), reply_to=message.msg_id)]
        return []

    def expected_peers(self) -> tuple[str, ...]:
        return (PEER,)


@pytest.fixture
def role() -> EchoRole:
    return EchoRole()


@pytest.fixture
def node(role: EchoRole) -> Node:
    return Node(role, run_id=RUN, max_message_bytes=1 << 20)


def frame(
    body: Any, msg_id: int, *, sender: str = PEER, receiver: str = ME, run_id: str = RUN, reply_to: int | None = None
) -> bytes:
    return encode(Envelope(PROTOCOL_VERSION, run_id, msg_id, sender, receiver, type(body).KIND, reply_to, body))


def bid(msg_id: int, round_no: int = 1, **kwargs: Any) -> bytes:
    return frame(Bid(round=round_no, value=0.25, available=True), msg_id, **kwargs)


def point(msg_id: int) -> bytes:
    return frame(Point(round=1, x=np.zeros(2), y=0, row=0), msg_id)


def only(outgoing: list[Outgoing]) -> Envelope:
    """The one message the node sent, decoded as its receiver would."""
    assert len(outgoing) == 1
    assert outgoing[0].receiver == PEER
    return decode(outgoing[0].frame, peer=ME)


# --- the normal path ---------------------------------------------------------------------------


def test_valid_frame_reaches_the_role_and_its_reply_answers_it(node: Node, role: EchoRole) -> None:
    reply = only(node.receive(bid(5, round_no=3), PEER))

    assert [m.msg_id for m in role.handled] == [5]
    assert (reply.kind, reply.body, reply.reply_to) == ("request", Request(round=3), 5)
    assert (reply.sender, reply.receiver, reply.run_id) == (ME, PEER, RUN)


def test_replies_carry_increasing_msg_ids_from_one(node: Node) -> None:
    ids = [only(node.receive(bid(n), PEER)).msg_id for n in (1, 2, 3)]

    assert ids == [1, 2, 3]


def test_reply_names_the_msg_id_it_answers(node: Node) -> None:
    replies = [only(node.receive(bid(n), PEER)).reply_to for n in (4, 9)]

    assert replies == [4, 9]


# --- malformed frames --------------------------------------------------------------------------


def test_garbage_frame_is_answered_with_a_bad_message_error(node: Node, role: EchoRole) -> None:
    reply = only(node.receive(b"\xc1not msgpack", PEER))

    assert reply.kind == "error"
    assert reply.body.code == "bad_message"
    assert "field '<frame>'" in reply.body.detail
    assert role.handled == []
    assert node.counters.rejected["bad_message"] == 1


def test_error_reply_names_the_bad_field_and_kind(node: Node) -> None:
    wire = msgpack.unpackb(bid(1))
    wire["body"]["value"] = "lots"

    reply = only(node.receive(msgpack.packb(wire), PEER))

    assert "field 'body.value'" in reply.body.detail
    assert reply.body.about_kind == "bid"


def test_node_keeps_serving_after_a_garbage_frame(node: Node, role: EchoRole) -> None:
    node.receive(b"\x00\x01\x02", PEER)

    reply = only(node.receive(bid(1, round_no=2), PEER))

    assert (reply.kind, reply.body) == ("request", Request(round=2))
    assert [m.msg_id for m in role.handled] == [1]


def test_error_reply_to_an_unknown_kind_is_itself_a_valid_message(node: Node) -> None:
    wire = msgpack.unpackb(bid(1))
    wire["kind"] = "k" * 500

    reply = only(node.receive(msgpack.packb(wire), PEER))

    assert reply.body.code == "bad_message"
    assert reply.body.about_kind is None


def test_malformed_error_frame_gets_no_reply(node: Node, role: EchoRole) -> None:
    wire = msgpack.unpackb(frame(Error(code="refused", detail="no"), 1))
    wire["body"]["code"] = "sulking"

    assert node.receive(msgpack.packb(wire), PEER) == []
    assert node.counters.rejected["bad_message"] == 1
    assert role.errors_received == []


def test_valid_error_frame_reaches_on_error_and_gets_no_reply(node: Node, role: EchoRole) -> None:
    out = node.receive(frame(Error(code="refused", detail="no thanks"), 1), PEER)

    assert out == []
    assert role.errors_received == [{"from": PEER, "code": "refused", "detail": "no thanks"}]


def test_frame_whose_sender_is_not_the_transport_peer_is_refused(node: Node, role: EchoRole) -> None:
    reply = only(node.receive(bid(1, sender="owner-2"), PEER))

    assert reply.body.code == "bad_message"
    assert "field 'sender'" in reply.body.detail
    assert role.handled == []


# --- routing and replays -----------------------------------------------------------------------


def test_duplicate_msg_id_is_ignored_and_counted(node: Node, role: EchoRole) -> None:
    node.receive(bid(1), PEER)

    out = node.receive(bid(1), PEER)

    assert out == []
    assert len(role.handled) == 1
    assert node.counters.rejected["duplicate"] == 1


def test_replayed_older_msg_id_is_ignored(node: Node, role: EchoRole) -> None:
    node.receive(bid(1), PEER)
    node.receive(bid(5), PEER)

    assert node.receive(bid(3), PEER) == []
    assert [m.msg_id for m in role.handled] == [1, 5]
    assert node.counters.rejected["duplicate"] == 1


def test_msg_ids_are_tracked_per_peer(node: Node, role: EchoRole) -> None:
    node.receive(bid(1), PEER)

    node.receive(bid(1, sender="owner-2"), "owner-2")

    assert [m.sender for m in role.handled] == [PEER, "owner-2"]


def test_frame_for_another_receiver_is_refused_naming_the_field(node: Node, role: EchoRole) -> None:
    reply = only(node.receive(bid(1, receiver="curator"), PEER))

    assert reply.body.code == "bad_message"
    assert "field 'receiver'" in reply.body.detail
    assert "'curator'" in reply.body.detail
    assert role.handled == []
    assert node.counters.rejected["bad_message"] == 1


def test_frame_from_another_run_is_refused_naming_the_field(node: Node, role: EchoRole) -> None:
    reply = only(node.receive(bid(1, run_id="run-0"), PEER))

    assert reply.body.code == "bad_message"
    assert "field 'run_id'" in reply.body.detail
    assert role.handled == []


def test_refused_frame_does_not_use_up_its_msg_id(node: Node, role: EchoRole) -> None:
    node.receive(bid(1, run_id="run-0"), PEER)

    only(node.receive(bid(1), PEER))

    assert [m.msg_id for m in role.handled] == [1]


# --- protocol errors from the role -------------------------------------------------------------


def test_protocol_error_from_the_role_becomes_a_protocol_error_reply(node: Node) -> None:
    reply = only(node.receive(point(4), PEER))

    assert reply.kind == "error"
    assert reply.body.code == "protocol"
    assert "echo takes no points" in reply.body.detail
    assert (reply.body.about_kind, reply.body.about_msg_id) == ("point", 4)
    assert node.counters.rejected["protocol"] == 1


def test_role_keeps_serving_after_a_protocol_error(node: Node, role: EchoRole) -> None:
    node.receive(point(1), PEER)

    reply = only(node.receive(bid(2), PEER))

    assert reply.kind == "request"
    assert [m.kind for m in role.handled] == ["point", "bid"]


# --- heartbeats --------------------------------------------------------------------------------


def test_heartbeat_does_not_reach_the_role(node: Node, role: EchoRole) -> None:
    out = node.receive(frame(Heartbeat(), 1), PEER)

    assert out == []
    assert role.handled == []


def test_heartbeat_is_counted_under_its_own_kind(node: Node) -> None:
    hb = frame(Heartbeat(), 1)

    node.receive(hb, PEER)
    node.receive(hb, PEER)

    assert node.counters.received[(PEER, ME, "heartbeat")] == [2, 2 * len(hb)]
    assert node.counters.rejected.get("duplicate", 0) == 0


def test_heartbeat_reusing_the_last_msg_id_does_not_block_the_next_message(node: Node, role: EchoRole) -> None:
    node.receive(bid(1), PEER)
    node.receive(frame(Heartbeat(), 1), PEER)

    only(node.receive(bid(2), PEER))

    assert [m.msg_id for m in role.handled] == [1, 2]


def test_sending_heartbeats_does_not_consume_protocol_msg_ids(node: Node) -> None:
    first = only(node.receive(bid(1), PEER))
    beats = [decode(node.heartbeat(PEER).frame) for _ in range(3)]

    second = only(node.receive(bid(2), PEER))

    assert (first.msg_id, second.msg_id) == (1, 2)
    assert {b.msg_id for b in beats} == {1}
    assert {b.kind for b in beats} == {"heartbeat"}


def test_heartbeat_before_any_message_uses_msg_id_one(node: Node) -> None:
    beat = decode(node.heartbeat(PEER).frame)

    assert beat.msg_id == 1
    assert only(node.receive(bid(1), PEER)).msg_id == 1


def test_sent_heartbeats_are_counted_under_their_own_kind(node: Node) -> None:
    out = node.heartbeat(PEER)
    assert dict(node.counters.sent) == {}  # a frame counts as sent once the driver hands it over
    node.record_sent(out)

    assert out.kind == "heartbeat"
    assert dict(node.counters.sent) == {(ME, PEER, "heartbeat"): [1, len(out.frame)]}


# --- counters ----------------------------------------------------------------------------------


def test_received_counters_record_sender_receiver_kind_and_frame_bytes(node: Node) -> None:
    frames = [bid(1), bid(2, round_no=12345), frame(Bye(), 3)]

    for f in frames:
        node.receive(f, PEER)

    assert dict(node.counters.received) == {
        (PEER, ME, "bid"): [2, len(frames[0]) + len(frames[1])],
        (PEER, ME, "bye"): [1, len(frames[2])],
    }


def test_sent_counters_record_sender_receiver_kind_and_frame_bytes(node: Node) -> None:
    replies = node.receive(bid(1), PEER) + node.receive(point(2), PEER) + node.receive(b"junk", PEER)
    for out in replies:  # what a driver does once a frame has left
        node.record_sent(out)

    assert dict(node.counters.sent) == {
        (ME, PEER, "request"): [1, len(replies[0].frame)],
        (ME, PEER, "error"): [2, len(replies[1].frame) + len(replies[2].frame)],
    }


def test_refused_frames_are_not_counted_as_received(node: Node) -> None:
    node.receive(b"junk", PEER)
    node.receive(bid(1, receiver="curator"), PEER)
    node.receive(bid(1), PEER)
    node.receive(bid(1), PEER)

    assert dict(node.counters.received) == {(PEER, ME, "bid"): [1, len(bid(1))]}
    assert dict(node.counters.rejected) == {"bad_message": 2, "duplicate": 1}


def test_error_reply_points_at_the_refused_message_when_its_id_is_readable(node: Node) -> None:
    reply = only(node.receive(bid(7, receiver="someone-else"), peer=PEER))
    assert reply.kind == "error"
    assert reply.body.about_msg_id == 7 and reply.reply_to == 7


def test_protocol_error_reply_points_at_the_refused_message(node: Node) -> None:
    reply = only(node.receive(point(5), peer=PEER))
    assert reply.body.code == "protocol" and reply.reply_to == 5
