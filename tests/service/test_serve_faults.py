"""A served marketplace under load and under its own faults: many sessions at once over the same
live connections, racing reservations, a second server on its state, a full disk, consumers and
agents that vanish, and a server that crashes under its clients."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from test_serve import MARKET, REQUEST, Market, cli, free_port

from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from proctree import tree  # noqa: E402

pytestmark = pytest.mark.slow


def status(market: Market) -> dict:
    return json.loads((market.state / "server.json").read_text())


def wait_for(what, deadline_s: float = 120.0, *, why: str = "") -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < deadline, why or "timed out"
        time.sleep(0.1)


def owners_present(market: Market, n: int = 3) -> bool:
    try:
        return status(market).get("owners_present") == n
    except (OSError, ValueError):
        return False


def entries(state: Path, owner: str) -> list:
    path = ledger_file(state / "owners", owner)
    if not path.exists():
        return []
    with LifetimeLedger.read(path) as ledger:
        return ledger.history()


def test_eight_consumers_at_once_share_the_live_connections_and_never_overspend_a_budget(tmp_path):
    """Eight requests from eight consumers run as eight sessions at once over the same owners, with
    no process started for any of them; each owner's eps-1.0 budget admits at most four of the
    eps-0.25 requests racing for it, whatever the order the sessions reserve in."""
    import marketplace

    market = dict(MARKET, lifetime={"budget": {"epsilon": 1.0}})
    (tmp_path / "market.yaml").write_text(yaml.safe_dump(market))
    consumers = [f"c{i}" for i in range(8)]
    served = marketplace.serve(
        tmp_path / "market.yaml",
        tmp_path / "state",
        endpoint=f"tcp://127.0.0.1:{free_port()}",
        consumers=consumers,
        max_sessions=8,
        ramp=0,  # all eight may start at once: the test is of their race for the owners' budgets
    )
    with served:
        wait_for(lambda: json.loads((served.state / "server.json").read_text())["owners_present"] == 3)
        before = set(tree(os.getpid()))
        seen: set[int] = set()
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                seen.update(tree(os.getpid()))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        results: dict[str, object] = {}

        def ask(consumer: str) -> None:
            request = dict(REQUEST, sketch=dict(REQUEST["sketch"], samples=100_000))  # the consumer computes a while
            try:
                results[consumer] = marketplace.request(
                    request,
                    market=served.endpoint,
                    keys=served.state / "consumers" / consumer,
                    out=tmp_path / f"out-{consumer}",
                    check=False,
                )
            except Exception as err:  # noqa: BLE001 - reported by the assertion below
                results[consumer] = err

        threads = [threading.Thread(target=ask, args=(c,)) for c in consumers]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=600)
        stop.set()
        watcher.join()
        info = json.loads((served.state / "server.json").read_text())
    assert all(not isinstance(r, Exception) for r in results.values()), results
    assert info["max_running"] == 8  # all eight sessions ran at once
    assert seen - before <= {p for p in before}, f"processes started during the sessions: {seen - before}"
    assert len({r.raw["run_id"] for r in results.values()}) == 8  # a session, a run id, a report each
    for owner in ("owner-1", "owner-2", "owner-3"):
        rows = entries(tmp_path / "state", owner)
        counted = [r for r in rows if r.state in ("reserved", "committed")]
        assert sum(r.charged.eps for r in counted) <= 1.0 + 1e-12
        assert len(counted) == 4, [(r.request_id, r.state) for r in rows]  # 4 x 0.25 fit, the others declined
        assert {r.request_id for r in rows} <= {r.raw["run_id"] for r in results.values()}
    for r in results.values():  # each consumer got its own session's report, naming only itself
        assert r.raw["lifetime"]["consumer"] in consumers and r.raw["lifetime"]["request_id"] == r.raw["run_id"]


def test_a_second_serve_on_the_same_state_is_refused_naming_the_first_pid(tmp_path):
    market = Market(tmp_path)
    try:
        second = cli(
            "serve",
            str(market.file),
            "--state",
            str(market.state),
            "--endpoint",
            f"tcp://127.0.0.1:{free_port()}",
        )
        out, err = second.communicate(timeout=120)
        assert second.returncode == 2, err
        assert f"is in use by another `marketplace serve` (pid {market.proc.pid})" in err
        assert status(market)["pid"] == market.proc.pid  # the first one's status file is untouched
    finally:
        assert market.stop()[0] == 0


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs mounted for the test (needs root and mount(8); skipped, naming it, without)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("needs mount(8) to make a small file system")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(disk)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path) -> None:
    """Fill ``disk`` to the last byte (``filler``, then ``filler-tail`` for the last partial block)."""
    for name, block in (("filler", 1 << 16), ("filler-tail", 1)):
        fd = os.open(disk / name, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while True:
                os.write(fd, b"\0" * block)
        except OSError:
            pass
        finally:
            os.close(fd)


def test_a_full_disk_refuses_the_request_before_any_owner_is_invited_and_the_server_serves_on(tmp_path, small_disk):
    state = small_disk / "state"
    market = Market(tmp_path, "--log-level", "INFO", state=state)
    try:
        wait_for(lambda: owners_present(market))
        fill(small_disk)
        proc = market.request("alice", "out-full")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 2, (out, err)
        assert "could not write the session's files" in err and "nothing was charged" in err, err
        assert market.proc.poll() is None  # still serving
        for owner in ("owner-1", "owner-2", "owner-3"):
            assert entries(state, owner) == []  # nobody was invited, nothing reserved
        (small_disk / "filler").unlink()
        (small_disk / "filler-tail").unlink()
        proc = market.request("alice", "out-after")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (out, err)
    finally:
        assert market.stop()[0] == 0


def test_requests_of_a_consumer_that_has_gone_are_dropped_before_any_owner_is_invited(tmp_path):
    market = Market(tmp_path, "--max-sessions", "1")
    try:
        wait_for(lambda: owners_present(market))
        first = market.request("alice", "out-first", "sketch.samples=600000")
        wait_for(lambda: (tmp_path / "out-first" / "scenario.yaml").exists(), why="alice's session never started")
        gone = market.request("bob", "out-gone")
        wait_for(lambda: status(market)["queued"], why="bob's request was never queued")  # behind alice's
        os.killpg(gone.pid, signal.SIGKILL)
        gone.communicate(timeout=60)
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, (out, err)
        wait_for(lambda: any(s["consumer"] == "bob" for s in status(market)["sessions"]))
        (bob,) = [s for s in status(market)["sessions"] if s["consumer"] == "bob"]
        assert bob["status"] == "dropped" and bob["owners_invited"] == 0
        for owner in ("owner-1", "owner-2", "owner-3"):
            assert all(r.consumer != "bob" for r in entries(market.state, owner))
        assert not (market.state / "sessions" / bob["session"]).exists()
    finally:
        assert market.stop()[0] == 0


def test_the_client_learns_within_seconds_that_the_server_is_gone_and_says_whether_anything_was_charged(tmp_path):
    market = Market(tmp_path, "--max-sessions", "1")
    wait_for(lambda: owners_present(market))
    running = market.request("alice", "out-running", "sketch.samples=600000")
    wait_for(lambda: (tmp_path / "out-running" / "scenario.yaml").exists(), why="alice's session never started")
    queued = market.request("bob", "out-queued")
    wait_for(lambda: status(market)["queued"], why="bob's request was never queued")
    os.killpg(market.proc.pid, signal.SIGKILL)  # the server and the agents it started
    market.proc.communicate(timeout=60)
    t0 = time.monotonic()
    out, err = queued.communicate(timeout=120)  # its --wait is 300 s: it must not wait it out
    assert queued.returncode == 3, err
    assert "closed the connection" in err and "had not started" in err and "nothing was charged" in err, err
    out, err = running.communicate(timeout=120)
    assert running.returncode == 3, err
    assert "closed the connection" in err and "may have been charged" in err, err
    assert time.monotonic() - t0 < 100


def test_a_killed_agent_is_started_again_and_its_owners_serve_the_next_request(tmp_path):
    market = Market(tmp_path, "--owners-per-process", "1")
    try:
        wait_for(lambda: owners_present(market))
        agents = [p for p in tree(market.proc.pid) if p != market.proc.pid]
        assert len(agents) == 3
        os.kill(agents[0], signal.SIGKILL)
        wait_for(lambda: status(market).get("agent_restarts", 0) >= 1, why="the agent was not started again")
        wait_for(lambda: owners_present(market), why="the restarted agent's owner did not come back")
        proc = market.request("alice", "out")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (out, err)
        assert json.loads((tmp_path / "out" / "report.json").read_text())["lifetime"]["declined"] == []
    finally:
        assert market.stop()[0] == 0
