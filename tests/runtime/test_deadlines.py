"""Progress deadlines that grow with the work a step declares (docs/reliability.md, "Progress
deadlines under load"): the arithmetic and its refusals, the pfds curator's declared scale, and the
driver's rule on its state with times given (no clock): a slow step gets its longer deadline, a
stuck party is still dropped at it, and never later than ``run_timeout_s``."""

from __future__ import annotations

import math

import pytest
import zmq
from conftest import ROOT
from liveness_roles import RUN, AskingCurator, Silent

from marketplace.messages import Envelope
from marketplace.protocols.pfds.curator import RELEASES_PER_STEP, PfdsCurator
from marketplace.roles import CURATOR, Role, Send, owner_id
from marketplace.scenario import ScenarioError, load_scenario
from marketplace.transport.deadlines import missed_text, step_deadline
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.node import Node
from marketplace.transport.sockets import configure_socket
from marketplace.transport.zmq_driver import SocketLoop, dealer_loop

# --- the arithmetic ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "scale", "cap", "expected"),
    [
        (30.0, 1.0, 1800.0, 30.0),
        (30.0, 10.0, 1800.0, 300.0),
        (30.0, 2.5, 1800.0, 75.0),
        (30.0, 1000.0, 1800.0, 1800.0),  # capped at the run's timeout
        (30.0, 10.0, 20.0, 30.0),  # a cap below the base never shortens the base deadline
        (30, 3, 1800, 90),
    ],
)
def test_a_step_gets_the_base_deadline_times_its_scale_at_most_the_cap(base, scale, cap, expected):
    assert step_deadline(base, scale, cap) == expected


@pytest.mark.parametrize(
    ("base", "scale", "cap", "field"),
    [
        (30.0, math.nan, 1800.0, "scale"),
        (30.0, math.inf, 1800.0, "scale"),
        (30.0, 0.5, 1800.0, "scale"),
        (30.0, -3.0, 1800.0, "scale"),
        (30.0, True, 1800.0, "scale"),
        (30.0, "10", 1800.0, "scale"),
        (30.0, None, 1800.0, "scale"),
        (0.0, 2.0, 1800.0, "base_s"),
        (-1.0, 2.0, 1800.0, "base_s"),
        (math.nan, 2.0, 1800.0, "base_s"),
        (30.0, 2.0, math.inf, "cap_s"),
        (30.0, 2.0, 0, "cap_s"),
    ],
)
def test_bad_deadline_arguments_are_refused_naming_the_argument_and_the_value(base, scale, cap, field):
    with pytest.raises(ValueError) as err:
        step_deadline(base, scale, cap)
    text = str(err.value)
    assert f"{field} must be" in text and repr(locals()[{"base_s": "base", "cap_s": "cap"}.get(field, field)]) in text


def test_the_reason_keeps_the_plain_wording_without_a_scale_and_states_the_scale_with_one():
    assert missed_text("bye", 30.0, 1.0, 30.0) == "no bye within progress_timeout_s=30"
    assert missed_text("its labelled records (pfds_data)", 30.0, 10.0, 300.0) == (
        "no its labelled records (pfds_data) within 300 s (progress_timeout_s=30 x 10 for this step's declared work)"
    )


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_scenario_with_a_bad_progress_timeout_is_refused_naming_the_field(value):
    with pytest.raises(ScenarioError) as err:
        load_scenario(ROOT / "scenarios" / "quickstart.yaml", [f"transport.progress_timeout_s={value}"])
    assert "progress_timeout_s" in str(err.value)


# --- what the pfds curator declares -----------------------------------------------------------


def pfds_curator(sharers: int) -> PfdsCurator:
    return PfdsCurator(scenario_name="t", sharers=tuple(owner_id(i) for i in range(sharers)), schema=None)


def test_the_pfds_curator_scales_round_2_and_the_closing_with_the_sharers_it_forwarded():
    curator = pfds_curator(100)
    assert curator.progress_scale("owner-1") == 1.0  # round 1: a sharer grows its own tree, whatever K
    curator.phase, curator.voters = "data", list(curator.sharers)
    assert curator.progress_scale("owner-1") == 100 / RELEASES_PER_STEP
    curator.voters = curator.voters[:3]  # fewer releases than the reference step: the base deadline
    assert curator.progress_scale("owner-1") == 1.0
    curator.phase, curator.datasets = "closing", {s: object() for s in curator.sharers[:40]}
    assert curator.progress_scale("consumer") == 40 / RELEASES_PER_STEP


def test_other_roles_keep_the_base_deadline():
    assert AskingCurator().progress_scale("owner-1") == 1.0


# --- the driver's rule, on its state ----------------------------------------------------------


class Stuck(Role):
    """A party waiting for the curator's answer to a step the scenario declares ``scale`` times the
    reference size; the curator never answers (it is stuck)."""

    party_id = "consumer"
    role_name = "consumer"

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale
        self.lost: list[tuple[str, str]] = []
        self.asked = 0

    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope) -> list[Send]:
        return []

    def awaited(self) -> dict[str, str]:
        return {CURATOR: "the release"}

    def progress_scale(self, peer: str) -> float:
        self.asked += 1
        return self.scale

    def peer_lost(self, peer: str, reason: str = "") -> list[Send]:
        self.lost.append((peer, reason))
        return []


@pytest.fixture
def make_loop(zmq_context):
    made = []

    def make(scale: float, run_timeout_s: float = 1e9) -> SocketLoop:
        sock = zmq_context.socket(zmq.DEALER)
        configure_socket(sock, LinkSettings())
        settings = LinkSettings(
            heartbeat_interval_s=0.1,
            heartbeat_timeout_s=0.5,
            progress_timeout_s=10.0,
            start_timeout_s=1e9,
            run_timeout_s=run_timeout_s,
        )
        loop = dealer_loop(Node(Stuck(scale), run_id=RUN, max_message_bytes=1 << 20), sock, settings)
        loop.started = 0.0
        frame = Node(AskingCurator(), run_id=RUN, max_message_bytes=1 << 20).heartbeat("consumer").frame
        loop._handle(b"", CURATOR, frame)  # the curator is connected
        made.append(sock)
        return loop

    yield make
    for sock in made:
        sock.close(linger=0)


def check(loop: SocketLoop, at: float) -> list[tuple[str, str]]:
    loop.drained_at = at  # the socket was read up to now: nothing the party sent is waiting unread
    loop._check_progress(at)
    return loop.node.role.lost


def test_a_step_declared_ten_times_the_reference_gets_ten_times_the_deadline_and_a_stuck_party_is_still_dropped(
    make_loop,
):
    loop = make_loop(scale=10.0)
    check(loop, 1.0)  # the wait starts
    assert check(loop, 1.0 + 15.0) == []  # past the base deadline: a fixed deadline would have dropped it here
    assert check(loop, 1.0 + 99.0) == []
    assert check(loop, 1.0 + 101.0) == [
        (CURATOR, "no the release within 100 s (progress_timeout_s=10 x 10 for this step's declared work)")
    ]
    assert loop.node.role.asked == 1  # the scale is fixed when the wait starts


def test_a_reference_step_keeps_the_base_deadline(make_loop):
    loop = make_loop(scale=1.0)
    check(loop, 1.0)
    assert check(loop, 1.0 + 9.0) == []
    assert check(loop, 1.0 + 11.0) == [(CURATOR, "no the release within progress_timeout_s=10")]


def test_no_declared_scale_keeps_a_stuck_party_beyond_run_timeout(make_loop):
    loop = make_loop(scale=1e6, run_timeout_s=50.0)
    check(loop, 1.0)
    assert check(loop, 1.0 + 49.0) == []
    assert [peer for peer, _ in check(loop, 1.0 + 51.0)] == [CURATOR]


def test_a_bad_scale_from_a_role_is_refused_not_taken_as_no_deadline(make_loop):
    loop = make_loop(scale=math.nan)
    with pytest.raises(ValueError, match="scale must be a finite number of at least 1, got nan"):
        check(loop, 1.0)


def test_the_curators_driver_gives_pfds_round_2_of_100_sharers_ten_deadlines_and_then_drops_a_stuck_sharer(
    zmq_context,
):
    """The real pfds curator under the curator's driver: 100 sharers in round 2, one of which never
    sends its records; the others delivered. Dropped at ten times the base deadline, not before."""
    from marketplace.transport.link_policy import PeerState
    from marketplace.transport.zmq_driver import router_loop

    curator = pfds_curator(100)
    curator.present = {*curator.sharers, "consumer"}
    curator.phase, curator.voters = "data", list(curator.sharers)
    curator.datasets = {s: object() for s in curator.sharers[1:]}  # everyone but owner-1 delivered
    sock = zmq_context.socket(zmq.ROUTER)
    configure_socket(sock, LinkSettings())
    settings = LinkSettings(
        heartbeat_interval_s=0.1,
        heartbeat_timeout_s=0.5,
        progress_timeout_s=10.0,
        start_timeout_s=1e9,
        run_timeout_s=1e9,
    )
    loop = router_loop(Node(curator, run_id=RUN, max_message_bytes=1 << 20), sock, settings)
    loop.peers["owner-1"] = PeerState("owner-1", contact=0.0, heard=0.0)
    dropped: list[tuple[str, str]] = []
    loop.lose = lambda party, reason: dropped.append((party, reason))
    for at in (1.0, 1.0 + 15.0, 1.0 + 99.0):
        loop.drained_at = at
        loop._check_progress(at)
    assert dropped == []
    loop.drained_at = 1.0 + 101.0
    loop._check_progress(1.0 + 101.0)
    assert dropped == [
        (
            "owner-1",
            "no its labelled records (pfds_data) within 100 s (progress_timeout_s=10 x 10 "
            "for this step's declared work)",
        )
    ]


class Gathering(Silent):
    """A curator waiting for the hellos of three owners and the consumer."""

    party_id = CURATOR
    role_name = "curator"

    def expected_peers(self) -> tuple[str, ...]:
        return ("owner-1", "owner-2", "owner-3", "consumer")


def test_the_start_deadline_counts_from_the_last_arrival_so_slow_handshakes_are_waited_for(zmq_context):
    """Parties arriving one every 0.8 start deadlines keep the wait going (thousands of CURVE
    handshakes queue up like this); one that never comes is lost a start deadline after the last
    arrival, not before."""
    from marketplace.transport.zmq_driver import router_loop

    sock = zmq_context.socket(zmq.ROUTER)
    configure_socket(sock, LinkSettings())
    settings = LinkSettings(heartbeat_interval_s=0.1, heartbeat_timeout_s=0.5, start_timeout_s=10.0, run_timeout_s=1e9)
    loop = router_loop(Node(Gathering(), run_id=RUN, max_message_bytes=1 << 20), sock, settings)
    loop.started = loop.last_arrival = 0.0
    sender = Node(AskingCurator(), run_id=RUN, max_message_bytes=1 << 20)
    for at, party in ((8.0, "consumer"), (16.0, "owner-1"), (24.0, "owner-2")):
        loop._check_liveness(at)
        assert loop.node.role.lost == [], at
        sender.party_id = party
        frame = sender.heartbeat(CURATOR).frame
        before = loop.last_arrival
        loop._handle(party.encode(), party, frame)  # its first accepted frame (stamped with the real clock)
        assert loop.last_arrival != before, "a first accepted frame is an arrival"
        loop.peers[party].heard = loop.last_arrival = at  # on this test's clock
    loop._check_liveness(33.9)
    assert loop.node.role.lost == []
    loop._check_liveness(34.1)
    assert [p for p, _ in loop.node.role.lost] == ["owner-3"]
    assert (
        "never connected within start_timeout_s=10 (the last party arrived 24.0 s after the start)"
        in loop.node.role.lost[0][1]
    )
