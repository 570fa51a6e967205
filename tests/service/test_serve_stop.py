"""Stopping a served marketplace under any signals: SIGTERM to its whole process group, again and
again (as systemd's control-group kill or `timeout` sends it), and the server still exits cleanly,
without starting again any agent that left because of it."""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from pathlib import Path

import pytest
from conftest import ROOT
from test_serve import STARTED, Market, free_port, no_process_left  # noqa: F401 - the fixture kills what a test leaves

import marketplace

pytestmark = pytest.mark.slow

STOP_DEADLINE_S = 60.0
"""Generous: the server has no session to finish, only its agents to see leave."""


def status(state: Path) -> dict:
    try:
        return json.loads((state / "server.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.mark.parametrize("stream", [False, True], ids=["twice", "a-stream"])
def test_sigterm_to_the_whole_group_again_and_again_stops_cleanly_and_restarts_no_agent(tmp_path, stream):
    """SIGTERM to the group twice in quick succession, or again and again until the server has gone
    (each may land while the server, or an agent, still handles the one before): the server exits 0
    within the deadline, no agent is started again, no process of the group is left."""
    market = Market(tmp_path, "--owners-per-process", "1")
    deadline = time.monotonic() + 120
    while status(market.state).get("owners_present") != 3:
        assert market.proc.poll() is None, market.proc.communicate()
        assert time.monotonic() < deadline, "the marketplace did not come up with its 3 owners"
        time.sleep(0.1)
    group = os.getpgid(market.proc.pid)
    assert group == market.proc.pid  # its own group: the agents it started, and nothing of the test's
    signalled = time.monotonic()
    os.killpg(group, signal.SIGTERM)
    os.killpg(group, signal.SIGTERM)
    while stream and market.proc.poll() is None and time.monotonic() < signalled + 3.0:
        try:
            os.killpg(group, signal.SIGTERM)
        except ProcessLookupError:
            break
    deadline = signalled + STOP_DEADLINE_S
    while market.proc.poll() is None:
        assert time.monotonic() < deadline, f"marketplace serve did not stop within {STOP_DEADLINE_S:g} s"
        time.sleep(0.1)
    out, err = market.proc.communicate()
    assert market.proc.returncode == 0, err
    assert "marketplace stopped after 0 sessions" in err, err
    assert "starting it again" not in err, err
    assert status(market.state).get("agent_restarts") == 0
    logs = "".join(p.read_text() for p in (market.state / "agents").glob("*/agent.log"))
    assert "Traceback" not in logs and "Error" not in logs, logs
    deadline = time.monotonic() + STOP_DEADLINE_S
    while True:  # the agents leave with the server (they exit with it, or on the signal)
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline, "an agent of the stopped marketplace is still running"
        time.sleep(0.1)


def test_stop_signals_are_recorded_and_their_pipe_left_empty():
    """The handler only records; the pipe the server polls is drained by each look, so a burst of
    signals never leaves it readable (a poller that woke at once, forever, would spin the server)."""
    import select

    from marketplace.service.stop_signals import StopSignals

    signals = StopSignals().install()
    try:
        assert not signals.requested()
        for _ in range(200):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert signals.requested() and signals.received in (signal.SIGTERM, signal.SIGINT)
        assert select.select([signals.fileno()], [], [], 0)[0] == []
        os.kill(os.getpid(), signal.SIGINT)
        assert select.select([signals.fileno()], [], [], 0)[0] == [signals.fileno()]
        assert signals.requested()
        assert select.select([signals.fileno()], [], [], 0)[0] == []
    finally:
        signals.uninstall()


def test_a_signal_caught_mid_replacement_is_not_reported_as_an_error_once_stopped():
    """CPython reports a signal that lands while its handler is replaced as an unraisable OSError
    "ignored due to race condition" (bpo-43406), traceback and all; once a stopped process ignores the
    stop signals that report is left out, and any other unraisable error is still reported."""
    import subprocess
    import sys

    code = (
        "import sys, types\n"
        "from marketplace.cli.common import ignore_stop_signals\n"
        "seen = []\n"
        "sys.unraisablehook = lambda u: seen.append(str(u.exc_value))\n"
        "ignore_stop_signals()\n"
        "sys.unraisablehook(types.SimpleNamespace(exc_value=OSError('Signal 15 ignored due to race condition')))\n"
        "sys.unraisablehook(types.SimpleNamespace(exc_value=ValueError('anything else')))\n"
        "print(seen)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['anything else']"


def test_a_normal_stop_of_the_python_api_says_nothing_of_lost_connections(tmp_path, caplog, capfd):
    """``marketplace.serve(...)`` started and stopped as usual (its owners all connected): the agents
    leave because they were told to, so nothing is said of a connection gone (that line is for a
    real loss), and the log says once that the agents were told to stop."""
    caplog.set_level(logging.INFO, logger="marketplace.serve")
    state = tmp_path / "market"
    with marketplace.serve(
        ROOT / "scenarios" / "market-serve.yaml",
        state=state,
        consumers=["alice"],
        endpoint=f"tcp://127.0.0.1:{free_port()}",
        session_port=free_port(),
    ):
        deadline = time.monotonic() + 120
        while status(state).get("owners_present") != 4:
            assert time.monotonic() < deadline, "the marketplace did not come up with its 4 owners"
            time.sleep(0.1)
    out, err = capfd.readouterr()
    lines = [r.getMessage() for r in caplog.records if r.name == "marketplace.serve"]
    assert "connection is gone" not in out + err and not [m for m in lines if "connection is gone" in m], lines
    told = [m for m in lines if "told to stop" in m]
    assert told == ["stopping: the agents of the 4 owners connected were told to stop"], lines
