"""No charge without delivery, served: a consumer busy with its own estimates is never given up, and
a consumer that left after the owners released fetches what its session released with
``marketplace request --resume`` (or ``marketplace.resume``), nothing run or charged again."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_serve import MARKET, Market, cli, report

import marketplace
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

pytestmark = pytest.mark.slow

OWNERS = ("owner-1", "owner-2", "owner-3")


def busy_loops(n: int) -> list[subprocess.Popen]:
    """``n`` processes that keep a core busy until killed (the campaign's other work on the machine)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def ledger_rows(state: Path, owner: str) -> list:
    path = ledger_file(state / "owners", owner)
    if not path.exists():
        return []
    with LifetimeLedger.read(path) as ledger:
        return list(ledger.history())


def committed_by_all(state: Path, session: str) -> bool:
    """Whether every owner's ledger has committed its charge for ``session`` (a ledger being created
    or written is looked at again on the next poll)."""
    try:
        return all(
            any(r.request_id == session and r.state == "committed" for r in ledger_rows(state, o)) for o in OWNERS
        )
    except Exception:  # noqa: BLE001 - a ledger its agent is still creating
        return False


def test_heavy_concurrent_requests_on_a_busy_machine_are_delivered_for_every_charge(tmp_path):
    """Four requests from two consumers at once, each consumer's M2M fit longer than the curator's
    progress deadline, beside two busy loops: before, the curator gave up a consumer still fitting when
    it waited for its bye and every owner was charged for a run nobody received. Now every request
    completes, and each owner's committed charges are exactly the sessions whose reports were
    delivered."""
    market_file = copy.deepcopy(MARKET)
    market_file["transport"] = {**market_file["transport"], "progress_timeout_s": 2.0}
    market_file["lifetime"] = {"ledgers": "ledgers", "budget": {"epsilon": 10.0}}
    market = Market(tmp_path, consumers="alice,bob", market=market_file)
    loops = busy_loops(2)
    try:
        requests = {
            f"{consumer}-{i}": market.request(consumer, f"out-{consumer}-{i}", "sketch.samples=400000")
            for consumer in ("alice", "bob")
            for i in range(2)
        }
        for name, proc in requests.items():
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, (name, out, err)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
        status, err = market.stop()
    assert status == 0, err
    delivered = {report(tmp_path / f"out-{name}")["run_id"] for name in requests}
    assert len(delivered) == 4
    for owner in OWNERS:
        rows = ledger_rows(market.state, owner)
        assert not [r.request_id for r in rows if r.state == "reserved"], owner
        committed = {r.request_id for r in rows if r.state == "committed"}
        assert committed == delivered, (owner, committed, delivered)
    # every ledger's invariants: schema, nothing negative, no request charged twice, spend within budget
    check = cli("ledger", "check", str(market.state))
    out, err = check.communicate(timeout=120)
    assert check.returncode == 0, (out, err)


def test_a_consumer_that_left_after_the_release_resumes_and_gets_its_results(tmp_path):
    market = Market(tmp_path, consumers="alice,bob")
    try:
        alice = market.request("alice", "out-alice", "sketch.samples=3000000")
        deadline = time.monotonic() + 120
        session = ""
        while not session:  # the owners released, alice confirmed she has the sketches: now she fits for seconds
            assert time.monotonic() < deadline and alice.poll() is None, "alice's session never got going"
            running = json.loads((market.state / "server.json").read_text())["running"]
            if (
                running
                and (tmp_path / "out-alice" / "scenario.yaml").exists()
                and committed_by_all(market.state, running[0])
            ):
                session = running[0]
            time.sleep(0.05)
        os.killpg(alice.pid, signal.SIGKILL)
        alice.communicate(timeout=60)
        status = ""
        while status == "":  # the server ends the session without alice's report
            assert time.monotonic() < deadline + 240
            finished = json.loads((market.state / "server.json").read_text())["sessions"]
            status = next((s["status"] for s in finished if s["session"] == session), "")
            time.sleep(0.1)
        assert status == "failed"
        charged = {o: [r for r in ledger_rows(market.state, o) if r.request_id == session] for o in OWNERS}

        # bob cannot fetch alice's session, nor can anyone name a path
        for asker, sid in (("bob", session), ("alice", "s0001-../../x"), ("alice", "s9999-00000000")):
            proc = cli(
                "request",
                "--resume",
                sid,
                "--market",
                market.endpoint,
                "--keys",
                str(market.state / "consumers" / asker),
                "--out",
                str(tmp_path / f"refused-{asker}-{len(sid)}"),
            )
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 2 and f"no session {sid!r} of {asker} is kept" in err, err

        # alice fetches it again: her consumer runs its part on what the session released
        proc = cli(
            "request",
            "--resume",
            session,
            "--market",
            market.endpoint,
            "--keys",
            str(market.state / "consumers" / "alice"),
            "--out",
            str(tmp_path / "resumed"),
        )
        out, err = proc.communicate(timeout=300)
        resumed = report(tmp_path / "resumed")
        assert resumed["run_id"] == session
        assert proc.returncode == (0 if resumed["status"] == "completed" else 3), (out, err)
        consumer = resumed["party_details"]["consumer"]["result"]
        assert consumer["estimates"] and consumer["sketches"]["merged"]
        # the session's own status stays: completed if alice had confirmed before she froze, else failed
        # saying she never confirmed (she did not, in the session); the estimates are hers either way
        failures = " ".join(resumed.get("failures") or [])
        assert resumed["status"] == "completed" or "never confirmed it received the results" in failures, failures

        # and from Python, again: the same report, nothing charged again
        again = marketplace.resume(
            session,
            market=market.endpoint,
            keys=market.state / "consumers" / "alice",
            out=tmp_path / "again",
            check=False,
        )
        assert again.raw["status"] == resumed["status"]
        fetched = again.raw["party_details"]["consumer"]["result"]
        assert fetched["sketches"] == consumer["sketches"] and fetched["estimates"]  # the same releases, estimated
        # (the estimates themselves come from a solver whose last bits may differ from process to process)
        after = {o: [r for r in ledger_rows(market.state, o) if r.request_id == session] for o in OWNERS}
        assert after == charged
    finally:
        status, err = market.stop()
        assert status == 0, err


def test_resume_takes_a_session_or_a_scenario_not_both():
    for args in ((), ("x.yaml", "--resume", "s0001-00000000")):
        proc = subprocess.run(
            [sys.executable, "-m", "marketplace", "request", *args, "--market", "tcp://127.0.0.1:1", "--keys", "k"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and "expected a scenario file (a new request) or --resume SESSION" in proc.stderr


def test_a_kept_session_is_read_back_only_for_its_own_consumer_and_id(tmp_path):
    from marketplace.service.kept import Kept, keep, kept_for

    kept = Kept(
        session="s0003-0a1b2c3d",
        consumer="alice",
        scenario="name: x\n",
        frames=[b"one", b"two"],
        status="completed",
        report=b"{}",
        parties=b"{}",
    )
    keep(tmp_path / "sessions" / kept.session, kept)
    assert kept_for(tmp_path, kept.session, "alice") == kept
    assert kept_for(tmp_path, kept.session, "bob") is None
    assert kept_for(tmp_path, "../sessions/s0003-0a1b2c3d", "alice") is None
    assert kept_for(tmp_path, "s0004-0a1b2c3d", "alice") is None
    (tmp_path / "sessions" / kept.session / "kept.msgpack").write_bytes(b"\xc1 not msgpack")
    assert kept_for(tmp_path, kept.session, "alice") is None
