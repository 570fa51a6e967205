"""What keeps the processes driver fast at scale without changing what it does: the curator's
listen backlog, how often a loop scans its peers, and the order a broadcast leaves in. (Their
speed-ups are measured in benchmarks/bench_scale.py, not timed here.)"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import QUICKSTART, ROOT
from system_tools import skip_unless_tools

from marketplace.transport.tuning import LIVENESS_CHECK_S, check_interval, listen_backlog


@contextmanager
def bound_curator(tmp_path: Path, *settings: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """A plaintext curator of QUICKSTART with ``settings`` (``--set`` values), bound and waiting for
    its parties: (its process, its port). Killed on the way out."""
    endpoint_file = tmp_path / "endpoint"
    overrides = [arg for item in settings for arg in ("--set", item)]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "marketplace",
            "curator",
            "--scenario",
            str(QUICKSTART),
            "--endpoint",
            "tcp://127.0.0.1:0",
            "--endpoint-file",
            str(endpoint_file),
            "--insecure",
            *overrides,
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not endpoint_file.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert endpoint_file.exists(), proc.stderr.read() if proc.poll() is not None else "no endpoint within 60 s"
        yield proc, endpoint_file.read_text().rsplit(":", 1)[1]
    finally:
        proc.kill()
        proc.wait()


def test_the_curator_listens_with_room_for_every_party_to_connect_at_once(tmp_path):
    """ZeroMQ's default backlog (100) drops SYNs when hundreds of owners connect at once under
    CURVE; each dropped owner then waits a second for TCP to retry. The curator's listening socket
    must hold every party. `ss` shows a listening socket's backlog in its Send-Q column."""
    skip_unless_tools("ss", why="reads the curator's listen backlog")
    owners = 300
    with bound_curator(tmp_path, f"parties.owners={owners}") as (_, port):
        lines = subprocess.run(
            ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True
        ).stdout.split()
        backlog = int(lines[2])  # State Recv-Q Send-Q ...: Send-Q of a listening socket is its backlog
        somaxconn = int(open("/proc/sys/net/core/somaxconn").read())
        assert backlog == min(listen_backlog(owners + 2), somaxconn) >= owners + 2


def test_listen_backlog_never_goes_below_zeromqs_default():
    assert listen_backlog(3) == 100
    assert listen_backlog(1000) == 1064


@pytest.mark.parametrize("interval", [0.02, 0.05, 0.5, 2.0])
def test_peer_checks_run_often_for_few_peers_and_stay_within_half_a_heartbeat_for_many(interval):
    assert check_interval(3, interval) == min(LIVENESS_CHECK_S, interval)
    for peers in (1, 16, 256, 1000, 100_000):
        every = check_interval(peers, interval)
        assert min(LIVENESS_CHECK_S, interval) <= every <= max(min(LIVENESS_CHECK_S, interval), interval / 2)
    assert check_interval(100_000, interval) == max(min(LIVENESS_CHECK_S, interval), interval / 2)
    assert check_interval(1000, 0.5) > check_interval(256, 0.5) > check_interval(16, 0.5)


def test_a_broadcast_reaches_every_block_of_owners_early_and_keeps_each_owners_order():
    """The curator sends a round to owner-1..owner-256 so that owners served by different hosts
    (contiguous blocks) are reached in turn, never reordering two frames to the same owner."""
    from marketplace.transport.node import Outgoing
    from marketplace.transport.tuning import spread_order, spread_receivers

    for n in (1, 2, 7, 8, 10, 256, 1000):
        assert sorted(spread_order(n)) == list(range(n))
    owners = [f"owner-{i}" for i in range(1, 257)]
    frames = [Outgoing(o, "target_embedding", b"t" + o.encode()) for o in owners]
    frames += [Outgoing(o, "round_open", b"r" + o.encode()) for o in owners]
    sent = spread_receivers(frames)
    assert sorted(sent) == sorted(frames)
    for owner in owners:  # each owner's frames in their order
        assert [f.kind for f in sent if f.receiver == owner] == ["target_embedding", "round_open"]
    first = [int(f.receiver.split("-")[1]) for f in sent[::2][:8]]
    for hosts in (2, 4, 8):  # the first `hosts` receivers lie in `hosts` different blocks
        assert len({(i - 1) * hosts // 256 for i in first[:hosts]}) == hosts
    few = frames[:3]
    assert spread_receivers(few) == few


def test_heartbeats_stretch_with_the_number_of_parties_and_keep_their_ratio():
    """Up to interval / HEARTBEAT_S_PER_PARTY parties nothing changes; beyond, interval and timeout
    grow together, so the timeout still spans as many missed heartbeats (and stays above two)."""
    from marketplace.transport.tuning import HEARTBEAT_S_PER_PARTY, scaled_heartbeats

    assert scaled_heartbeats(0.5, 10.0, 6) == (0.5, 10.0)
    assert scaled_heartbeats(0.5, 10.0, 1000) == (0.5, 10.0)
    interval, timeout = scaled_heartbeats(0.5, 10.0, 10_002)
    assert interval == pytest.approx(10_002 * HEARTBEAT_S_PER_PARTY) and interval > 0.5
    assert timeout / interval == pytest.approx(20.0)
    for parties in (3, 100, 1_000, 2_500, 10_002, 100_002):
        i, t = scaled_heartbeats(0.2, 1.0, parties)
        assert i >= 0.2 and t > 2 * i


def test_link_settings_carry_the_stretched_heartbeats_of_the_whole_run(tmp_path):
    """Every party derives its heartbeats from the run's party count, so both ends of a connection agree."""
    from conftest import tiny_raw

    from marketplace.runtime.links import link_settings
    from marketplace.scenario import parse_scenario

    raw = tiny_raw()
    raw["parties"] = {"owners": 10_000}
    raw["transport"] = {"heartbeat_interval_s": 0.5, "heartbeat_timeout_s": 10.0}
    settings = link_settings(parse_scenario(raw, source="big", base_dir=tmp_path))
    assert settings.heartbeat_interval_s == pytest.approx(5.001) and settings.heartbeat_timeout_s == pytest.approx(
        100.02
    )


def test_io_threads_grow_with_the_connections_a_context_serves():
    from marketplace.transport.tuning import CONNECTIONS_PER_IO_THREAD, io_threads

    assert io_threads(0) == io_threads(3) == io_threads(CONNECTIONS_PER_IO_THREAD) == 1
    assert io_threads(CONNECTIONS_PER_IO_THREAD + 1) == 2
    assert io_threads(10_002) == 6


def test_a_curator_of_many_parties_spreads_their_connections_over_io_threads(tmp_path):
    """libzmq cancels a timer by walking all of its I/O thread's timers, so one thread holding
    thousands of connections spends its core on that walk: a curator for 4,500 owners runs three
    I/O threads (their names are in /proc)."""
    from marketplace.transport.tuning import io_threads

    with bound_curator(tmp_path, "parties.owners=4500", "data.partition.scheme=even") as (proc, _):
        # each I/O thread names itself once it runs, which may come after the bind: poll the names
        deadline = time.monotonic() + 30
        while True:
            names = [Path(task, "comm").read_text().strip() for task in Path(f"/proc/{proc.pid}/task").iterdir()]
            io = sum(name.startswith("ZMQbg/IO/") for name in names)
            if io >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert io == io_threads(4502) == 3, names
