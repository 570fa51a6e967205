"""The socket sides of the driver's loop (:mod:`marketplace.transport.sides`, and the shared link's):
where frames to a party go, whom a party sends heartbeats to, when a curator of another run fails a
party's run, and what a session on a shared connection reads and routes, with names and numbers in
and no socket. One test drives a DEALER's loop to check that the loop asks its side after a refusal."""

from __future__ import annotations

from collections import deque

import zmq
from liveness_roles import RUN, AskingCurator, Silent

from marketplace.roles import CURATOR
from marketplace.transport.link_policy import LinkPolicy, PeerState
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.node import Node
from marketplace.transport.shared_link import SharedSide
from marketplace.transport.sides import curator_of_another_run, curator_targets, identity_route
from marketplace.transport.sockets import configure_socket
from marketplace.transport.zmq_driver import dealer_loop

ANOTHER_RUN = (
    "the curator runs another run: its run id is 'yesterday', ours 'today' (another seed, scenario or --run-id?)"
)


# --- the curator's routes --------------------------------------------------------------------------


def test_a_party_is_sent_to_on_the_connection_its_accepted_frames_came_on():
    peer = PeerState("owner-1", route=b"\x00\x01")
    assert identity_route(peer, "owner-1", curve=True) == b"\x00\x01"
    assert identity_route(peer, "owner-1", curve=False) == b"\x00\x01"


def test_before_it_spoke_a_party_is_reached_by_its_name_in_plaintext_and_nowhere_under_curve():
    for peer in (None, PeerState("owner-1"), PeerState("owner-1", closed_at=3.0)):
        assert identity_route(peer, "owner-1", curve=False) == b"owner-1"
        assert identity_route(peer, "owner-1", curve=True) is None


# --- a party's heartbeats and a curator of another run -------------------------------------------------


def test_a_party_sends_heartbeats_to_the_curator_until_it_is_lost():
    assert curator_targets(set()) == [CURATOR]
    assert curator_targets({"owner-2"}) == [CURATOR]
    assert curator_targets({CURATOR}) == []


def test_a_curator_never_heard_from_that_speaks_for_another_run_fails_the_partys_run():
    assert curator_of_another_run({CURATOR: "yesterday"}, None, "today") == ANOTHER_RUN
    contact_only = PeerState(CURATOR, contact=1.0)  # its frames were read, none accepted
    assert curator_of_another_run({CURATOR: "yesterday"}, contact_only, "today") == ANOTHER_RUN


def test_a_curator_already_heard_in_this_run_or_another_partys_run_fails_nothing():
    assert curator_of_another_run({}, None, "today") is None
    assert curator_of_another_run({"owner-2": "yesterday"}, None, "today") is None
    heard = PeerState(CURATOR, heard=1.0, contact=1.0)
    assert curator_of_another_run({CURATOR: "yesterday"}, heard, "today") is None


# --- a session on a shared connection ------------------------------------------------------------


def shared_side(routes: dict[str, bytes]) -> tuple[SharedSide, LinkPolicy, list[tuple[bytes | None, bytes]]]:
    sent: list[tuple[bytes | None, bytes]] = []
    link = LinkPolicy(LinkSettings(), parties=3, now=0.0)
    side = SharedSide(deque(), lambda route, frame: sent.append((route, frame)), routes.get, link)
    return side, link, sent


def test_a_session_reads_its_inbox_in_order_and_says_when_it_is_empty():
    side, _, _ = shared_side({})
    assert side.read() is None and not side.waiting()
    side.inbox.extend([(b"a", "owner-1", b"1"), (b"b", "owner-2", b"2")])
    assert side.waiting()
    assert [side.read(), side.read(), side.read()] == [(b"a", "owner-1", b"1"), (b"b", "owner-2", b"2"), None]


def test_a_session_sends_to_the_route_a_party_spoke_on_else_to_its_control_connection():
    side, link, sent = shared_side({"owner-1": b"ctl-1"})
    assert side.route_of("owner-1") == b"ctl-1"
    assert side.route_of("owner-2") is None  # not connected to the marketplace: unreachable
    link.accepted("owner-1", b"ctl-1b", 2.0)
    assert side.route_of("owner-1") == b"ctl-1b"
    assert side.fast_route(link.peers["owner-1"]) == b"ctl-1b"
    side.send(b"ctl-1b", b"frame")
    assert sent == [(b"ctl-1b", b"frame")]


def test_a_session_sends_no_heartbeat_and_orders_nothing():
    side, link, _ = shared_side({})
    link.accepted("owner-1", b"r", 1.0)
    assert side.heartbeat_targets() == []
    assert not side.answers_first_contact and side.refusal_failure() is None
    outgoing: list = []
    assert side.order(outgoing) is outgoing


# --- the loop asks its side --------------------------------------------------------------------------


class Consumer(Silent):
    party_id = "consumer"
    role_name = "consumer"


def test_a_dealers_loop_fails_its_run_at_a_refused_frame_of_a_curator_of_another_run(zmq_context):
    sock = zmq_context.socket(zmq.DEALER)
    configure_socket(sock, LinkSettings())
    loop = dealer_loop(Node(Consumer(), run_id=RUN, max_message_bytes=1 << 20), sock, LinkSettings())
    frame = Node(AskingCurator(), run_id="yesterday", max_message_bytes=1 << 20).heartbeat("consumer").frame
    loop._handle(b"", CURATOR, frame)
    assert loop.node.role.failure == (
        f"the curator runs another run: its run id is 'yesterday', ours {RUN!r} (another seed, scenario or --run-id?)"
    )
    sock.close(linger=0)


def test_a_dealers_loop_keeps_its_run_when_the_curator_of_its_run_was_heard_first(zmq_context):
    sock = zmq_context.socket(zmq.DEALER)
    configure_socket(sock, LinkSettings())
    loop = dealer_loop(Node(Consumer(), run_id=RUN, max_message_bytes=1 << 20), sock, LinkSettings())
    loop._handle(b"", CURATOR, Node(AskingCurator(), run_id=RUN, max_message_bytes=1 << 20).heartbeat("consumer").frame)
    stranger = Node(AskingCurator(), run_id="yesterday", max_message_bytes=1 << 20).heartbeat("consumer").frame
    loop._handle(b"", CURATOR, stranger)
    assert loop.node.role.failure is None and loop.node.counters.rejected["bad_message"] == 1
    sock.close(linger=0)
