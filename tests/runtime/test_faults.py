"""Faults with real processes: an owner stopped (SIGSTOP), computing for long or forever, a consumer
killed, a curator hung. Short heartbeats (interval 0.2 s, timeout 2 s) keep every test to seconds; every wait is
bounded.

An owner killed with SIGKILL and a curator killed with SIGKILL are in tests/transport/test_zmq.py; the
20-trial random-round version of both owner faults is benchmarks/bench_faults.py.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from process_probes import alive, pid_of

pytestmark = pytest.mark.slow

HEARTBEAT_TIMEOUT_S = 2.0
DETECTION_SLACK_S = 1.5
"""Allowed beyond the heartbeat timeout: the liveness check period, the last heartbeat's age, and a
loaded 2-core machine's scheduling."""
PARTIES = ("curator", "owner-1", "owner-2", "owner-3", "consumer")


def long_scenario(tiny_scenario: dict, tmp_path: Path, *, rounds: int = 1000, **transport) -> Path:
    """The tiny scenario with ~2,100 owner rows and many short rounds, and short heartbeats."""
    tiny_scenario["data"]["source"]["covariate_shift"]["rows_per_component"] = 600
    tiny_scenario["summarize"]["rounds"] = rounds
    tiny_scenario["parties"]["owners_per_process"] = 1  # a fault of one owner's process is a fault of that owner only
    tiny_scenario["transport"].update(
        heartbeat_interval_s=0.2, heartbeat_timeout_s=HEARTBEAT_TIMEOUT_S, start_timeout_s=60.0, **transport
    )
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    return path


def _die_with_test() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def start(cmd: list[str], log: Path | None = None) -> subprocess.Popen:
    out = log.open("wb") if log else subprocess.PIPE
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        stdout=out,
        stderr=subprocess.STDOUT if log else subprocess.PIPE,
        preexec_fn=_die_with_test,
        text=log is None,
    )


def marketplace_run(scenario: Path, out: Path) -> subprocess.Popen:
    return start([sys.executable, "-m", "marketplace", "run", str(scenario), "--out", str(out), "--quiet"])


def wait_for(path: Path, pattern: str, timeout_s: float = 90) -> re.Match:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists():
            match = re.search(pattern, path.read_text(errors="replace"))
            if match:
                return match
        time.sleep(0.02)
    raise AssertionError(f"{path.name} never showed {pattern!r} within {timeout_s:g} s")


def log_time(line: str) -> float:
    """The epoch time of a log line (logging's asctime: local time, milliseconds)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def dropout(curator_log: Path, party: str) -> tuple[float, int]:
    """When the curator logged ``party``'s dropout, and in which round."""
    match = wait_for(
        curator_log, rf"(?m)^(.{{23}}) curator WARNING owner {party} dropped out in round (\d+)", timeout_s=30
    )
    return log_time(match.group(1)), int(match.group(2))


def assert_nothing_lost_or_counted_twice(result: dict, rounds: int, party: str, dropout_round: int) -> None:
    selection = [tuple(s) for s in result["selection"]]
    assert len(selection) == len(set(selection)) == rounds  # every round got a point, none twice
    assert result["parsimony"]["points_seen"] == rounds + result["parsimony"]["validation_size"]  # none lost in flight
    dropped_rounds = [r for r, (owner, *_) in enumerate(selection, start=1) if owner == party]
    assert all(r <= dropout_round for r in dropped_rounds)  # accepted only while it was active


def test_a_stopped_owner_is_detected_within_the_heartbeat_timeout_and_the_protocol_completes(tiny_scenario, tmp_path):
    out = tmp_path / "run"
    proc = marketplace_run(long_scenario(tiny_scenario, tmp_path), out)
    try:
        wait_for(out / "logs" / "curator.log", r"round 20/")
        pids = [pid_of(out, p) for p in PARTIES]
        stopped_at = time.time()
        os.kill(pids[2], signal.SIGSTOP)  # owner-2

        detected_at, round_no = dropout(out / "logs" / "curator.log", "owner-2")
        proc.communicate(timeout=120)
    finally:
        proc.kill()

    assert detected_at - stopped_at <= HEARTBEAT_TIMEOUT_S + DETECTION_SLACK_S
    report = json.loads((out / "report.json").read_text())
    curator = report["party_details"]["curator"]["result"]
    assert report["dropouts"]["owner-2"]["round"] == round_no >= 20
    assert curator["end_reason"] == "all rounds done"
    assert report["party_details"]["consumer"]["result"]["metrics"]["mmd2"] is not None  # the consumer got its summary
    assert_nothing_lost_or_counted_twice(report, 1000, "owner-2", round_no)
    assert report["checks"]["central_replay"]["matches"] is True  # the dropout replayed
    assert not any(alive(pid) for pid in pids)  # the stopped owner too


def test_a_run_whose_owner_is_stopped_completes_with_exit_status_0(tiny_scenario, tmp_path):
    out = tmp_path / "run"
    proc = marketplace_run(long_scenario(tiny_scenario, tmp_path, rounds=300), out)
    try:
        wait_for(out / "logs" / "curator.log", r"round 20/")
        os.kill(pid_of(out, "owner-2"), signal.SIGSTOP)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()

    report = json.loads((out / "report.json").read_text())
    assert "owner-2" in report["dropouts"]
    assert (proc.returncode, report["status"]) == (0, "completed"), stderr


def run_with_a_busy_owner(
    tiny_scenario, tmp_path, *, busy_from: int, rounds: int, busy_for: float | None, **transport
) -> tuple[float, dict[str, int | None], bool]:
    """The curator, owner-1, owner-3 and the consumer as `marketplace` parties, and owner-2 from
    tests/busy_owner.py, which spins in its ``handle`` once round ``busy_from`` opens (for
    ``busy_for`` seconds, or forever). Returns when it started spinning, every exit status (owner-2's
    None if it was still spinning and had to be killed), and whether it was still spinning."""
    tiny_scenario["transport"]["security"] = "none"  # parties started one by one, without a key folder
    scenario = long_scenario(tiny_scenario, tmp_path, rounds=rounds, **transport)
    logs = tmp_path / "logs"
    logs.mkdir()
    party = [sys.executable, "-m", "marketplace"]
    endpoint_file = tmp_path / "endpoint"
    procs = {
        "curator": start(
            party
            + [
                "curator",
                "--scenario",
                str(scenario),
                "--endpoint",
                "tcp://127.0.0.1:0",
                "--endpoint-file",
                str(endpoint_file),
                "--report",
                str(tmp_path / "curator.json"),
            ],
            logs / "curator.log",
        )
    }
    busy = ["--busy-from", str(busy_from)] + (["--busy-for", str(busy_for)] if busy_for is not None else [])
    try:
        endpoint = wait_for(endpoint_file, r"tcp://\S+", timeout_s=60).group(0)
        for owner in ("owner-1", "owner-3"):
            procs[owner] = start(
                party + ["owner", "--scenario", str(scenario), "--endpoint", endpoint, "--id", owner],
                logs / f"{owner}.log",
            )
        procs["consumer"] = start(
            party + ["consumer", "--scenario", str(scenario), "--endpoint", endpoint], logs / "consumer.log"
        )
        procs["owner-2"] = start(
            [
                sys.executable,
                str(ROOT / "tests" / "busy_owner.py"),
                "--scenario",
                str(scenario),
                "--endpoint",
                endpoint,
                "--id",
                "owner-2",
                *busy,
            ],
            logs / "owner-2.log",
        )

        busy_at = log_time(
            wait_for(logs / "owner-2.log", rf"(?m)^.{{23}} owner-2 WARNING busy from round {busy_from}").group(0)
        )
        exits: dict[str, int | None] = {
            p: procs[p].wait(timeout=120) for p in ("curator", "owner-1", "owner-3", "consumer")
        }
        if busy_for is not None:
            exits["owner-2"] = procs["owner-2"].wait(timeout=60)
        still_spinning = procs["owner-2"].poll() is None
        exits.setdefault("owner-2", procs["owner-2"].poll())
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    return busy_at, exits, still_spinning


def test_an_owner_computing_for_several_heartbeat_timeouts_is_not_lost_and_the_run_completes(tiny_scenario, tmp_path):
    """owner-2's role computes in Python for three heartbeat timeouts, its loop sending nothing: the
    ZMTP heartbeats its I/O thread answers keep it connected, and its bid, late, still counts."""
    busy_from, rounds, busy_for = 5, 60, 3 * HEARTBEAT_TIMEOUT_S
    _, exits, _ = run_with_a_busy_owner(tiny_scenario, tmp_path, busy_from=busy_from, rounds=rounds, busy_for=busy_for)
    assert "busy for 6 s done" in (tmp_path / "logs" / "owner-2.log").read_text()
    assert exits == {"curator": 0, "owner-1": 0, "owner-3": 0, "consumer": 0, "owner-2": 0}
    curator = json.loads((tmp_path / "curator.json").read_text())
    assert curator["status"] == "completed"
    assert curator["result"]["dropouts"] == {}
    assert "lost" not in (tmp_path / "logs" / "curator.log").read_text()
    assert_nothing_lost_or_counted_twice(curator["result"], rounds, "owner-2", rounds)


def test_an_owner_that_never_returns_from_its_computation_is_dropped_by_the_progress_deadline(tiny_scenario, tmp_path):
    """owner-2 spins forever: alive (its connection answers), so liveness never drops it; the curator
    waits for its bid for ``progress_timeout_s``, drops it as stuck, and the run completes."""
    busy_from, rounds, progress_s = 5, 200, 3 * HEARTBEAT_TIMEOUT_S
    busy_at, exits, still_spinning = run_with_a_busy_owner(
        tiny_scenario, tmp_path, busy_from=busy_from, rounds=rounds, busy_for=None, progress_timeout_s=progress_s
    )
    detected_at, round_no = dropout(tmp_path / "logs" / "curator.log", "owner-2")
    assert still_spinning  # alive all along
    assert progress_s <= detected_at - busy_at + 0.01  # not before its deadline: never lost for its silence
    assert detected_at - busy_at <= progress_s + DETECTION_SLACK_S
    assert round_no == busy_from
    assert {p: exits[p] for p in ("curator", "owner-1", "owner-3", "consumer")} == {
        "curator": 0,
        "owner-1": 0,
        "owner-3": 0,
        "consumer": 0,
    }
    curator = json.loads((tmp_path / "curator.json").read_text())
    assert curator["status"] == "completed"
    assert curator["result"]["dropouts"] == {
        "owner-2": {
            "round": busy_from,
            "phase": "bidding",
            "reason": f"no a bid for round {busy_from} within progress_timeout_s={progress_s:g}",
        }
    }
    assert_nothing_lost_or_counted_twice(curator["result"], rounds, "owner-2", round_no)


def test_a_killed_consumer_fails_the_run_clearly_and_leaves_no_orphans(tiny_scenario, tmp_path):
    out = tmp_path / "run"
    proc = marketplace_run(long_scenario(tiny_scenario, tmp_path), out)
    try:
        wait_for(out / "logs" / "curator.log", r"round 20/")
        pids = [pid_of(out, p) for p in PARTIES]
        killed_at = time.monotonic()
        os.kill(pids[-1], signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
        took = time.monotonic() - killed_at
    finally:
        proc.kill()

    assert proc.returncode == 3
    # lost mid-run, or (when the rounds finish first) never confirming the summary: failed either way
    assert "the consumer was lost" in stderr or "the consumer never confirmed" in stderr, stderr
    assert "consumer exited with status -9" in stderr
    assert took <= HEARTBEAT_TIMEOUT_S + 10
    assert not any(alive(pid) for pid in pids)
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "failed"
    assert all(
        report["party_details"][o]["result"]["end_status"] == "failed" for o in ("owner-1", "owner-2", "owner-3")
    )


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (to clean up after a test that kills the runner itself)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def hang_the_curator(tiny_scenario, tmp_path) -> tuple[subprocess.Popen, Path, dict[str, int], list[int]]:
    out = tmp_path / "run"
    proc = marketplace_run(long_scenario(tiny_scenario, tmp_path, rounds=3000, run_timeout_s=600.0), out)
    wait_for(out / "logs" / "curator.log", r"round 20/")
    pids = dict(zip(PARTIES, (pid_of(out, p) for p in PARTIES)))
    below = descendants(proc.pid)  # the forkserver and multiprocessing's resource tracker too
    time.sleep(0.5)  # > 2 heartbeat intervals: every party has heard the curator before it stops
    os.kill(pids["curator"], signal.SIGSTOP)
    return proc, out, pids, below


def test_a_hung_curator_is_detected_by_every_party_within_the_heartbeat_timeout(tiny_scenario, tmp_path):
    """The runner's own path for a killed curator is in test_zmq.py; here the curator stops."""
    proc, out, pids, below = hang_the_curator(tiny_scenario, tmp_path)
    try:
        hung_at = time.time()
        lost_at = {
            party: log_time(
                wait_for(
                    out / "logs" / f"{party}.log",
                    r"(?m)^.{23} \S+ WARNING \S+ peer curator lost: its connection closed",
                    timeout_s=HEARTBEAT_TIMEOUT_S + 28,
                ).group(0)
            )
            for party in PARTIES[1:]
        }
        deadline = time.monotonic() + 15
        while any(alive(pids[p]) for p in PARTIES[1:]) and time.monotonic() < deadline:
            time.sleep(0.05)
        others_alive = [p for p in PARTIES[1:] if alive(pids[p])]
    finally:
        proc.kill()
        kill_all(below)
        proc.communicate(timeout=30)

    assert all(t - hung_at <= HEARTBEAT_TIMEOUT_S + DETECTION_SLACK_S for t in lost_at.values()), lost_at
    assert others_alive == []
    for party in PARTIES[1:]:
        assert "run failed: lost contact with curator" in (out / "logs" / f"{party}.log").read_text()


def test_the_runner_ends_a_run_whose_curator_hangs_within_the_heartbeat_timeout_and_a_grace(tiny_scenario, tmp_path):
    proc, out, pids, below = hang_the_curator(tiny_scenario, tmp_path)
    try:
        _, stderr = proc.communicate(timeout=HEARTBEAT_TIMEOUT_S + 45)
    except subprocess.TimeoutExpired:
        pytest.fail("the runner was still waiting 47 s after the curator hung")
    finally:
        proc.kill()
        kill_all(below)
        proc.communicate(timeout=30)
    assert proc.returncode == 3 and "curator" in stderr


def test_killing_the_runner_while_the_curator_hangs_leaves_no_orphans(tiny_scenario, tmp_path):
    proc, out, pids, below = hang_the_curator(tiny_scenario, tmp_path)
    try:
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15
        while any(alive(pid) for pid in below) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in below if alive(pid)]
    finally:
        kill_all(below)
    assert left == []
