"""A consumer allowed while the marketplace serves: its key is admitted without a restart (a public
key dropped into STATE/keys/consumers/, or `marketplace keys consumer`), a removed key is refused for
new connections, and a stranger's key stays refused."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq
import zmq.auth
from conftest import ROOT
from test_serve import MARKET, free_port
from zmq.utils.monitor import recv_monitor_message

from marketplace.service import control
from marketplace.service.keys import find_own_key, load_pair, load_public
from marketplace.transport.context import new_context

pytestmark = pytest.mark.slow

BAD_REQUEST = control.SessionOpen(scenario="name: bad-request\nprotocol: no-such-protocol\n")


def control_reply(endpoint: str, kit: Path, message: control._Message, timeout_s: float = 60.0) -> object:
    """The marketplace's first control reply to ``message`` sent with the consumer key of ``kit``, or
    ``"refused"`` when the handshake refuses the key (what `marketplace request` sees)."""
    _, secret_path = find_own_key(kit)
    public, secret = load_pair(secret_path)
    ctx = new_context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.curve_secretkey, sock.curve_publickey = secret, public
    sock.curve_serverkey = load_public(kit / "server.key")
    monitor = sock.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    try:
        sock.connect(endpoint)
        sock.send(control.encode(message))
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(monitor, zmq.POLLIN)
        ready = dict(poller.poll(timeout_s * 1000))
        if monitor in ready and recv_monitor_message(monitor)["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            return "refused"
        assert sock in ready, f"no reply from {endpoint} in {timeout_s} s"
        return control.decode(sock.recv())
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        ctx.term()


def outside_kit(folder: Path, name: str, state: Path) -> Path:
    """A consumer's kit made away from the marketplace (its own key pair, the server's public key)."""
    folder.mkdir(parents=True)
    zmq.auth.create_certificates(str(folder), name)
    shutil.copyfile(state / "keys" / "server.key", folder / "server.key")
    return folder


def test_a_key_added_while_serving_is_admitted_a_removed_one_refused_and_a_strangers_still_refused(tmp_path):
    import marketplace

    state = tmp_path / "state"
    with marketplace.serve(
        MARKET,
        state,
        endpoint=f"tcp://127.0.0.1:{free_port()}",
        consumers=["alice"],
        start_owners=False,
        session_port=free_port(),
    ) as market:
        alice = control_reply(market.endpoint, state / "consumers" / "alice", BAD_REQUEST)
        assert isinstance(alice, control.SessionRefused) and "no-such-protocol" in alice.reason
        erin = outside_kit(tmp_path / "erin", "erin", state)
        assert control_reply(market.endpoint, erin, BAD_REQUEST) == "refused"  # not allowed yet
        # allowed while it serves: its public key dropped into STATE/keys/consumers/, no restart
        shutil.copyfile(erin / "erin.key", state / "keys" / "consumers" / "erin.key")
        reply = control_reply(market.endpoint, erin, BAD_REQUEST)
        assert isinstance(reply, control.SessionRefused) and "no-such-protocol" in reply.reason, reply
        # and one made by the command, while it serves
        done = subprocess.run(
            [sys.executable, "-m", "marketplace", "keys", "consumer", "dave", "--market", str(state)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, done.stderr
        reply = control_reply(market.endpoint, state / "consumers" / "dave", BAD_REQUEST)
        assert isinstance(reply, control.SessionRefused) and "no-such-protocol" in reply.reason, reply
        stranger = outside_kit(tmp_path / "mallory", "mallory", state)
        assert control_reply(market.endpoint, stranger, BAD_REQUEST) == "refused"
        # removed: refused for new connections (from the allowlist's next check, at most a second on)
        (state / "keys" / "consumers" / "erin.key").unlink()
        deadline = time.monotonic() + 30
        while control_reply(market.endpoint, erin, BAD_REQUEST) != "refused":
            assert time.monotonic() < deadline, "a removed key is still admitted"
            time.sleep(0.2)
        assert isinstance(
            control_reply(market.endpoint, state / "consumers" / "alice", BAD_REQUEST), control.SessionRefused
        )
    assert market.exit_status == 0


def test_a_consumer_made_by_the_command_while_serving_is_served(tmp_path):
    """The page's flow: `serve`, then `marketplace keys consumer dave --market STATE` while it runs,
    then dave's `marketplace request` is served and charged as dave's."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    state, endpoint = tmp_path / "state", f"tcp://127.0.0.1:{free_port()}"
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "marketplace",
            "serve",
            str(ROOT / "scenarios" / "market-serve.yaml"),
            "--state",
            str(state),
            "--endpoint",
            endpoint,
            "--session-port",
            str(free_port()),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (state / "server.json").exists():
            assert serve.poll() is None, serve.communicate()
            assert time.monotonic() < deadline, "the marketplace did not start"
            time.sleep(0.1)
        keys = subprocess.run(
            [sys.executable, "-m", "marketplace", "keys", "consumer", "dave", "--market", "state"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert keys.returncode == 0, keys.stderr
        assert f"--market {endpoint} --keys state/consumers/dave" in keys.stdout
        request = subprocess.run(
            [
                sys.executable,
                "-m",
                "marketplace",
                "request",
                str(ROOT / "scenarios" / "sketch-quickstart.yaml"),
                "--market",
                endpoint,
                "--keys",
                "state/consumers/dave",
                "--set",
                "sketch.epsilon=0.4",
                "--out",
                "out",
                "--quiet",
            ],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert request.returncode == 0, request.stderr
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        assert report["status"] == "completed" and report["lifetime"]["consumer"] == "dave"
        sessions = json.loads((state / "server.json").read_text())["sessions"]
        assert [(s["consumer"], s["status"]) for s in sessions] == [("dave", "completed")]
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=120)
        assert serve.returncode == 0, err
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
