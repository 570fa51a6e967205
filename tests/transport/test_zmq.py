"""Real sockets: a live curator under bad input, and parties that crash in the middle of a run."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import pytest
import yaml
import zmq
from conftest import ROOT
from process_probes import alive, pid_of

from marketplace.messages import PROTOCOL_VERSION, Envelope, encode
from marketplace.messages.kinds import Hello
from marketplace.protocols.summarize.messages import Bid
from marketplace.scenario import load_scenario
from marketplace.scenario.fingerprint import fingerprint

pytestmark = pytest.mark.slow


def _frame(sender: str, kind_body, msg_id: int, run_id: str = "tiny-seed11", receiver: str = "curator") -> bytes:
    return encode(Envelope(PROTOCOL_VERSION, run_id, msg_id, sender, receiver, type(kind_body).KIND, None, kind_body))


def _recv_non_heartbeat(sock: zmq.Socket, timeout_s: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if sock.poll(200):
            msg = msgpack.unpackb(sock.recv())
            if msg["kind"] != "heartbeat":
                return msg
    raise AssertionError("no reply from the curator")


@pytest.fixture
def live_curator(tiny_scenario, tmp_path, zmq_context):
    tiny_scenario["transport"]["start_timeout_s"] = 60.0
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    endpoint_file = tmp_path / "endpoint"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "marketplace",
            "curator",
            "--scenario",
            str(path),
            "--endpoint",
            "tcp://127.0.0.1:0",
            "--endpoint-file",
            str(endpoint_file),
            "--insecure",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not endpoint_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    sock = zmq_context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IDENTITY, b"owner-1")
    sock.connect(endpoint_file.read_text())
    yield proc, sock, fingerprint(load_scenario(path).config)
    sock.close()
    proc.kill()
    proc.wait()


def test_live_curator_answers_bad_frames_with_errors_and_keeps_serving(live_curator):
    proc, sock, fp = live_curator
    sock.send(b"\x00garbage that is not msgpack")
    reply = _recv_non_heartbeat(sock)
    assert reply["kind"] == "error" and reply["body"]["code"] == "bad_message"
    assert "<frame>" in reply["body"]["detail"]

    sock.send(
        _frame("owner-2", Hello(role="owner", protocol="summarize", scenario="tiny", config=fp), 1)
    )  # spoofed sender
    reply = _recv_non_heartbeat(sock)
    assert reply["kind"] == "error" and "'sender'" in reply["body"]["detail"]

    wire = msgpack.unpackb(_frame("owner-1", Bid(round=1, value=0.5, available=True), 2))
    wire["body"]["value"] = float("nan")
    sock.send(msgpack.packb(wire))
    reply = _recv_non_heartbeat(sock)
    assert reply["kind"] == "error" and "body.value" in reply["body"]["detail"]

    sock.send(_frame("owner-1", Bid(round=1, value=0.5, available=True), 3))  # well formed, wrong time
    reply = _recv_non_heartbeat(sock)
    assert reply["kind"] == "error" and reply["body"]["code"] == "protocol"

    sock.send(
        _frame("owner-1", Hello(role="owner", protocol="summarize", scenario="tiny", config=fp), 4)
    )  # valid: accepted silently
    assert not any(msgpack.unpackb(sock.recv())["kind"] == "error" for _ in range(3) if sock.poll(300))
    assert proc.poll() is None  # still serving


def _pids_in_logs(out: Path, expected: int, timeout_s: float = 30) -> list[int]:
    """The PIDs every process of a run announced in its log (parties, and owner hosts)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = [
            int(m)
            for log in (out / "logs").glob("*.log")
            for m in re.findall(r"\(pid (\d+)\)", log.read_text(errors="replace"))
        ]
        if len(pids) >= expected:
            return pids
        time.sleep(0.02)
    raise AssertionError(f"fewer than {expected} processes started")


def _long_run(
    tiny_scenario, tmp_path, launch: str = "forkserver", owners_per_process: int | str = 1
) -> tuple[subprocess.Popen, Path]:
    tiny_scenario["parties"]["owners_per_process"] = owners_per_process
    tiny_scenario["data"]["source"]["covariate_shift"]["rows_per_component"] = 600
    tiny_scenario["summarize"]["rounds"] = 1000  # the owners hold ~2,100 rows
    tiny_scenario["transport"].update(heartbeat_interval_s=0.1, heartbeat_timeout_s=1.0)
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "marketplace", "run", str(path), "--out", str(out), "--quiet", "--launch", launch],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return proc, out


def _wait_for_round(out: Path, round_no: int, timeout_s: float = 60) -> None:
    log = out / "logs" / "curator.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists() and f"round {round_no}/" in log.read_text(errors="replace"):
            return
        time.sleep(0.02)
    raise AssertionError(f"the run never reached round {round_no}")


@pytest.mark.parametrize("launch", ["forkserver", "exec"])
def test_an_owner_killed_mid_run_is_dropped_and_the_run_completes(tiny_scenario, tmp_path, launch):
    proc, out = _long_run(tiny_scenario, tmp_path, launch)
    _wait_for_round(out, 20)
    os.kill(pid_of(out, "owner-2"), signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    report = json.loads((out / "report.json").read_text())
    assert proc.returncode == 0, stderr
    assert report["status"] == "completed"
    assert report["dropouts"]["owner-2"]["round"] >= 20
    selection = [tuple(s) for s in report["selection"]]
    assert len(selection) == len(set(selection)) == 1000  # nothing lost or counted twice
    assert report["parsimony"]["points_seen"] == 1000 + report["parsimony"]["validation_size"]
    owner2_rounds = [i for i, (o, *_) in enumerate(selection, start=1) if o == "owner-2"]
    assert not owner2_rounds or max(owner2_rounds) <= report["dropouts"]["owner-2"]["round"]
    replay = report["checks"]["central_replay"]  # the dropout replayed: the protocol did what it should
    assert replay["matches"] is True and replay["dropouts_replayed"] == {
        "owner-2": report["dropouts"]["owner-2"]["round"]
    }
    assert report["owners_lost"]["summary"].startswith("1 of 3 owners lost: owner-2 (round ")


@pytest.mark.parametrize(("launch", "per_process"), [("forkserver", 1), ("exec", 1), ("forkserver", 2), ("exec", 3)])
def test_the_curator_dying_fails_the_run_clearly_and_leaves_no_orphans(tiny_scenario, tmp_path, launch, per_process):
    proc, out = _long_run(tiny_scenario, tmp_path, launch, per_process)
    _wait_for_round(out, 20)
    curator = pid_of(out, "curator")
    parties = [pid for pid in _pids_in_logs(out, 2 + -(-3 // per_process)) if pid != curator]
    os.kill(curator, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 3
    assert "curator exited with status -9" in stderr
    assert len(parties) == 1 + -(-3 // per_process) and not any(alive(pid) for pid in parties + [curator])
    report = json.loads((out / "report.json").read_text())
    assert report["status"] == "failed"


@pytest.mark.parametrize(("launch", "per_process"), [("forkserver", 1), ("exec", 1), ("forkserver", 3), ("exec", 2)])
def test_killing_the_runner_itself_leaves_no_orphans(tiny_scenario, tmp_path, launch, per_process):
    proc, out = _long_run(tiny_scenario, tmp_path, launch, per_process)
    _wait_for_round(out, 20)
    parties = _pids_in_logs(out, 2 + -(-3 // per_process))
    proc.kill()  # SIGKILL: the runner gets no chance to clean up
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 15
    while any(alive(pid) for pid in parties) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in parties)


@pytest.mark.parametrize(("setting", "status"), [("summarize.rounds=5", 0), ("summarize.rounds=-1", 2)])
def test_a_finished_run_leaves_no_process_behind(tmp_path, setting, status):
    """Not the parties, not the forkserver, not multiprocessing's resource tracker: after
    `marketplace run` exits, its session holds no live process. The forkserver starts before the
    scenario is read (so that it imports meanwhile): a scenario refused then stops it too."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "marketplace",
            "run",
            str(ROOT / "scenarios" / "quickstart.yaml"),
            "--set",
            setting,
            "--out",
            str(tmp_path / "run"),
            "--quiet",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        text=True,
    )
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == status, stderr
    if status:
        assert "bad scenario" in stderr and "rounds" in stderr
    session = proc.pid  # start_new_session: the runner leads its own session
    left = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == session and fields[0] != "Z":  # field 6 of stat: session id
                left.append(int(entry.name))
    assert left == []
