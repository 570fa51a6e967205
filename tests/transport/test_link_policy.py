"""The ZeroMQ driver's link policy without sockets: every rule with times given as numbers.

Liveness comes from the connection (silence loses nobody; a closed connection does, once the
socket was drained past the close), a party never heard from is lost a start deadline after the
last arrival, a missed progress deadline counts once the socket was drained past it, heartbeats go
only where nothing went lately, a flood of refused frames quarantines its connection, and a send
queue is bounded in length and in time.
"""

from __future__ import annotations

import math

import pytest

from marketplace.transport.link_policy import MAX_CONNECTIONS, LinkPolicy
from marketplace.transport.link_settings import DriverStats, LinkSettings
from marketplace.transport.quarantine import Quarantine
from marketplace.transport.send_queues import SendQueues

SETTINGS = LinkSettings(
    heartbeat_interval_s=0.5,
    heartbeat_timeout_s=5.0,
    start_timeout_s=30.0,
    run_timeout_s=600.0,
    progress_timeout_s=10.0,
    send_timeout_s=5.0,
    max_queued_frames=3,
    refusal_budget=4,
    quarantine_s=2.0,
)
CLOSED = (
    "its connection closed: no answer to ZeroMQ heartbeats within heartbeat_timeout_s=5 "
    "(a stopped or dead process, or a broken network)"
)


def policy(**changes: float) -> LinkPolicy:
    """A policy started at t=0 for a run of three parties."""
    settings = LinkSettings(**{**SETTINGS.__dict__, **changes})
    return LinkPolicy(settings, parties=3, now=0.0)


def heard(link: LinkPolicy, party: str, at: float, route: bytes | None = None) -> bool:
    """``party``'s frame arrived on ``route`` at ``at`` and the node accepted it."""
    route = party.encode() if route is None else route
    assert link.quarantine.admit(route, party, at) is not None
    return link.accepted(party, route, at)


def liveness(link: LinkPolicy, at: float, expected=("owner-1",), finished=(), refusals=None) -> list[tuple[str, str]]:
    return list(link.liveness_losses(at, expected, set(finished), refusals or {}))


def progress(link: LinkPolicy, at: float, wanted: dict[str, str], scale: float = 1.0, refusals=None):
    return list(link.progress_losses(at, wanted, lambda party: scale, refusals or {}))


# --- liveness ------------------------------------------------------------------------------------


def test_a_silent_peer_whose_connection_is_up_is_never_lost():
    """A party computing inside its role sends nothing, but libzmq answers its ZMTP heartbeats, so its
    connection stays up: a thousand heartbeat timeouts of silence lose nobody."""
    link = policy()
    heard(link, "owner-1", at=1.0)
    link.drained(5000.0)
    assert liveness(link, 5000.0) == []


def test_a_closed_connection_loses_the_peer_once_the_socket_was_drained_after_the_close():
    link = policy()
    heard(link, "owner-1", at=1.0)
    link.connection_closed("owner-1", 2.0, b"owner-1")
    link.drained(1.5)  # read until empty before the close: its bye may still be waiting unread
    assert liveness(link, 2.1) == []
    link.drained(2.2)
    assert liveness(link, 2.2) == [("owner-1", CLOSED)]


def test_a_closed_connection_under_a_flood_that_never_drains_loses_the_peer_a_heartbeat_timeout_later():
    link = policy()
    heard(link, "owner-1", at=1.0)
    link.connection_closed("owner-1", 2.0, b"owner-1")
    assert liveness(link, 2.0 + 5.0) == []  # exactly the timeout: not yet
    assert liveness(link, 2.0 + 5.01) == [("owner-1", CLOSED)]


def test_frames_read_after_the_close_on_the_closed_route_do_not_bring_the_peer_back_but_a_new_connection_does():
    link = policy()
    heard(link, "owner-1", at=1.0, route=b"r1")
    link.connection_closed("owner-1", 2.0, b"r1")
    heard(link, "owner-1", at=2.1, route=b"r1")  # queued before the close, read after it
    link.drained(2.2)
    assert [party for party, _ in liveness(link, 2.2)] == ["owner-1"]
    heard(link, "owner-1", at=2.3, route=b"r2")  # it reconnected
    assert liveness(link, 2.4) == []
    assert link.peers["owner-1"].route == b"r2"


def test_a_peer_whose_bye_was_taken_or_that_is_already_lost_is_not_judged_again():
    link = policy()
    heard(link, "owner-1", at=1.0)
    heard(link, "owner-2", at=1.0)
    link.connection_closed("owner-1", 2.0, b"owner-1")
    link.connection_closed("owner-2", 2.0, b"owner-2")
    link.drained(3.0)
    assert link.lose("owner-2", "for a test")
    assert liveness(link, 3.0, expected=("owner-1", "owner-2"), finished={"owner-1"}) == []


def test_the_losses_are_decided_one_at_a_time_so_a_loss_acted_on_first_is_seen_by_the_next():
    link = policy()
    for party in ("owner-1", "owner-2"):
        heard(link, party, at=1.0)
        link.connection_closed(party, 2.0, party.encode())
    link.drained(3.0)
    judged = []
    for party, reason in link.liveness_losses(3.0, ("owner-1", "owner-2"), set(), {}):
        judged.append(party)
        link.lose(party, reason)
        link.lose("owner-2", "lost while owner-1's loss was acted on")
    assert judged == ["owner-1"]
    assert link.stats.lost_peers == {"owner-1": CLOSED, "owner-2": "lost while owner-1's loss was acted on"}


def test_a_party_never_heard_from_is_lost_a_start_deadline_after_the_last_arrival():
    link = policy()
    for at, party in ((20.0, "consumer"), (40.0, "owner-2")):
        assert liveness(link, at, expected=("owner-1",)) == []
        heard(link, party, at=at)
    assert link.stats.arrivals == 2 and link.stats.last_arrival_s == 40.0
    assert liveness(link, 70.0) == []
    refusals = {"owner-1": "bad signature"}
    assert liveness(link, 70.1, refusals=refusals) == [
        (
            "owner-1",
            (
                "never connected within start_timeout_s=30 (the last party arrived 40.0 s after the start); "
                "it sent only refused frames (the last: bad signature)"
            ),
        )
    ]


def test_refused_frames_connect_nobody():
    """A frame read but refused is contact (its progress deadline may start) but not an arrival: the
    party has no route, is no heartbeat target, and the start deadline still applies to it."""
    link = policy()
    conn = link.quarantine.admit(b"r1", "owner-1", 1.0)
    assert link.refused(conn, 1.0, "owner-1") is False  # read, then refused by the node
    assert link.peers["owner-1"].contact == 1.0 and link.peers["owner-1"].heard is None
    assert link.open_peers(set()) == [] and link.stats.arrivals == 0
    assert [party for party, _ in liveness(link, 30.1)] == ["owner-1"]


def test_only_the_first_route_of_a_party_is_a_first_contact():
    link = policy()
    assert heard(link, "owner-1", at=1.0, route=b"r1") is True
    assert heard(link, "owner-1", at=2.0, route=b"r1") is False
    assert heard(link, "owner-1", at=3.0, route=b"r2") is False  # moved, not new
    assert link.stats.arrivals == 1


def test_the_run_fails_once_run_timeout_passed():
    link = policy(run_timeout_s=100.0)
    assert link.run_timeout(100.0) is None
    assert link.run_timeout(100.5) == "run timeout: 100 s elapsed"


# --- heartbeats ----------------------------------------------------------------------------------


def test_a_heartbeat_round_skips_peers_sent_a_frame_within_an_interval_and_sets_the_next_round():
    link = policy()
    link.start(0.0)
    heard(link, "owner-1", at=0.1)
    heard(link, "owner-2", at=0.1)
    link.sent("owner-1", 0.8)
    assert link.heartbeat_due(1.0)
    assert list(link.heartbeats(1.0, ["owner-1", "owner-2"])) == ["owner-2"]
    assert not link.heartbeat_due(1.49) and link.heartbeat_due(1.5) and link.next_timer() == 0.0  # checks due since 0
    link.checked(1.0, 0.05)
    assert link.next_timer() == 1.05


def test_after_a_connection_nobody_can_name_closed_the_next_round_goes_to_every_target():
    link = policy()
    for party in ("owner-1", "owner-2"):
        heard(link, party, at=0.1)
        link.sent(party, 0.9)
    link.unnamed_connection_closed()
    assert list(link.heartbeats(1.0, ["owner-1", "owner-2"])) == ["owner-1", "owner-2"]
    assert list(link.heartbeats(1.2, ["owner-1", "owner-2"])) == []  # one round only


def test_an_unreachable_heartbeat_closes_the_connection_it_went_to_only_if_it_is_still_the_partys():
    link = policy()
    heard(link, "owner-1", at=0.1, route=b"r1")
    heard(link, "owner-1", at=0.2, route=b"r2")  # it reconnected: r1 is stale
    link.heartbeat_unreachable("owner-1", b"r1", 1.0)
    assert link.peers["owner-1"].closed_at is None and link.open_peers(set()) == ["owner-1"]
    link.heartbeat_unreachable("owner-1", b"r2", 1.0)
    assert link.peers["owner-1"].closed_at == 1.0 and link.open_peers(set()) == []


def test_heartbeat_targets_are_open_routes_neither_lost_nor_finished():
    link = policy()
    for party in ("owner-1", "owner-2", "owner-3", "consumer"):
        heard(link, party, at=0.1)
    link.lose("owner-2", "for a test")
    link.connection_closed("owner-3", 0.5, b"owner-3")
    assert link.open_peers({"consumer"}) == ["owner-1"]


# --- progress deadlines --------------------------------------------------------------------------


def test_a_party_that_misses_its_progress_deadline_is_lost_once_the_socket_was_drained_past_it():
    link = policy()
    heard(link, "owner-1", at=1.0)
    wanted = {"owner-1": "bid"}
    assert progress(link, 1.0, wanted) == []  # the wait starts
    link.drained(1.0)
    assert progress(link, 11.0, wanted) == []  # exactly the deadline
    assert progress(link, 15.0, wanted) == []  # past it, but its bid may wait unread
    link.drained(15.0)
    assert progress(link, 15.0, wanted, refusals={"owner-1": "stale round"}) == [
        ("owner-1", "no bid within progress_timeout_s=10 (its last refused frame: stale round)")
    ]


def test_a_missed_deadline_counts_without_a_drain_once_twice_the_deadline_passed():
    link = policy()
    heard(link, "owner-1", at=1.0)
    progress(link, 1.0, {"owner-1": "bid"})
    assert progress(link, 21.0, {"owner-1": "bid"}) == []
    assert [party for party, _ in progress(link, 21.1, {"owner-1": "bid"})] == ["owner-1"]


def test_a_declared_scale_lengthens_the_deadline_is_asked_once_and_is_capped_by_the_run_timeout():
    link = policy(run_timeout_s=50.0)
    heard(link, "owner-1", at=0.0)
    asked = []

    def scale_of(party: str) -> float:
        asked.append(party)
        return 10.0

    link.drained(1e9)
    assert list(link.progress_losses(1.0, {"owner-1": "records"}, scale_of, {})) == []
    assert list(link.progress_losses(50.9, {"owner-1": "records"}, scale_of, {})) == []
    assert list(link.progress_losses(51.1, {"owner-1": "records"}, scale_of, {})) == [
        ("owner-1", "no records within 50 s (progress_timeout_s=10 x 10 for this step's declared work)")
    ]
    assert asked == ["owner-1"]


def test_a_new_step_restarts_the_wait_and_a_delivered_one_ends_it():
    link = policy()
    heard(link, "owner-1", at=0.0)
    link.drained(1e9)
    progress(link, 0.0, {"owner-1": "bid"})
    assert progress(link, 8.0, {"owner-1": "point"}) == []  # the bid came; now a point is awaited, from 8
    assert progress(link, 17.0, {"owner-1": "point"}) == []
    assert progress(link, 17.0, {}) == [] and link.awaiting == {}
    assert progress(link, 30.0, {"owner-1": "point"}) == []  # a fresh wait, from 30


def test_no_progress_deadline_before_contact_nor_for_a_lost_party():
    link = policy()
    link.drained(1e9)
    assert progress(link, 0.0, {"owner-1": "bid"}) == [] and progress(link, 100.0, {"owner-1": "bid"}) == []
    heard(link, "owner-2", at=0.0)
    progress(link, 0.0, {"owner-2": "bid"})
    link.lose("owner-2", "its connection closed")
    assert progress(link, 100.0, {"owner-2": "bid"}) == [] and link.awaiting == {}


def test_a_bad_scale_is_refused_rather_than_taken_as_no_deadline():
    link = policy()
    heard(link, "owner-1", at=0.0)
    with pytest.raises(ValueError, match="scale must be a finite number of at least 1, got nan"):
        progress(link, 1.0, {"owner-1": "bid"}, scale=math.nan)


def test_losing_a_party_forgets_its_queue_and_deadline_and_happens_once():
    stats = DriverStats()
    link = LinkPolicy(SETTINGS, parties=3, now=0.0, stats=stats)
    heard(link, "owner-1", at=0.0)
    progress(link, 0.0, {"owner-1": "bid"})
    assert link.queues.push("owner-1", b"frame", 0.5) is None
    assert link.lose("owner-1", "first reason") is True
    assert link.lose("owner-1", "second reason") is False
    assert stats.lost_peers == {"owner-1": "first reason"} and link.lost == {"owner-1"}
    assert link.awaiting == {} and not link.queues.holds("owner-1")


# --- quarantine ----------------------------------------------------------------------------------


def test_more_refusals_than_the_budget_within_a_second_quarantine_the_connection_for_quarantine_s():
    dropped: dict[str, int] = {}
    quarantine = Quarantine(refusal_budget=4, quarantine_s=2.0, max_connections=10, dropped=dropped)
    conn = quarantine.admit(b"r1", "owner-1", 10.0)
    assert [quarantine.refused(conn, 10.0 + i / 8) for i in range(5)] == [False, False, False, False, True]
    assert quarantine.admit(b"r1", "owner-1", 10.5) is None and quarantine.admit(b"r1", "owner-1", 12.49) is None
    assert dropped == {"owner-1": 2}
    assert quarantine.admit(b"r1", "owner-1", 12.5) is conn  # quarantine_s after the refusal that started it, at 10.5
    assert not quarantine.refused(conn, 12.5)  # a new window: one refusal


def test_the_budget_per_second_is_not_a_quarantine():
    quarantine = Quarantine(refusal_budget=4, quarantine_s=2.0, max_connections=10)
    conn = quarantine.admit(b"r1", "owner-1", 0.0)
    for second in range(5):  # four a second, for five seconds
        assert not any(quarantine.refused(conn, second * 1.01 + i / 100) for i in range(4))
    assert quarantine.admit(b"r1", "owner-1", 6.0) is conn


def test_quarantine_is_per_connection_so_a_second_connection_cannot_silence_a_partys_own():
    link = policy()
    own = link.quarantine.admit(b"own", "owner-1", 1.0)
    squatter = link.quarantine.admit(b"squatter", "owner-1", 1.0)
    assert any(link.refused(squatter, 1.0, "owner-1") for _ in range(5))
    assert link.quarantine.admit(b"squatter", "owner-1", 1.1) is None
    assert link.quarantine.admit(b"own", "owner-1", 1.1) is own
    assert link.stats.quarantined == {"owner-1": 1}


def test_a_connection_of_unknown_identity_is_named_by_its_route():
    quarantine = Quarantine(refusal_budget=4, quarantine_s=2.0, max_connections=10)
    assert quarantine.admit(b"\x00abc", None, 0.0).name == "unidentified connection b'\\x00abc'"


def test_the_least_recently_heard_connection_is_forgotten_first():
    quarantine = Quarantine(refusal_budget=0, quarantine_s=2.0, max_connections=2)
    first = quarantine.admit(b"r1", "owner-1", 1.0)
    quarantine.refused(first, 1.0)  # quarantined
    quarantine.admit(b"r2", "owner-2", 1.1)
    assert quarantine.admit(b"r1", "owner-1", 1.2) is None  # heard again (dropped unread): now the most recent
    quarantine.admit(b"r3", "owner-3", 1.3)
    assert list(quarantine.connections) == [b"r1", b"r3"]
    assert quarantine.admit(b"r1", "owner-1", 1.5) is None
    assert quarantine.admit(b"r2", "owner-2", 1.5) is not None  # forgotten, made anew


def test_the_quarantine_table_holds_two_connections_per_party_beyond_the_fixed_allowance():
    assert LinkPolicy(SETTINGS, parties=10_000, now=0.0).quarantine.max_connections == MAX_CONNECTIONS + 20_000


# --- send queues ---------------------------------------------------------------------------------


def test_a_queue_is_bounded_and_overflowing_it_is_a_reason_to_drop_the_reader():
    queues = SendQueues(max_frames=3, send_timeout_s=5.0)
    assert [queues.push("owner-1", n, 1.0) for n in range(3)] == [None, None, None]
    assert queues.push("owner-1", 3, 1.0) == "more than 3 frames waiting to be read"
    assert list(queues.backlog["owner-1"].frames) == [0, 1, 2]
    assert queues.push("owner-2", 0, 1.0) is None  # another reader's queue is its own


def test_a_reader_stuck_for_longer_than_send_timeout_is_dropped_and_each_frame_that_leaves_restarts_the_clock():
    queues = SendQueues(max_frames=10, send_timeout_s=5.0)
    queues.push("owner-1", "a", 1.0)
    queues.push("owner-1", "b", 2.0)
    [waiting] = queues.waiting()
    assert queues.blocked(waiting, 6.0) is None  # stuck since the first frame queued, at 1
    queues.sent(waiting, 6.0)  # "a" left
    assert queues.blocked(waiting, 11.0) is None
    assert queues.blocked(waiting, 11.5) == "did not read for send_timeout_s=5 (1 frames waiting)"
    queues.sent(waiting, 12.0)
    assert queues.backlog == {} and not queues.holds("owner-1")


def test_a_dropped_reader_leaves_nothing_waiting_even_for_a_flush_under_way():
    queues = SendQueues(max_frames=10, send_timeout_s=5.0)
    queues.push("owner-1", "a", 1.0)
    [waiting] = queues.waiting()
    queues.drop("owner-1")  # lost while its first frame was being sent
    queues.sent(waiting, 2.0)
    assert queues.backlog == {} and list(waiting.frames) == []
    queues.push("owner-1", "b", 3.0)  # a fresh queue, not the dropped one
    assert queues.backlog["owner-1"] is not waiting and queues.backlog["owner-1"].stuck_since == 3.0


# --- hostile peers: the bounds tests/transport/test_hostile.py used to time, with numbers ---------
# A run under attack used to be timed against a clean one (wall clocks, a quiet machine needed). The
# bounds are these rules; the real multi-process attacks there check completion and selection only.


def flood(link: LinkPolicy, route: bytes, party: str | None, start: float, seconds: float, per_s: int) -> int:
    """``per_s`` refused frames a second from connection ``route`` for ``seconds`` from ``start``: how
    many were read past the quarantine (each of them decoded and refused by the node)."""
    decoded = 0
    for i in range(int(seconds * per_s)):
        at = start + i / per_s
        conn = link.quarantine.admit(route, party, at)
        if conn is not None:
            decoded += 1
            link.refused(conn, at, party)
    return decoded


def honest_round(link: LinkPolicy, at: float, parties=("owner-1", "owner-2", "owner-3")) -> list[tuple[str, str]]:
    """Every party bids at ``at`` (after a round opened 0.5 s earlier): the losses a check then finds."""
    progress(link, at - 0.5, {party: "bid" for party in parties})
    for party in parties:
        heard(link, party, at=at)
    link.drained(at)
    return progress(link, at, {}) + liveness(link, at, expected=parties)


def test_a_strangers_flood_is_read_at_most_budget_plus_one_frames_per_quarantine_and_the_honest_run_goes_on():
    """10,000 refused frames a second for 60 s from a stranger: the node sees refusal_budget + 1 of
    them at the start of each quarantine_s, the rest are dropped unread (a read each, no decode); the
    honest parties, bidding every second, keep their deadlines and nobody is lost."""
    link = policy(refusal_budget=4, quarantine_s=2.0)
    for party in ("owner-1", "owner-2", "owner-3"):
        heard(link, party, at=0.0)
    decoded, losses = 0, []
    for second in range(60):
        decoded += flood(link, b"\x00mallory", None, start=second, seconds=1.0, per_s=10_000)
        losses += honest_round(link, at=second + 0.99)
    assert decoded <= (4 + 1) * (60 / 2.0 + 1), decoded  # 155 at most, of 600,000
    assert link.stats.quarantined["unidentified connection b'\\x00mallory'"] == 600_000 - decoded
    assert losses == [] and link.stats.lost_peers == {} and link.stats.arrivals == 3


def test_a_strangers_frames_keep_nobody_alive_so_a_party_that_never_came_is_still_lost_at_its_start_deadline():
    """Valid heartbeats from a stranger are refused (it is no party of the run): they connect nobody,
    and the start deadline of a party that never came falls as it would without them."""
    link = policy(start_timeout_s=30.0)
    heard(link, "owner-1", at=5.0)  # the last arrival
    flood(link, b"mallory", None, start=5.0, seconds=40.0, per_s=1_000)
    link.drained(35.0)
    assert liveness(link, 35.0, expected=("owner-2",)) == []  # exactly the deadline
    assert [party for party, _ in liveness(link, 35.01, expected=("owner-2",))] == ["owner-2"]
    assert set(link.peers) == {"owner-1"} and link.stats.arrivals == 1


def test_a_key_holder_flooding_as_a_party_is_quarantined_on_its_own_connection_and_that_party_keeps_its_deadlines():
    """Owner-3's key on a second connection, every frame refused: that connection is quarantined; the
    real owner-3, bidding on its own connection every second, is read throughout and never lost."""
    link = policy(refusal_budget=4, quarantine_s=2.0)
    for party in ("owner-1", "owner-2", "owner-3"):
        heard(link, party, at=0.0)
    losses = []
    for second in range(30):
        flood(link, b"impostor", "owner-3", start=second, seconds=1.0, per_s=5_000)
        assert link.quarantine.admit(b"owner-3", "owner-3", second + 0.98) is not None  # its own connection
        losses += honest_round(link, at=second + 0.99)
    assert losses == [] and link.peers["owner-3"].route == b"owner-3"
    assert link.stats.quarantined["owner-3"] >= 30 * 5_000 - (4 + 1) * (30 / 2.0 + 1)


def test_a_party_that_heartbeats_but_never_bids_is_lost_at_its_progress_deadline_and_the_others_at_none():
    """Its heartbeats are accepted frames, but they deliver nothing the role waits for: the wait that
    started when the round opened ends at the deadline, while the others bid and stay."""
    link = policy(progress_timeout_s=4.0)
    for party in ("owner-1", "owner-2", "owner-3"):
        heard(link, party, at=0.0)
    wanted = {party: "bid for round 2" for party in ("owner-1", "owner-2", "owner-3")}
    assert progress(link, 10.0, wanted) == []  # round 2 opens at 10
    lost = []
    for tick in range(1, 81):  # every 0.1 s until 18
        at = 10.0 + tick / 10
        heard(link, "owner-2", at=at)  # a heartbeat
        link.drained(at)
        if at >= 11.0:  # owner-1 and owner-3 bid at 11 and are no longer waited for
            wanted = {"owner-2": "bid for round 2"}
        lost += [(at, party, reason) for party, reason in progress(link, at, wanted)]
        if lost:
            break
    assert [(round(at, 1), party) for at, party, _ in lost] == [(14.1, "owner-2")]
    assert lost[0][2] == "no bid for round 2 within progress_timeout_s=4"


def test_a_party_of_another_run_is_lost_at_its_progress_deadline_from_its_first_frame_not_the_start_deadline():
    """Every frame it sends is refused (another run id): it is contact, never an arrival, so the wait
    for its hello counts from its first frame and ends progress_timeout_s later, naming the refusal,
    long before start_timeout_s after the last arrival."""
    link = policy(progress_timeout_s=4.0, start_timeout_s=30.0)
    heard(link, "owner-1", at=0.5)
    conn = link.quarantine.admit(b"owner-2", "owner-2", 1.0)
    link.refused(conn, 1.0, "owner-2")
    why = {"owner-2": "field 'run_id' expected 'hostile' (this run; another seed, scenario or --run-id?)"}
    wanted = {"owner-2": "hello"}
    assert progress(link, 1.0, wanted) == []
    link.drained(5.0)
    assert progress(link, 5.0, wanted) == []
    link.drained(5.01)
    assert progress(link, 5.01, wanted, refusals=why) == [
        ("owner-2", f"no hello within progress_timeout_s=4 (its last refused frame: {why['owner-2']})")
    ]


def test_a_bye_in_mid_round_ends_the_partys_liveness_checks_but_not_its_progress_deadline():
    """A ``bye`` nobody asked for, then silence and a closed connection: liveness no longer judges a
    party whose bye was taken, but the role still waits for its bid, so the deadline drops it."""
    link = policy(progress_timeout_s=4.0)
    heard(link, "owner-2", at=0.0)
    progress(link, 1.0, {"owner-2": "bid for round 2"})
    link.connection_closed("owner-2", 1.5, b"owner-2")
    link.drained(10.0)
    assert liveness(link, 10.0, expected=("owner-2",), finished={"owner-2"}) == []
    assert progress(link, 5.0, {"owner-2": "bid for round 2"}) == []
    assert progress(link, 5.01, {"owner-2": "bid for round 2"}) == [
        ("owner-2", "no bid for round 2 within progress_timeout_s=4")
    ]


def test_a_reader_that_never_reads_protocol_frames_is_dropped_at_send_timeout_and_the_others_queues_flow():
    """A party whose frames stay queued is dropped send_timeout_s after its first one stuck, and its
    queue is its own: the frames for the others leave as they come."""
    link = policy(send_timeout_s=5.0, max_queued_frames=100)
    queues = link.queues
    reasons = []
    for tick in range(100):  # a frame for each every 0.1 s; owner-1's never leave
        at = tick / 10
        for party in ("owner-1", "owner-2"):
            if party not in link.lost:  # the driver sends nothing to a lost party
                assert queues.push(party, tick, at) is None
        for waiting in queues.waiting():
            if waiting.party == "owner-2":
                while waiting.frames:
                    queues.sent(waiting, at)
            elif (reason := queues.blocked(waiting, at)) is not None:
                reasons.append((at, reason))
                link.lose("owner-1", reason)
                break
    assert [at for at, _ in reasons] == [5.1] and reasons[0][1].startswith("did not read for send_timeout_s=5")
    assert not queues.holds("owner-1") and not queues.holds("owner-2")
