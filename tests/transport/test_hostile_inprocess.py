"""The hostile and broken peers of tests/transport/test_hostile.py, without processes or clocks: what
happens to each (who is dropped, why, what the run still delivers) with every party in this process,
and the driver's answer to a peer that never reads, with a socket that never takes a frame.

When it happens is the link policy's (tests/transport/test_link_policy.py, "hostile peers", with
times given as numbers): a flood is quarantined within refusal_budget + 1 frames, a party that does
not progress is lost at its progress deadline, a reader that does not read at send_timeout_s. A few
real multi-process attacks (test_hostile.py) check that the pieces hold together over ZeroMQ.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest
import zmq
from conftest import tiny_raw
from hostile import hostile_scenario
from hostile_roles import data_with_huge_values, make_hostile

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, encode
from marketplace.messages.kinds import Heartbeat
from marketplace.parties import build_role, make_world, party_ids
from marketplace.roles import Role
from marketplace.scenario import parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.node import Node
from marketplace.transport.sides import RouterSide
from marketplace.transport.zmq_driver import SocketLoop, new_link

RUN = "hostile"


def scenario(**changes) -> dict:
    raw = hostile_scenario(tiny_raw(), rounds=30)
    raw.update(changes)
    return raw


def run(
    raw: dict,
    tmp_path: Path,
    *,
    hostile: dict[str, Callable[[Role], Role]] | None = None,
    other: dict[str, tuple[Callable[[dict], None], str]] | None = None,
) -> tuple[list[Node], object]:
    """The in-process run of ``raw``: ``hostile`` changes a party's role; ``other`` builds a party from
    another configuration (a change to the scenario) and run id."""
    config = parse_scenario(copy.deepcopy(raw), source="s", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    nodes = []
    for party in party_ids(config):
        run_id = RUN
        if other and party in other:
            change, run_id = other[party]
            theirs = copy.deepcopy(raw)
            change(theirs)
            own = parse_scenario(theirs, source="s", base_dir=tmp_path).config
            role = build_role(
                own,
                party,
                world=make_world(own, plugins.exchange(own.protocol)),
                exchange=plugins.exchange(own.protocol),
            )
        else:
            role = build_role(config, party, world=world, exchange=plugins.exchange(config.protocol))
        if hostile and party in hostile:
            role = hostile[party](role)
        nodes.append(Node(role, run_id=run_id, max_message_bytes=1 << 26))
    stats = run_inprocess(nodes)
    return nodes, stats


# --- a party that stops progressing (the deadline that drops it: test_link_policy.py) -----------------


@pytest.mark.parametrize(
    "behaviour, reason",
    [
        ("never_bids", "no a bid for round 1 (nothing left to deliver)"),
        ("refuses_target", "refused the curator's 'target_embedding'"),
        ("bye_mid_round", "no a bid for round 2 (nothing left to deliver)"),
        ("nan_bids", "sent a bid that could not be read"),
    ],
)
def test_a_party_that_stops_progressing_is_dropped_with_the_reason_and_the_others_finish(tmp_path, behaviour, reason):
    change = data_with_huge_values if behaviour == "nan_bids" else (lambda role: make_hostile(role, behaviour))
    nodes, _ = run(scenario(), tmp_path, hostile={"owner-2": change})
    result = nodes[0].role.result()
    assert result["end_reason"] == "all rounds done" and result["rounds_completed"] == 30
    assert list(result["dropouts"]) == ["owner-2"] and reason in result["dropouts"]["owner-2"]["reason"]
    assert {owner for owner, _, _ in result["selection"]} <= {"owner-1", "owner-3", "consumer"}
    if behaviour == "bye_mid_round":  # the unasked bye was refused: liveness goes on for it
        assert "no shutdown was sent to this party" in result["dropouts"]["owner-2"]["reason"]


# --- a party of another configuration ---------------------------------------------------------------


def another_seed(raw: dict) -> None:
    raw["seed"] = 12


def other_features(raw: dict) -> None:
    raw["summarize"]["features"] = 31


def same(raw: dict) -> None:
    pass


@pytest.mark.parametrize(
    "change, run_id, reason",
    [
        (
            another_seed,
            RUN,
            "refused at hello: its scenario differs from the curator's in seed (curator: 11, this party: 12)",
        ),
        (other_features, RUN, "refused at hello: its scenario differs from the curator's in summarize section"),
        (same, "another-run", "another seed, scenario or --run-id?"),
    ],
)
def test_an_owner_of_another_configuration_is_dropped_naming_what_differs_and_the_run_completes(
    tmp_path, change, run_id, reason
):
    """At its hello when its fingerprint differs (round 0, nothing waited for); a run id of another run
    makes every frame of it refused, so it never says hello: dropped as one that does not progress."""
    nodes, _ = run(scenario(), tmp_path, other={"owner-2": (change, run_id)})
    result = nodes[0].role.result()
    assert result["end_reason"] == "all rounds done" and list(result["dropouts"]) == ["owner-2"]
    dropout = result["dropouts"]["owner-2"]
    assert dropout["round"] == 0 and reason in dropout["reason"], dropout
    assert next(n for n in nodes if n.party_id == "owner-2").role.failure  # it was told, and says so


def test_a_consumer_of_another_configuration_fails_the_run_at_its_hello_naming_what_differs(tmp_path):
    nodes, _ = run(scenario(), tmp_path, other={"consumer": (another_seed, RUN)})
    curator = nodes[0].role
    assert curator.failure.startswith("the consumer was refused at hello")
    assert "seed (curator: 11, this party: 12)" in curator.failure
    assert curator.result()["rounds_completed"] == 0  # at once: not a round was opened
    assert all(node.done and node.role.failure for node in nodes)


# --- strangers and readers that never read, at the curator's driver ----------------------------------


class StuckRouter(RouterSide):
    """The curator's side of a socket that takes every frame but those for the routes in ``stuck``
    (their readers never read: ZeroMQ answers EAGAIN)."""

    def __init__(self, sock: zmq.Socket, node: Node, link) -> None:
        super().__init__(sock, node, link, curve=False)
        self.stuck: set[bytes] = set()
        self.wire: list[tuple[bytes | None, bytes]] = []

    def send(self, route: bytes | None, frame: bytes) -> None:
        if route in self.stuck:
            raise zmq.Again()
        self.wire.append((route, frame))


@pytest.fixture
def curator_loop(tmp_path, zmq_context):
    config = parse_scenario(scenario(), source="s", base_dir=tmp_path).config
    node = Node(
        build_role(
            config,
            "curator",
            world=make_world(config, plugins.exchange(config.protocol)),
            exchange=plugins.exchange(config.protocol),
        ),
        run_id=RUN,
        max_message_bytes=1 << 26,
    )
    sock = zmq_context.socket(zmq.ROUTER)
    link = new_link(node, LinkSettings(refusal_budget=10**9))
    loop = SocketLoop(node, StuckRouter(sock, node, link), link, sock)
    yield loop
    sock.close(linger=0)


def beat_from(sender: str, msg_id: int) -> bytes:
    return encode(Envelope(PROTOCOL_VERSION, RUN, msg_id, sender, "curator", Heartbeat.KIND, None, Heartbeat()))


def test_error_replies_to_a_connection_that_never_reads_are_dropped_never_queued(curator_loop):
    """A stranger sending refused frames and reading none of the error replies: every reply is
    dropped at once (counted), nothing waits in a queue, nobody is lost."""
    curator_loop.side.stuck.add(b"\x00mallory")
    for _ in range(1000):
        curator_loop._handle(b"\x00mallory", None, b"\xc1")
    stats = curator_loop.stats
    assert stats.replies_dropped == 1000 and not curator_loop.backlog and not curator_loop.lost
    assert curator_loop.side.wire == []


def test_a_strangers_valid_heartbeats_are_refused_and_make_nobody_known(curator_loop):
    """Plaintext: a routing id that is no party of the run reads as an unidentified connection;
    heartbeats claiming to be a party from it are refused too (its identity is not that party's)."""
    for i in range(1, 101):
        curator_loop._handle(b"mallory", None, beat_from("mallory", i))
        curator_loop._handle(b"mallory", None, beat_from("owner-1", i))
    assert curator_loop.peers == {} and curator_loop.stats.arrivals == 0
    assert curator_loop.node.counters.rejected["bad_message"] == 200
