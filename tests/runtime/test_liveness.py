"""Liveness does not depend on compute: a party computing inside its role keeps its connection
(ZeroMQ's ZMTP heartbeats are answered by libzmq's I/O thread), a stopped or killed one loses it and
is declared lost; progress deadlines and lost connections count only once the socket was drained;
the consumer confirms its results before it evaluates them; failure lines name the party at fault
first. The rules are checked on the driver's state (no clock), the mechanism over real processes."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import zmq
from conftest import ROOT
from liveness_roles import PARTIES, PARTY, RUN, AskingCurator, Silent

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope
from marketplace.messages.kinds import Shutdown
from marketplace.protocols.summarize.messages import Summary
from marketplace.roles import CURATOR
from marketplace.runner.blame import at_fault, failure_lines
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.monitor import ConnectionWatch
from marketplace.transport.node import Node
from marketplace.transport.sockets import configure_socket
from marketplace.transport.zmq_driver import SocketLoop, dealer_loop, serve_curator

INTERVAL_S, TIMEOUT_S = 0.1, 0.5


# --- ZMTP heartbeats on every socket ----------------------------------------------------------


def test_every_socket_runs_zmtp_heartbeats_from_the_transport_settings(zmq_context):
    assert zmq.zmq_version_info() >= (4, 2)  # ZMQ_HEARTBEAT_* exist from libzmq 4.2 on
    settings = LinkSettings(heartbeat_interval_s=0.25, heartbeat_timeout_s=1.0)
    for kind in (zmq.ROUTER, zmq.DEALER):
        sock = zmq_context.socket(kind)
        configure_socket(sock, settings)
        assert (sock.get(zmq.HEARTBEAT_IVL), sock.get(zmq.HEARTBEAT_TIMEOUT), sock.get(zmq.HEARTBEAT_TTL)) == (
            250,
            1000,
            0,
        )
        sock.close(linger=0)


# --- connection events ---------------------------------------------------------------------------


def test_a_client_counts_a_closed_link_only_after_its_handshake_succeeded():
    watch = ConnectionWatch("owner-1", "client", "tcp://x:1", 1024)
    watch.on_event(zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, 0)
    watch.on_event(zmq.EVENT_DISCONNECTED, 7)  # a connection that never was one
    assert watch.links_closed == 0
    watch.on_event(zmq.EVENT_HANDSHAKE_SUCCEEDED, 0)
    watch.on_event(zmq.EVENT_DISCONNECTED, 7)
    assert watch.links_closed == 1


def test_the_server_counts_every_closed_connection_since_zeromq_does_not_say_whose():
    watch = ConnectionWatch("curator", "server", "tcp://x:1", 1024)
    watch.on_event(zmq.EVENT_DISCONNECTED, 7)
    watch.on_event(zmq.EVENT_DISCONNECTED, 8)
    assert watch.links_closed == 2


# --- the driver's rules, on its state ------------------------------------------------------------


class Waiting(Silent):
    """A party that expects the curator and waits for a ``summary`` from it."""

    party_id = "consumer"
    role_name = "consumer"

    def awaited(self) -> dict[str, str]:
        return {CURATOR: "the summary"}


@pytest.fixture
def loop(zmq_context):
    sock = zmq_context.socket(zmq.DEALER)
    configure_socket(sock, LinkSettings())
    settings = LinkSettings(
        heartbeat_interval_s=INTERVAL_S,
        heartbeat_timeout_s=TIMEOUT_S,
        progress_timeout_s=10.0,
        start_timeout_s=1e9,
        run_timeout_s=1e9,
    )
    dealer = dealer_loop(Node(Waiting(), run_id=RUN, max_message_bytes=1 << 20), sock, settings)
    dealer.started = 0.0
    yield dealer
    sock.close(linger=0)


def heard_from_curator(loop: SocketLoop, at: float) -> None:
    frame = Node(AskingCurator(), run_id=RUN, max_message_bytes=1 << 20).heartbeat("consumer").frame
    loop.drained_at = 0.0
    loop._handle(b"", CURATOR, frame)
    loop.peers[CURATOR].heard = at


def test_silence_alone_never_loses_a_peer(loop):
    """The curator computing for a thousand heartbeat timeouts sends nothing, but its connection is up."""
    heard_from_curator(loop, at=1.0)
    now = 1.0 + 1000 * TIMEOUT_S
    loop.drained_at = now
    loop._check_liveness(now)
    assert loop.node.role.lost == [] and not loop.lost


def test_a_closed_connection_loses_the_peer_once_the_socket_was_drained_after_it(loop):
    heard_from_curator(loop, at=1.0)
    loop.side.links_closed(2.0)  # what the monitor's disconnect event does
    loop.drained_at = 1.5  # frames of it may still be queued (its bye, say)
    loop._check_liveness(2.1)
    assert not loop.lost
    loop.drained_at = 2.2
    loop._check_liveness(2.2)
    assert loop.node.role.lost and loop.node.role.lost[0][0] == CURATOR
    assert loop.node.role.lost[0][1].startswith(
        "its connection closed: no answer to ZeroMQ heartbeats within heartbeat_timeout_s=0.5"
    )


def test_frames_read_after_the_connection_closed_do_not_bring_the_peer_back(loop):
    """The monitor's event can come before the frames queued ahead of it (here: the very first)."""
    loop.side.links_closed(1.0)
    heard_from_curator(loop, at=1.05)  # sent before the close, read after it
    loop.drained_at = 1.1
    loop._check_liveness(1.1)
    assert [peer for peer, _ in loop.node.role.lost] == [CURATOR]


def test_a_missed_progress_deadline_counts_only_once_the_socket_was_drained_past_it(loop):
    """A party busy for longer than the deadline reads its queue before it drops anyone."""
    heard_from_curator(loop, at=1.0)
    loop._check_progress(1.0)  # the summary is awaited from now on
    loop.drained_at = 1.0
    loop._check_progress(1.0 + 15.0)  # past the deadline, but the answer may be waiting unread
    assert not loop.lost
    loop.drained_at = 1.0 + 15.0
    loop._check_progress(1.0 + 15.0)
    assert loop.node.role.lost == [(CURATOR, "no the summary within progress_timeout_s=10")]


# --- over real processes -------------------------------------------------------------------------


def serve(behaviour: str, seconds: float = 0.0) -> tuple[AskingCurator, dict[str, str], int | None]:
    """The asking curator in this process, the party in a child running ``behaviour``; returns the
    curator's role, the peers its driver lost, and the child's exit status (None: still there)."""
    role = AskingCurator()
    child: list[subprocess.Popen] = []

    def launch(endpoint: str) -> None:
        child.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "tests" / "liveness_roles.py"),
                    endpoint,
                    behaviour,
                    str(seconds),
                    str(INTERVAL_S),
                    str(TIMEOUT_S),
                ],
                cwd=ROOT,
            )
        )

    settings = LinkSettings(
        heartbeat_interval_s=INTERVAL_S,
        heartbeat_timeout_s=TIMEOUT_S,
        progress_timeout_s=600.0,
        start_timeout_s=60.0,
        run_timeout_s=120.0,
    )
    guard = threading.Timer(90.0, lambda: child and child[0].kill())  # a hang guard only, never a measure
    guard.start()
    try:
        stats = serve_curator(
            Node(role, run_id=RUN, max_message_bytes=1 << 20, parties=PARTIES),
            "tcp://127.0.0.1:0",
            settings,
            on_bound=launch,
        )
        try:
            status = child[0].wait(timeout=30) if behaviour == "compute" else child[0].poll()
        except subprocess.TimeoutExpired:
            status = None
    finally:
        guard.cancel()
        for proc in child:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
            proc.wait()
    return role, stats.lost_peers, status


@pytest.mark.slow
def test_a_party_computing_for_eight_heartbeat_timeouts_is_not_lost():
    role, lost, status = serve("compute", seconds=8 * TIMEOUT_S)
    assert lost == {} and role.lost == {}
    assert role.bid is not None and role.bid.value == 0.5  # its answer came, late, and counted
    assert status == 0


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", ["stop", "kill"])
def test_a_stopped_or_killed_party_is_lost_because_its_connection_closes(behaviour):
    """A stopped process's ZeroMQ I/O thread is stopped too: it answers no ZMTP heartbeat, so it is lost
    (not merely slow); a killed one's connection closes at once."""
    role, lost, _ = serve(behaviour)
    assert role.bid is None
    assert set(lost) == {PARTY}
    assert lost[PARTY].startswith(("its connection closed", "unreachable when sending"))


# --- the consumer confirms, then evaluates ------------------------------------------------------


def test_the_consumer_confirms_its_summary_before_it_evaluates_it(tmp_path):
    from conftest import tiny_raw

    from marketplace.parties import build_role, make_world
    from marketplace.scenario import parse_scenario

    config = parse_scenario(tiny_raw(), source="t", base_dir=tmp_path).config
    consumer = build_role(
        config,
        "consumer",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    summary = Summary(X=np.ascontiguousarray(consumer.validation.X[:2], dtype=np.float64), y=np.array([0, 1]), rounds=2)
    assert consumer.handle(Envelope(PROTOCOL_VERSION, "t", 1, CURATOR, "consumer", "summary", None, summary)) == []
    assert consumer.metrics is None  # received and checked, not yet evaluated
    replies = consumer.handle(
        Envelope(PROTOCOL_VERSION, "t", 2, CURATOR, "consumer", "shutdown", None, Shutdown(reason="all rounds done"))
    )
    assert [type(s.body).__name__ for s in replies] == ["Bye"] and consumer.metrics is None
    consumer.finish()  # after the bye has left
    assert consumer.metrics is not None and consumer.metrics["mmd2"] is not None
    assert consumer.result()["summary_size"] == 2


# --- failure lines -------------------------------------------------------------------------------


CLOSING = "all rounds done, but the consumer never confirmed it received the results (lost while closing)"


def test_the_consumers_silence_is_blamed_on_the_consumer_not_on_an_owner():
    lines = failure_lines(
        [
            ("curator", 3, CLOSING),
            ("owner-1", 3, f"the curator ended the run as failed: {CLOSING}"),
            ("owner-4", 3, f"the curator ended the run as failed: {CLOSING}"),
        ]
    )
    assert lines[0].startswith("consumer (according to curator, which exited with status 3): ")
    assert lines[1] == f"owner-1, owner-4 exited with status 3: the curator ended the run as failed: {CLOSING}"


def test_a_party_whose_failure_is_its_own_comes_first():
    lines = failure_lines(
        [
            ("curator", 3, "the consumer was lost (unreachable when sending summary)"),
            ("owner-1", 3, "the curator ended the run as failed: the consumer was lost"),
            ("consumer", -9, "no report (exit status -9)"),
        ]
    )
    assert [line.split(" ", 1)[0] for line in lines] == ["consumer", "consumer", "owner-1"]
    assert lines[0] == "consumer exited with status -9: no report (exit status -9)"


def test_a_lost_curator_is_named_first_by_whoever_lost_it():
    assert at_fault("consumer", "lost contact with curator (its connection closed: ...)") == CURATOR
    assert failure_lines([("consumer", 3, "lost contact with curator (its connection closed)")]) == [
        "curator (according to consumer, which exited with status 3): lost contact with curator (its connection closed)"
    ]
    assert at_fault("owner-2", "run timeout: 600 s elapsed") == "owner-2"
