"""A disk or SQLite error on one owner's lifetime ledger fails or declines that owner's sessions only:
the agent that hosts it, its other owners and its other sessions go on.

The first tests drive an agent's decisions without a marketplace (its connections are stand-ins that
keep what the agent sends): a ledger that cannot reserve declines the owner naming the ledger and the
error, one that cannot mark a release as left fails that owner's session with nothing of the protocol
sent, one that cannot settle keeps the reservation (counted as spent) and settles it before the owner's
next session. The last runs a served session (the server in this process, the agent in a thread)
where one owner's ledger fails mid-session: the other owners complete, the agent serves the next.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_serve import MARKET, REQUEST, free_port

import marketplace
from marketplace import plugins
from marketplace.parties import build_role, make_world, share_of
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.roles import open_ledgers
from marketplace.roles.identity import RUNTIME_KINDS
from marketplace.roles.lifetime import DeclinedParty, admitted
from marketplace.roles.party import Party
from marketplace.scenario import Scenario
from marketplace.service import agent as agent_module
from marketplace.service import control
from marketplace.service.options import AgentOptions
from marketplace.service.sessions import session_scenario

OWNERS = ["owner-1", "owner-2", "owner-3"]
FAULTY = "owner-2"
DISK_FULL = "database or disk is full"


class Connection:
    """A stand-in for an owner's control connection: keeps what the agent sends on it."""

    def __init__(self) -> None:
        self.sent: list[Any] = []

    def send(self, frame: bytes, flags: int = 0) -> None:
        self.sent.append(control.decode(frame))

    def of(self, kind: type) -> list[Any]:
        return [m for m in self.sent if isinstance(m, kind)]


def disk_full(monkeypatch: pytest.MonkeyPatch, *methods: str) -> None:
    """``FAULTY``'s ledger raises SQLite's full-disk error in each of ``methods``; the others' work."""
    for name in methods:
        real = getattr(LifetimeLedger, name)

        def broken(self: LifetimeLedger, *args: Any, _real: Any = real, **kwargs: Any) -> Any:
            if self.owner == FAULTY:
                raise sqlite3.OperationalError(DISK_FULL)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(LifetimeLedger, name, broken)


def history(ledgers: Path, owner: str) -> list[tuple[str, str]]:
    """(request id, state) of every entry of ``owner``'s ledger."""
    with LifetimeLedger.read(ledger_file(ledgers, owner)) as ledger:
        return [(r.request_id, r.state) for r in ledger.history()]


@pytest.fixture
def market() -> Scenario:
    return Scenario.from_yaml(yaml.safe_dump(MARKET), source="the test's marketplace")


@pytest.fixture(params=["kept open", "opened per use"])
def agent(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[agent_module.OwnerAgent]:
    """An agent of three owners whose connections are stand-ins (it never runs its loop here), its
    owners' ledgers kept open between uses as its loop keeps them (:mod:`marketplace.roles.open_ledgers`),
    or opened for each use as a party process does: the same faults, the same outcomes."""
    made = agent_module.OwnerAgent(
        AgentOptions(
            "tcp://127.0.0.1:9", tmp_path / "keys", OWNERS, work=tmp_path / "work", ledgers=tmp_path / "ledgers"
        )
    )
    made.socks = {owner: Connection() for owner in OWNERS}  # type: ignore[misc]
    if request.param == "kept open":
        open_ledgers.keep_open()
    try:
        yield made
    finally:
        open_ledgers.close_all()


def invite(market: Scenario, session: str) -> control.SessionInvite:
    """The server's invitation to session ``session`` of alice's request (REQUEST)."""
    scenario = session_scenario(market, yaml.safe_dump(REQUEST), session=session, consumer="alice")
    return control.SessionInvite(session=session, scenario=scenario.dump_yaml())


def join_all(agent: agent_module.OwnerAgent, message: control.SessionInvite) -> None:
    for owner in OWNERS:
        agent._join(owner, message)


def conn(agent: agent_module.OwnerAgent, owner: str) -> Connection:
    return agent.socks[owner]  # type: ignore[return-value]


def test_a_ledger_that_cannot_reserve_declines_that_owner_alone_naming_the_ledger_and_the_error(
    agent, market, monkeypatch
):
    disk_full(monkeypatch, "reserve")
    join_all(agent, invite(market, "s0001-aaaa"))
    roles = {owner: agent.loops[("s0001-aaaa", owner)][0].node.role for owner in OWNERS}
    assert isinstance(roles[FAULTY], DeclinedParty)  # it tells the curator why, and releases nothing
    path = ledger_file(agent.ledgers, FAULTY)
    assert roles[FAULTY].reason == f"{FAULTY}: the ledger {path} is not writable: {DISK_FULL}"
    for owner in ("owner-1", "owner-3"):
        admission = agent.loops[("s0001-aaaa", owner)][0].node.party.admission
        assert admission.state == "reserved" and not isinstance(roles[owner], DeclinedParty)
    assert history(agent.ledgers, FAULTY) == []  # nothing charged


def test_a_ledger_that_cannot_mark_a_release_as_left_fails_that_owners_session_and_nothing_leaves(
    agent, market, monkeypatch
):
    join_all(agent, invite(market, "s0001-aaaa"))
    disk_full(monkeypatch, "mark_left")
    key = ("s0001-aaaa", FAULTY)
    node = agent.loops[key][0].node
    # what the owner's node does before its first frame of the protocol leaves (transport.node)
    agent._guarded(key, node.party.admission.mark_left, "handling a message")
    assert key not in agent.loops  # its part is over
    assert node.party.traffic.protocol_messages_sent == 0
    assert {row["kind"] for row in node.counters.to_dict()["sent"]} <= RUNTIME_KINDS  # its hello, no more
    assert node.role.failure.startswith("internal error in its agent while handling a message: LedgerFault: ")
    path = ledger_file(agent.ledgers, FAULTY)
    assert f"{FAULTY}: cannot mark its release as left on {path}: {DISK_FULL}" in node.role.failure
    (report,) = conn(agent, FAULTY).of(control.PartyReport)
    published = json.loads(report.report)
    assert published["status"] == "failed" and published["lifetime"]["state"] == "aborted"  # nothing charged
    assert published["lifetime"]["reason"].startswith(f"{FAULTY}: cannot mark its release as left on {path}")
    assert history(agent.ledgers, FAULTY) == [("s0001-aaaa", "aborted")]
    for owner in ("owner-1", "owner-3"):  # the others go on in the same session
        assert ("s0001-aaaa", owner) in agent.loops and not conn(agent, owner).of(control.PartyReport)


def test_later_sessions_of_an_owner_whose_disk_stays_full_are_declined_and_the_others_join(agent, market, monkeypatch):
    join_all(agent, invite(market, "s0001-aaaa"))
    disk_full(monkeypatch, "mark_left", "reserve", "abort", "commit")
    key = ("s0001-aaaa", FAULTY)
    agent._guarded(key, agent.loops[key][0].node.party.admission.mark_left, "handling a message")
    join_all(agent, invite(market, "s0002-bbbb"))
    later = {owner: agent.loops[("s0002-bbbb", owner)][0].node.party for owner in OWNERS}
    path = ledger_file(agent.ledgers, FAULTY)
    assert later[FAULTY].role.reason == f"{FAULTY}: the ledger {path} is not writable: {DISK_FULL}"
    for owner in ("owner-1", "owner-3"):
        assert later[owner].admission.state == "reserved"
    assert history(agent.ledgers, FAULTY) == [("s0001-aaaa", "reserved")]  # counted as spent, not lost


def test_a_reservation_that_could_not_be_settled_stays_reserved_and_settles_before_the_owners_next_session(
    agent, market, monkeypatch
):
    join_all(agent, invite(market, "s0001-aaaa"))
    with monkeypatch.context() as full:
        disk_full(full, "abort", "commit")
        key = ("s0001-aaaa", FAULTY)
        agent.loops[key][0].node.role.fail("the test ends it")
        agent._end(key)
        (report,) = conn(agent, FAULTY).of(control.PartyReport)
        record = json.loads(report.report)["lifetime"]
        assert record["state"] == "reserved" and DISK_FULL in record["reason"] and "stays reserved" in record["reason"]
        assert history(agent.ledgers, FAULTY) == [("s0001-aaaa", "reserved")]
        agent._join(FAULTY, invite(market, "s0002-bbbb"))  # the disk is still full: tried again, kept
        # counted as spent: 0.25 of owner-2's 0.3 held, its next request's 0.25 does not fit
        assert history(agent.ledgers, FAULTY) == [("s0001-aaaa", "reserved"), ("s0002-bbbb", "declined")]
    agent._join(FAULTY, invite(market, "s0003-cccc"))  # room again: settled first (nothing left), then reserved
    assert history(agent.ledgers, FAULTY) == [
        ("s0001-aaaa", "aborted"),
        ("s0002-bbbb", "declined"),
        ("s0003-cccc", "reserved"),
    ]
    assert agent.unsettled == {}


def test_a_ledger_fault_before_the_owner_joins_declines_it_naming_the_ledger_and_rolls_back(agent, market, monkeypatch):
    disk_full(monkeypatch, "mark_left")

    class FirstFrameOfTheProtocolAtStart(agent_module.SharedLinkLoop):
        def begin(self) -> None:
            if self.node.party.admission is not None:
                self.node.party.admission.mark_left()
            super().begin()

    monkeypatch.setattr(agent_module, "SharedLinkLoop", FirstFrameOfTheProtocolAtStart)
    join_all(agent, invite(market, "s0001-aaaa"))
    (declined,) = conn(agent, FAULTY).of(control.SessionDeclined)
    path = ledger_file(agent.ledgers, FAULTY)
    assert declined.reason == f"{FAULTY}: cannot mark its release as left on {path}: {DISK_FULL}"
    assert ("s0001-aaaa", FAULTY) not in agent.loops
    assert history(agent.ledgers, FAULTY) == [("s0001-aaaa", "aborted")]  # not left reserved for ever
    assert all(("s0001-aaaa", owner) in agent.loops for owner in ("owner-1", "owner-3"))


def test_an_owners_report_that_cannot_be_made_fails_that_report_only(agent, market, monkeypatch):
    join_all(agent, invite(market, "s0001-aaaa"))
    made = agent_module.party_report

    def party_report(node, **kwargs):
        if node.party_id == FAULTY:
            raise sqlite3.OperationalError(DISK_FULL)
        return made(node, **kwargs)

    monkeypatch.setattr(agent_module, "party_report", party_report)
    for owner in OWNERS:
        agent.loops[("s0001-aaaa", owner)][0].node.role.fail("the test ends it")
        agent._end(("s0001-aaaa", owner))
    (report,) = conn(agent, FAULTY).of(control.PartyReport)
    assert json.loads(report.report) == {
        "id": FAULTY,
        "run_id": "s0001-aaaa",
        "role": "owner",
        "status": "failed",
        "failure": "the test ends it",
    }
    assert history(agent.ledgers, FAULTY) == [("s0001-aaaa", "aborted")]  # settled all the same
    assert all(len(conn(agent, owner).of(control.PartyReport)) == 1 for owner in OWNERS)


def test_a_party_that_cannot_be_started_after_its_reservation_rolls_it_back(tmp_path, market):
    scenario = session_scenario(market, yaml.safe_dump(REQUEST), session="s0001-aaaa", consumer="alice")
    config = scenario.with_overrides({"lifetime.ledgers": str(tmp_path)}).config
    exchange = plugins.exchange(config.protocol)
    role = build_role(config, "owner-1", world=share_of(make_world(config, exchange), "owner-1"), exchange=exchange)
    assert not ledger_file(tmp_path, "owner-1").exists()  # building a role reserves nothing

    with pytest.raises(ValueError, match="its connection could not be made"), admitted(config, Party(role), exchange):
        assert history(tmp_path, "owner-1") == [("s0001-aaaa", "reserved")]
        raise ValueError("owner-1: its connection could not be made")
    assert history(tmp_path, "owner-1") == [("s0001-aaaa", "aborted")]


# --- served


def wait_for(what, deadline_s: float = 120.0, *, why: str) -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < deadline, why
        time.sleep(0.05)


@pytest.mark.slow
def test_served_one_owners_ledger_fails_mid_session_and_its_agent_serves_its_other_owners_on(tmp_path, monkeypatch):
    disk_full(monkeypatch, "mark_left")  # owner-2's first release cannot be recorded as left
    (tmp_path / "market.yaml").write_text(yaml.safe_dump(MARKET))
    state, ledgers = tmp_path / "state", tmp_path / "agent" / "ledgers"
    with marketplace.serve(
        tmp_path / "market.yaml",
        state=state,
        consumers=["alice"],
        start_owners=False,
        endpoint=f"tcp://127.0.0.1:{free_port()}",
    ) as market:
        agent = agent_module.OwnerAgent(
            AgentOptions(
                market.endpoint, state / "owners", OWNERS, work=tmp_path / "agent" / "sessions", ledgers=ledgers
            )
        )
        raised: list[BaseException] = []

        def run() -> None:
            try:
                agent.run()
            except BaseException as err:
                raised.append(err)
                raise

        thread = threading.Thread(target=run, name="owner-agent", daemon=True)
        thread.start()
        try:
            wait_for(lambda: len(agent.heard) == len(OWNERS), why="the agent's owners never connected")

            def ask(out: str) -> dict:
                return marketplace.request(
                    REQUEST, market=market.endpoint, keys=state / "consumers" / "alice", out=tmp_path / out, wait_s=300
                ).raw

            first = ask("first")
            assert thread.is_alive(), raised
            owners = first["lifetime"]["owners"]
            assert owners["owner-1"]["state"] == owners["owner-3"]["state"] == "committed"
            assert owners[FAULTY]["state"] == "aborted" and DISK_FULL in owners[FAULTY]["reason"]
            assert {p["id"]: p["status"] for p in first["parties"]} == {
                "curator": "completed",
                "owner-1": "completed",
                FAULTY: "failed",
                "owner-3": "completed",
                "consumer": "completed",
            }
            own = json.loads((tmp_path / "agent" / "sessions" / first["run_id"] / f"{FAULTY}.json").read_text())
            assert f"cannot mark its release as left on {ledger_file(ledgers, FAULTY)}" in own["own"]["failure"]
            disk_full(monkeypatch, "reserve")  # the disk stays full: its next session is declined at once
            second = ask("second")
            assert thread.is_alive(), raised
            owners = second["lifetime"]["owners"]
            assert second["lifetime"]["declined"] == [FAULTY]
            assert owners[FAULTY]["reason"] == (
                f"{FAULTY}: the ledger {ledger_file(ledgers, FAULTY)} is not writable: {DISK_FULL}"
            )
            assert owners["owner-1"]["state"] == owners["owner-3"]["state"] == "committed"
            assert agent.sessions_done == 2
        finally:
            agent.stop()
            thread.join(60)
    assert not thread.is_alive() and raised == []
    assert [state for _, state in history(ledgers, FAULTY)] == ["aborted"]
    for owner in ("owner-1", "owner-3"):
        assert [state for _, state in history(ledgers, owner)] == ["committed", "committed"]
