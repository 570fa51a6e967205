"""Parties started by hand, as separate `marketplace` processes with provisioned kits: a refused
CURVE handshake is reported on both sides within seconds, and a healthy run (probed like a
container healthcheck) logs no warning at all."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import tiny_raw

from marketplace.provision import provision
from marketplace.scenario import parse_scenario

pytestmark = pytest.mark.slow


def kits_for(tmp_path: Path, name: str, raw: dict, endpoint: str) -> Path:
    scenario = parse_scenario(raw, source="tiny", base_dir=tmp_path)
    provision(scenario, tmp_path / name, endpoint=endpoint, bind="tcp://127.0.0.1:0")
    return tmp_path / name


def start(kit: Path, log: Path, *extra: str) -> subprocess.Popen:
    """The kit's start.sh, run the way a person would (`sh kits/<party>/start.sh`)."""
    with open(log, "w") as out:
        return subprocess.Popen(
            ["sh", str(kit / "start.sh"), *extra], stdout=out, stderr=subprocess.STDOUT, cwd=kit.parent.parent
        )


def start_curator(kits: Path, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    endpoint_file = tmp_path / "endpoint"
    proc = start(
        kits / "curator", tmp_path / "curator.log", "--endpoint-file", str(endpoint_file), "--no-report", *extra
    )
    deadline = time.monotonic() + 30
    while not endpoint_file.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "curator.log").read_text()
        time.sleep(0.05)
    return proc, endpoint_file.read_text()


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


@pytest.fixture
def raw():
    scenario = tiny_raw()
    scenario["transport"]["start_timeout_s"] = 60.0  # a refusal must be reported long before this
    return scenario


def test_an_owner_holding_another_provisionings_kit_stops_within_seconds_and_both_sides_say_why(raw, tmp_path):
    kits = kits_for(tmp_path, "kits", raw, "tcp://127.0.0.1:1")
    stranger = kits_for(tmp_path, "other", raw, "tcp://127.0.0.1:1")
    curator, endpoint = start_curator(kits, tmp_path)
    try:
        t0 = time.monotonic()
        owner = subprocess.run(
            ["sh", str(stranger / "owner-1" / "start.sh"), "--endpoint", endpoint, "--no-report"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        elapsed = time.monotonic() - t0
        time.sleep(0.3)
    finally:
        stop(curator)
    assert owner.returncode == 3, owner.stderr
    assert elapsed < 10, f"took {elapsed:.1f} s: the refusal should not wait for start_timeout_s"
    assert "refused the CURVE handshake" in owner.stderr and "Check the keys folder" in owner.stderr
    assert str(stranger / "owner-1") in owner.stderr
    curator_log = (tmp_path / "curator.log").read_text()
    assert "does not hold this curator's public key" in curator_log
    assert curator_log.count("failed the CURVE handshake") == 1, "one line, not one per retry"


def test_an_owner_whose_key_is_unknown_is_refused_and_the_curator_names_its_address(raw, tmp_path):
    kits = kits_for(tmp_path, "kits", raw, "tcp://127.0.0.1:1")
    stranger = kits_for(tmp_path, "other", raw, "tcp://127.0.0.1:1")
    shutil.copy(kits / "owner-1" / "curator.key", stranger / "owner-1" / "curator.key")  # the right curator
    curator, endpoint = start_curator(kits, tmp_path)
    try:
        t0 = time.monotonic()
        owner = subprocess.run(
            ["sh", str(stranger / "owner-1" / "start.sh"), "--endpoint", endpoint, "--no-report"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        elapsed = time.monotonic() - t0
        time.sleep(0.3)
    finally:
        stop(curator)
    assert owner.returncode == 3 and elapsed < 10, owner.stderr
    assert "refused this party's CURVE key" in owner.stderr and "Check the keys folder" in owner.stderr
    curator_log = (tmp_path / "curator.log").read_text()
    public = yaml.safe_load((stranger / "owner-1" / "kit.json").read_text())["own_public_key"]
    assert f"refused a CURVE handshake from 127.0.0.1: its public key {public}" in curator_log
    assert curator_log.count("refused a CURVE handshake") == 1


def test_a_healthy_run_probed_like_a_healthcheck_logs_no_warning(raw, tmp_path):
    kits = kits_for(tmp_path, "kits", raw, "tcp://127.0.0.1:1")
    curator, endpoint = start_curator(kits, tmp_path)
    procs = {"curator": curator}
    try:
        for _ in range(3):  # what the compose healthcheck does every second
            probe = subprocess.run(
                [sys.executable, "-m", "marketplace", "probe", endpoint], capture_output=True, timeout=30
            )
            assert probe.returncode == 0, probe.stderr
        for party in ("owner-1", "owner-2", "owner-3", "consumer"):
            procs[party] = start(kits / party, tmp_path / f"{party}.log", "--endpoint", endpoint, "--no-report")
        codes = {party: proc.wait(120) for party, proc in procs.items()}
    finally:
        for proc in procs.values():
            stop(proc)
    logs = {party: (tmp_path / f"{party}.log").read_text() for party in procs}
    assert codes == dict.fromkeys(procs, 0), logs
    noisy = {
        party: [line for line in text.splitlines() if " WARNING " in line or " ERROR " in line]
        for party, text in logs.items()
    }
    assert noisy == dict.fromkeys(procs, []), noisy
    assert "curator finished" in logs["curator"]


def test_a_connection_dropped_mid_run_without_bye_is_still_a_warning(caplog):
    """The quiet shutdown does not silence real drops: the watch counts drops that no bye explains."""
    import logging

    import zmq

    from marketplace.transport.monitor import ConnectionWatch

    watch = ConnectionWatch("curator", "server", "tcp://x:1", 1 << 20)
    for event in (
        zmq.EVENT_ACCEPTED,
        zmq.EVENT_HANDSHAKE_SUCCEEDED,
        zmq.EVENT_ACCEPTED,
        zmq.EVENT_HANDSHAKE_SUCCEEDED,
        zmq.EVENT_ACCEPTED,
        zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
        zmq.EVENT_DISCONNECTED,  # a probe
        zmq.EVENT_DISCONNECTED,
        zmq.EVENT_DISCONNECTED,
    ):  # two parties gone
        watch.on_event(event, 0)
    with caplog.at_level(logging.DEBUG, logger="marketplace.transport.zmq_driver"):
        watch.check_drops(explained=1, now=100.0)  # one said bye; the other drop waits for its grace
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
        watch.check_drops(explained=1, now=102.0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "a connection was dropped that no bye or lost peer explains" in warnings[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="marketplace.transport.zmq_driver"):
        watch.check_drops(explained=1, final=True)
    assert not caplog.records, "each drop is reported once"
