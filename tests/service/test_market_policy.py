"""The served marketplace's decisions with times given as numbers: admission by capacity (pressed
sessions and a ramp hold requests in the queue), the start grace for owners, the report wait, probes
and the stop's steps. No socket, no clock, no sleep."""

from __future__ import annotations

import pytest

from marketplace.service.admission import MAX_QUEUED_PER_CONSUMER, Admission
from marketplace.service.market_policy import (
    PRESSED,
    RAMP,
    SETTLE_S,
    STOP_GRACE_S,
    Collecting,
    MarketPolicy,
    Running,
)
from marketplace.transport.link_policy import LinkPolicy
from marketplace.transport.link_settings import LinkSettings


def policy(max_sessions: int = 8, owners: int = 3, **changes) -> MarketPolicy:
    return MarketPolicy(
        admission=Admission(max_sessions=max_sessions), owners=owners, start_grace_s=60.0, started_at=0.0, **changes
    )


def queue(p: MarketPolicy, *requests: tuple[str, str]) -> None:
    for session, consumer in requests:
        p.admission.add(session, consumer, {}, session)


def start_all(p: MarketPolicy, running: list[Running], now: float, present: int = 3) -> list[str]:
    """Start what the policy lets start at ``now`` (each started session then runs, unpressed)."""
    started = []
    while (s := p.next_start(running, present, now)) is not None:
        started.append(s)
        running.append(Running(s, "c", started=now))
    return started


def test_with_nothing_running_the_first_request_starts_at_once():
    p = policy()
    queue(p, ("s1", "alice"))
    assert p.next_start([], present=3, now=100.0) == "s1" and p.held == ""


def test_requests_wait_for_the_owners_to_connect_for_at_most_the_start_grace():
    p = policy()
    queue(p, ("s1", "alice"))
    assert p.next_start([], present=2, now=10.0) is None
    assert p.next_start([], present=2, now=60.5) == "s1"  # the grace is over: the present owners are invited


def test_a_burst_is_admitted_at_the_ramps_pace_not_all_at_once():
    p = policy()
    queue(p, *[(f"s{i}", f"c{i}") for i in range(6)])
    running: list[Running] = []
    assert start_all(p, running, now=100.0) == ["s0", "s1"][:RAMP]
    assert "started within" in p.held
    assert start_all(p, running, now=100.0 + SETTLE_S / 2) == []  # still unproven
    assert start_all(p, running, now=100.0 + SETTLE_S + 0.01) == ["s2", "s3"][:RAMP]
    assert len(running) == 2 * RAMP


def test_without_a_ramp_a_burst_starts_up_to_max_sessions_at_once():
    p = policy(max_sessions=3, ramp=0)
    queue(p, *[(f"s{i}", f"c{i}") for i in range(5)])
    assert start_all(p, [], now=100.0) == ["s0", "s1", "s2"]


def test_a_pressed_session_holds_every_new_request_until_it_is_relieved():
    p = policy()
    queue(p, ("s2", "bob"))
    busy = Running("s1", "alice", started=0.0, pressure=PRESSED + 0.1)
    assert p.next_start([busy], present=3, now=50.0) is None
    assert "session s1 has used 60% of a progress deadline" in p.held
    relieved = Running("s1", "alice", started=0.0, pressure=PRESSED - 0.1)
    assert p.next_start([relieved], present=3, now=51.0) == "s2" and p.held == ""


def test_a_collecting_session_is_neither_pressed_nor_unproven():
    p = policy()
    queue(p, ("s2", "bob"))
    collecting = Running("s1", "alice", started=99.9, collecting=True, pressure=5.0)
    assert p.next_start([collecting], present=3, now=100.0) == "s2"


def test_max_sessions_and_the_rule_still_bound_what_capacity_allows():
    p = policy(max_sessions=1)
    queue(p, ("s1", "alice"), ("s2", "bob"))
    running: list[Running] = []
    assert start_all(p, running, now=0.0) == ["s1"]
    assert start_all(p, running, now=100.0) == []  # calm and proven, but max_sessions is 1
    assert p.held == ""  # held by the rule, not for the machine's sake


def test_a_stopping_marketplace_starts_nothing_and_steps_through_its_stop():
    p = policy()
    queue(p, ("s1", "alice"))
    assert p.stop_step(0.0, sessions=0, agents_alive=True) == "serve"
    p.stop()
    assert p.next_start([], present=3, now=1.0) is None
    assert p.stop_step(1.0, sessions=2, agents_alive=True) == "finish_sessions"
    assert p.stop_step(5.0, sessions=0, agents_alive=True) == "tell_agents"
    assert p.stop_step(6.0, sessions=0, agents_alive=True) == "wait_for_agents"
    assert p.stop_step(7.0, sessions=0, agents_alive=False) == "exit"


def test_an_owner_that_connects_after_the_agents_were_told_is_told_too():
    p = policy()
    p.stop()
    assert not p.agents_told
    assert p.stop_step(0.0, sessions=0, agents_alive=True) == "tell_agents"
    assert p.agents_told  # the server tells every owner that connects from now on (a stop at start-up took 70 s)


def test_agents_that_never_leave_are_waited_for_only_the_grace():
    p = policy()
    p.stop()
    assert p.stop_step(0.0, sessions=0, agents_alive=True) == "tell_agents"
    assert p.stop_step(STOP_GRACE_S - 0.1, sessions=0, agents_alive=True) == "wait_for_agents"
    assert p.stop_step(STOP_GRACE_S + 0.1, sessions=0, agents_alive=True) == "exit"


def test_probes_are_due_once_a_period():
    p = policy()
    assert p.probe_due(0.0) and not p.probe_due(0.5) and p.probe_due(1.0) and not p.probe_due(1.9)


def test_reports_are_waited_for_from_connected_parties_until_the_run_deadline():
    deadline = MarketPolicy.collecting_deadline(started=0.0, run_timeout_s=1800.0, now=100.0, collect_s=30.0)
    assert deadline == 1800.0  # a consumer still computing its estimates is not given up after 30 s
    assert MarketPolicy.collecting_deadline(started=0.0, run_timeout_s=60.0, now=100.0, collect_s=30.0) == 130.0
    both, grace = {"consumer", "owner-1"}, 130.0
    assert not MarketPolicy.reports_in(both, set(), {"owner-1"}, now=500.0, deadline=deadline, grace_end=grace)
    assert MarketPolicy.reports_in(both, set(), both, now=500.0, deadline=deadline, grace_end=grace)
    assert MarketPolicy.reports_in({"consumer"}, set(), set(), now=1800.5, deadline=deadline, grace_end=grace)


def test_a_party_the_session_lost_is_waited_for_only_the_grace():
    """An owner the session lost while it stayed on its connection (it missed a deadline) reports once
    its agent hears the session no longer holds it; it holds the session at most ``collect_s``."""
    kept, lost = {"consumer", "owner-1"}, {"owner-2"}
    assert not MarketPolicy.reports_in(kept, lost, kept, now=120.0, deadline=1800.0, grace_end=130.0)
    assert MarketPolicy.reports_in(kept, lost, kept, now=130.5, deadline=1800.0, grace_end=130.0)
    assert not MarketPolicy.reports_in(kept, lost, lost, now=130.5, deadline=1800.0, grace_end=130.0)


def test_a_done_curator_waits_its_run_deadline_for_the_parties_it_kept_and_collect_s_for_the_lost():
    assert MarketPolicy.collecting(started=0.0, run_timeout_s=1800.0, now=100.0, collect_s=30.0) == (1800.0, 130.0)
    assert MarketPolicy.collecting(started=0.0, run_timeout_s=60.0, now=100.0, collect_s=30.0) == (130.0, 130.0)


def collecting(
    reported: set[str],
    lost: frozenset[str] | set[str] = frozenset(),
    consumer_gone: bool = False,
    declined: frozenset[str] | set[str] = frozenset(),
) -> Collecting:
    """A session that invited owner-1 and owner-2 on connections b"1" and b"2", collecting until 1800.0
    from the parties it kept and until 130.0 from those it lost."""
    invited_on = {"owner-1": b"1", "owner-2": b"2"}
    return Collecting(invited_on, consumer_gone, lost, reported, deadline=1800.0, grace_end=130.0, declined=declined)


def test_a_session_ends_once_every_party_still_on_its_connection_reported():
    present = {"owner-1": b"1", "owner-2": b"2"}
    assert not MarketPolicy.session_ends(collecting({"owner-1", "consumer"}), present, now=500.0)
    assert MarketPolicy.session_ends(collecting({"owner-1", "owner-2", "consumer"}), present, now=500.0)
    assert MarketPolicy.session_ends(collecting(set()), present, now=1800.5)  # the run deadline passed


def test_a_party_whose_connection_is_gone_or_new_is_not_waited_for():
    """owner-2 came back on a new connection (its agent started again) and never knew the session;
    the consumer has gone: only owner-1 is waited for."""
    present = {"owner-1": b"1", "owner-2": b"2-again"}
    assert MarketPolicy.session_ends(collecting({"owner-1"}, consumer_gone=True), present, now=500.0)
    assert not MarketPolicy.session_ends(collecting({"owner-2"}, consumer_gone=True), present, now=500.0)


def test_a_lost_owner_on_its_connection_holds_the_session_only_until_the_grace_ends():
    present = {"owner-1": b"1", "owner-2": b"2"}
    kept = {"owner-1", "consumer"}
    assert not MarketPolicy.session_ends(collecting(kept, lost={"owner-2"}), present, now=120.0)
    assert MarketPolicy.session_ends(collecting(kept, lost={"owner-2"}), present, now=130.5)


def test_a_session_whose_only_missing_report_is_a_declined_owners_ends_at_once():
    """owner-2's agent declined the session (a file that no longer reads, a broken ledger): it built no
    part and sends no report, though it stays connected for its other sessions. The curator lost it;
    the session ends as soon as the parties it kept reported, not ``collect_s`` later."""
    present = {"owner-1": b"1", "owner-2": b"2"}
    kept = {"owner-1", "consumer"}
    declined = collecting(kept, lost={"owner-2"}, declined={"owner-2"})
    assert MarketPolicy.session_ends(declined, present, now=100.1)
    # one still missing a live party's report waits: the lost owner until the grace ends, a kept one
    # (computing its own local work) until the run's deadline
    assert not MarketPolicy.session_ends(collecting(kept, lost={"owner-2"}), present, now=100.1)
    assert not MarketPolicy.session_ends(
        collecting({"owner-1"}, lost={"owner-2"}, declined={"owner-2"}), present, 500.0
    )
    assert MarketPolicy.session_ends(collecting({"owner-1"}, lost={"owner-2"}, declined={"owner-2"}), present, 1800.5)


def test_a_request_is_refused_at_once_while_stopping_or_when_its_consumers_queue_is_full():
    p = policy()
    assert p.refusal("alice") is None
    queue(p, *[(f"s{i}", "alice") for i in range(MAX_QUEUED_PER_CONSUMER)])
    assert p.refusal("alice") == (
        f"alice already has {MAX_QUEUED_PER_CONSUMER} requests waiting (at most {MAX_QUEUED_PER_CONSUMER}); "
        "nothing was charged: try again later"
    )
    assert p.refusal("bob") is None
    p.stop()
    assert p.refusal("bob") == "the marketplace is stopping; nothing was charged"


def test_a_stop_takes_every_queued_request_out_to_be_refused_and_only_a_stop():
    p = policy()
    queue(p, ("s1", "alice"), ("s2", "bob"))
    assert p.queued_to_refuse() == [] and len(p.admission.waiting) == 2
    p.stop()
    assert p.queued_to_refuse() == ["s1", "s2"]
    assert p.admission.waiting == [] and p.queued_to_refuse() == []
    assert p.next_start([], present=3, now=100.0) is None


@pytest.mark.parametrize(("now", "expected"), [(0.0, 0.0), (5.0, 0.5), (10.0, 1.0)])
def test_a_sessions_pressure_is_the_share_of_its_progress_deadline_its_longest_wait_used(now, expected):
    settings = LinkSettings(progress_timeout_s=10.0, run_timeout_s=600.0)
    link = LinkPolicy(settings, parties=3, now=0.0)
    assert link.pressure(0.0) == 0.0  # waiting for nobody
    link.contacted("owner-1", 0.0)
    list(link.progress_losses(0.0, {"owner-1": "its release"}, lambda party: 1.0, {}))
    assert link.pressure(now) == pytest.approx(expected)
