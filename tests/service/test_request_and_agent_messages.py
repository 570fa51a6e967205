"""What `marketplace request` and `marketplace agent` say about a marketplace that answers late or not
at all, against a stand-in marketplace of the test's own (a CURVE ROUTER with the state's server key)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zmq
from conftest import ROOT
from test_serve import free_port

from marketplace.service import control
from marketplace.service.client import RequestFailed, request
from marketplace.service.keys import SERVER, init_keys, load_pair
from marketplace.transport.context import new_context

pytestmark = pytest.mark.slow

WAIT_S = 8.0
"""The request's wait: long enough for the stand-in's answer to arrive on a busy machine."""


class StandIn:
    """A marketplace that answers every request "queued" and then says nothing (it pings its owners)."""

    def __init__(self, state: Path) -> None:
        self.ctx = new_context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        public, secret = load_pair(state / "keys" / f"{SERVER}.key_secret")
        self.sock.curve_secretkey, self.sock.curve_publickey, self.sock.curve_server = secret, public, True
        self.endpoint = f"tcp://127.0.0.1:{free_port()}"
        self.sock.bind(self.endpoint)
        self.queued = threading.Event()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.done.is_set():
            if not self.sock.poll(50):
                continue
            routing, frame = self.sock.recv_multipart()
            message = control.decode(frame)
            if isinstance(message, control.SessionOpen):
                self.sock.send_multipart(
                    [routing, control.encode(control.SessionQueued(session="s0001-x", position=3))]
                )
                self.queued.set()
            elif isinstance(message, control.OwnerJoin):
                self.sock.send_multipart([routing, control.encode(control.Ping())])

    def close(self) -> None:
        self.done.set()
        self.thread.join()
        self.sock.close(linger=0)
        self.ctx.term()


@pytest.fixture
def state(tmp_path) -> Path:
    folder = tmp_path / "state"
    init_keys(folder, owners=1, consumers=["alice"])
    return folder


def test_a_request_queued_and_never_started_says_so_not_that_nobody_answered(state, tmp_path):
    market = StandIn(state)
    try:
        with pytest.raises(RequestFailed) as err:
            request(
                "name: x\n",
                market=market.endpoint,
                keys=state / "consumers" / "alice",
                out=tmp_path / "out",
                wait_s=WAIT_S,
            )
        assert market.queued.is_set()
    finally:
        market.close()
    text = str(err.value)
    assert "no answer" not in text, text
    assert (
        f"session s0001-x was queued (the marketplace answered) but did not start within the wait of {WAIT_S:g} s"
        in (text)
    )
    assert "(--wait)" in text and "nothing was charged" in text, text


def test_a_request_that_fails_is_a_run_failed_with_no_report(state, tmp_path):
    """``except marketplace.RunFailed`` catches a request the Python API could not see through:
    ``marketplace.RequestFailed`` is exported and is a ``RunFailed`` whose ``report`` is None."""
    import marketplace

    assert marketplace.RequestFailed is RequestFailed and issubclass(RequestFailed, marketplace.RunFailed)
    market = StandIn(state)
    try:
        with pytest.raises(marketplace.RunFailed) as err:
            marketplace.request(
                ROOT / "scenarios" / "sketch-quickstart.yaml",
                market=market.endpoint,
                keys=state / "consumers" / "alice",
                out=tmp_path / "out",
                wait_s=WAIT_S,
            )
    finally:
        market.close()
    assert isinstance(err.value, marketplace.RequestFailed) and err.value.report is None
    assert "did not start within the wait" in str(err.value), err.value


def agent(state: Path, endpoint: str, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "marketplace", "agent", "--market", endpoint, "--keys", str(state / "owners")]
            + ["--ids", "owner-1", "--work", str(state / "agent")],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=out,
            start_new_session=True,
        )


def wait_for_line(log: Path, text: str, proc: subprocess.Popen, deadline_s: float = 120.0) -> str:
    deadline = time.monotonic() + deadline_s
    while text not in log.read_text():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"the agent never logged {text!r}: {log.read_text()}"
        time.sleep(0.1)
    return log.read_text()


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_an_agent_says_connected_only_once_the_marketplace_answered(state, tmp_path):
    nowhere = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    log = tmp_path / "nowhere.log"
    proc = agent(state, nowhere, log)
    try:
        wait_for_line(log, f"connecting to {nowhere}", proc)
        proc.send_signal(signal.SIGTERM)  # the agent leaves: its log is whole
        proc.wait(timeout=120)
    finally:
        stop(proc)
    assert proc.returncode == 0, log.read_text()
    assert "connected" not in log.read_text(), log.read_text()

    market = StandIn(state)
    log = tmp_path / "there.log"
    proc = agent(state, market.endpoint, log)
    try:
        text = wait_for_line(log, f"owner-1 connected to {market.endpoint}", proc)
    finally:
        stop(proc)
        market.close()
    assert text.index(f"connecting to {market.endpoint}") < text.index("owner-1 connected")
