"""CURVE on the real ZeroMQ driver: only allowlisted keys get in, a key cannot speak for another
party, and what travels is not plaintext."""

from __future__ import annotations

import socket
import threading
import time

import numpy as np
import pytest
import zmq
from conftest import run_cli

from marketplace.messages import PROTOCOL_VERSION, Envelope, encode
from marketplace.messages.kinds import Hello
from marketplace.protocols.summarize.messages import Point
from marketplace.roles import CURATOR, Role
from marketplace.transport.curve import CurveError, CurveKeys, PartyAuthenticator, generate_keys
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.node import Node
from marketplace.transport.zmq_driver import serve_curator

PATTERN = np.full(8, 1234.5678125)  # a float64 pattern that is easy to find in a byte stream


class Recorder(Role):
    """A curator stand-in that records what reaches it and stops after ``wanted`` messages."""

    role_name = "curator"

    def __init__(self, wanted: int = 1) -> None:
        super().__init__()
        self.party_id = CURATOR
        self.seen: list[tuple[str, str]] = []
        self.wanted = wanted

    def start(self):
        return []

    def expected_peers(self):
        return ()

    def handle(self, message):
        self.seen.append((message.sender, message.kind))
        self.done = len(self.seen) >= self.wanted
        return []


def start_curator(keys: str | None, run_timeout_s: float = 3.0, max_message_bytes: int = 64 << 20):
    role = Recorder()
    node = Node(role, run_id="r", max_message_bytes=1 << 20)
    bound: list[str] = []
    settings = LinkSettings(
        heartbeat_interval_s=0.2,
        heartbeat_timeout_s=2.0,
        start_timeout_s=5.0,
        run_timeout_s=run_timeout_s,
        curve_keys=keys,
        max_message_bytes=max_message_bytes,
    )
    thread = threading.Thread(
        target=serve_curator, args=(node, "tcp://127.0.0.1:0", settings), kwargs={"on_bound": bound.append}, daemon=True
    )
    thread.start()
    while not bound:
        time.sleep(0.01)
    return role, node, bound[0], thread


def frame(sender: str, body=None) -> bytes:
    body = body or Hello(role="owner", protocol="summarize", scenario="s")
    return encode(Envelope(PROTOCOL_VERSION, "r", 1, sender, CURATOR, type(body).KIND, None, body))


def client(ctx, endpoint: str, identity: str, keys: CurveKeys | None):
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IDENTITY, identity.encode())
    if keys is not None:
        keys.configure_client(sock)
    sock.connect(endpoint)
    return sock


@pytest.fixture
def key_dir(tmp_path):
    generate_keys(tmp_path / "keys", owners=2)
    return tmp_path / "keys"


def test_an_allowlisted_key_with_its_own_identity_gets_through(key_dir, zmq_context):
    role, node, endpoint, thread = start_curator(str(key_dir))
    ctx = zmq_context
    sock = client(ctx, endpoint, "owner-1", CurveKeys(key_dir, "owner-1"))
    sock.send(frame("owner-1"))
    thread.join(10)
    ctx.destroy(0)
    assert role.seen == [("owner-1", "hello")]


def test_an_unknown_key_is_refused(key_dir, tmp_path, zmq_context):
    generate_keys(tmp_path / "other", owners=2)  # a valid certificate the curator never listed
    role, node, endpoint, thread = start_curator(str(key_dir), run_timeout_s=2.0)
    ctx = zmq_context
    stranger = CurveKeys(tmp_path / "other", "owner-1")
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IDENTITY, b"owner-1")
    public, secret = stranger.own()
    sock.curve_publickey, sock.curve_secretkey = public, secret
    sock.curve_serverkey = CurveKeys(key_dir, "owner-1").curator_public()
    sock.connect(endpoint)
    sock.send(frame("owner-1"))
    thread.join(10)
    ctx.destroy(0)
    assert role.seen == [] and "run timeout" in (role.failure or "")


def test_a_known_key_claiming_another_identity_is_refused(key_dir, zmq_context):
    role, node, endpoint, thread = start_curator(str(key_dir), run_timeout_s=2.0)
    ctx = zmq_context
    impostor = client(ctx, endpoint, "owner-1", CurveKeys(key_dir, "owner-2"))  # owner-2's key, owner-1's name
    impostor.send(frame("owner-1"))
    thread.join(10)
    ctx.destroy(0)
    assert role.seen == []
    assert node.counters.rejected.get("bad_message") == 1  # refused: the key makes it owner-2, the frame says owner-1
    assert "expected the connection's own identity 'owner-2', got 'owner-1'" in node.errors[0]


class Tap:
    """A loopback TCP relay that records every byte going from the client to the curator."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("tcp://").rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.endpoint = f"tcp://127.0.0.1:{self.listener.getsockname()[1]}"
        self.captured = bytearray()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        upstream = socket.create_connection(self.target)
        threading.Thread(target=self._pump, args=(upstream, conn, False), daemon=True).start()
        self._pump(conn, upstream, True)

    def _pump(self, src, dst, record: bool) -> None:
        try:
            while data := src.recv(65536):
                if record:
                    self.captured += data
                dst.sendall(data)
        except OSError:
            pass


@pytest.mark.parametrize("curve", [True, False], ids=["curve", "plaintext-control"])
def test_traffic_is_not_plaintext_under_curve(key_dir, curve, zmq_context):
    role, node, endpoint, thread = start_curator(str(key_dir) if curve else None)
    tap = Tap(endpoint)
    ctx = zmq_context
    sock = client(ctx, tap.endpoint, "owner-1", CurveKeys(key_dir, "owner-1") if curve else None)
    sock.send(frame("owner-1", Point(round=1, x=PATTERN, y=1, row=3)))
    thread.join(10)
    time.sleep(0.1)
    ctx.destroy(0)
    assert role.seen == [("owner-1", "point")]
    found = PATTERN.astype("<f8").tobytes() in bytes(tap.captured)
    assert found is (not curve)  # the control proves the tap would see the pattern in the clear


def test_a_missing_key_file_is_named(tmp_path):
    with pytest.raises(CurveError, match="owner-1.key_secret: key file not found"):
        CurveKeys(tmp_path, "owner-1").own()


def test_a_party_without_keys_or_insecure_refuses_to_start(tmp_path):
    from conftest import QUICKSTART

    result = run_cli("owner", "--scenario", str(QUICKSTART), "--endpoint", "tcp://127.0.0.1:1", "--id", "owner-1")
    assert result.returncode == 2
    assert "pass --keys DIR" in result.stderr and "--insecure" in result.stderr


def test_keys_generate_writes_one_pair_per_party_and_refuses_to_overwrite(tmp_path):
    result = run_cli("keys", "generate", str(tmp_path / "k"), "--owners", "3")
    assert result.returncode == 0, result.stderr
    names = sorted(p.name for p in (tmp_path / "k").iterdir())
    assert names == sorted(
        f"{p}.{ext}"
        for p in ("curator", "owner-1", "owner-2", "owner-3", "consumer")
        for ext in ("key", "key_secret", "noise_key")
    )
    assert oct((tmp_path / "k" / "owner-1.key_secret").stat().st_mode & 0o777) == "0o600"
    again = run_cli("keys", "generate", str(tmp_path / "k"), "--owners", "3")
    assert again.returncode == 2 and "refusing to overwrite" in again.stderr


@pytest.mark.slow
def test_a_whole_run_over_curve_with_exec_launch_matches_plaintext(tiny_scenario, tmp_path):
    from marketplace.runner.run import run_scenario
    from marketplace.scenario import parse_scenario

    secure = run_scenario(
        parse_scenario(tiny_scenario, source="t", base_dir=tmp_path), tmp_path / "c", driver="processes", launch="exec"
    )
    tiny_scenario["transport"]["security"] = "none"
    plain = run_scenario(
        parse_scenario(tiny_scenario, source="t", base_dir=tmp_path), tmp_path / "p", driver="processes"
    )
    assert secure["status"] == "completed", secure["failures"]
    assert secure["transport_security"].startswith("curve") and plain["transport_security"].startswith("none")
    assert secure["selection"] == plain["selection"] and secure["metrics"] == plain["metrics"]
    assert (tmp_path / "c" / "keys" / "owner-1.key_secret").exists()


# --- limits at the socket ------------------------------------------------------------------------


def test_an_oversized_frame_is_cut_at_the_socket_logged_and_the_curator_keeps_serving(caplog, zmq_context):
    import logging

    role, node, endpoint, thread = start_curator(None, run_timeout_s=5.0, max_message_bytes=1 << 20)
    ctx = zmq_context
    with caplog.at_level(logging.WARNING, logger="marketplace.transport.zmq_driver"):
        big = client(ctx, endpoint, "owner-1", None)
        big.send(b"\x00" * (2 << 20))  # over max_message_bytes = 1 MiB: ZeroMQ drops the connection
        time.sleep(0.5)
        good = client(ctx, endpoint, "owner-2", None)
        good.send(frame("owner-2"))
        thread.join(10)
    ctx.destroy(0)
    assert role.seen == [("owner-2", "hello")]  # nothing of the big frame reached the role
    assert any(
        "a connection was dropped" in r.getMessage() and "max_message_bytes = 1048576" in r.getMessage()
        for r in caplog.records
    )


def test_a_flooding_sender_is_held_back_by_the_high_water_marks(zmq_context):
    """The queues between two configured sockets are bounded: a sender that floods a receiver that
    does not read is told to wait (EAGAIN) after about the two high-water marks, not buffered forever."""
    from marketplace.transport.sockets import configure_socket as _configure

    settings = LinkSettings(high_water_mark=50, send_timeout_s=0.05)
    ctx = zmq_context
    receiver = ctx.socket(zmq.ROUTER)
    _configure(receiver, settings)
    port = receiver.bind_to_random_port("tcp://127.0.0.1")
    sender = ctx.socket(zmq.DEALER)
    _configure(sender, settings)
    sender.connect(f"tcp://127.0.0.1:{port}")
    payload = b"\x01" * 65536
    accepted = 0
    try:
        for _ in range(10_000):
            sender.send(payload, zmq.NOBLOCK)
            accepted += 1
    except zmq.Again:
        pass
    finally:
        ctx.destroy(0)
    assert accepted < 10_000
    # 50 + 50 queued frames, plus what the kernel's loopback buffers hold (a few MiB of 64 KiB frames)
    assert accepted <= 2 * 50 + 200, accepted


# --- the ZAP handler, request by request (ZeroMQ RFC 27) -------------------------------------------


def zap_request(
    key: bytes, *, mechanism: bytes = b"CURVE", version: bytes = b"1.0", address: bytes = b"127.0.0.1"
) -> list[bytes]:
    return [version, b"7", b"", address, b"", mechanism, key]


@pytest.fixture
def zap(key_dir, zmq_context):
    auth = PartyAuthenticator(zmq_context, CurveKeys(key_dir, CURATOR).allowlist())
    yield auth
    auth.stop()  # then zmq_context closes what a failed test left open instead of waiting for it


def test_zap_admits_an_allowlisted_curve_key_and_names_its_party(zap, key_dir):
    public, _ = CurveKeys(key_dir, "owner-2").own()
    assert zap.answer(zap_request(zmq.utils.z85.decode(public))) == [b"1.0", b"7", b"200", b"OK", b"owner-2", b""]
    assert zap.refused == 0


def test_zap_refuses_unknown_keys_other_mechanisms_versions_and_malformed_requests(zap, key_dir, caplog):
    public, _ = CurveKeys(key_dir, "owner-1").own()
    known = zmq.utils.z85.decode(public)
    stranger = zmq.utils.z85.decode(zmq.curve_keypair()[0])
    for request in (
        zap_request(stranger),
        zap_request(stranger),  # the second is counted, not logged again
        zap_request(known, mechanism=b"NULL"),
        zap_request(known, mechanism=b"PLAIN"),
        zap_request(known, version=b"2.0"),
        zap_request(known[:31]),
        zap_request(known) + [b"extra"],
        [b"1.0", b"7", b"", b""],
    ):
        reply = zap.answer(request)
        assert reply[:3] == [b"1.0", b"7", b"400"] and reply[4] == b"", (request, reply)
    assert zap.answer([b"1.0"]) is None  # nothing names the request: no reply can be addressed
    assert zap.refused == 2
    warnings = [r.getMessage() for r in caplog.records if "refused a CURVE handshake" in r.getMessage()]
    assert len(warnings) == 1 and "127.0.0.1" in warnings[0]


def test_zap_handler_answers_on_the_wire_and_stops(zap, key_dir, monkeypatch):
    """The handler serves the context's ZAP endpoint: a request sent there as libzmq sends it
    (REQ envelope) gets its reply; after stop() the endpoint is free again. Its poll interval is
    made a minute long here, so a handler that stop() did not wake would still be alive after
    stop() returns (stop waits at most 5 s for it): no bound in seconds on the test's own clock."""
    from marketplace.transport import curve

    monkeypatch.setattr(curve, "ZAP_POLL_MS", 60_000)
    zap.start()
    req = zap.context.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.connect("inproc://zeromq.zap.01")
    public, _ = CurveKeys(key_dir, "consumer").own()
    req.send_multipart(zap_request(zmq.utils.z85.decode(public)))
    assert req.poll(5000)
    assert req.recv_multipart()[2:5] == [b"200", b"OK", b"consumer"]
    req.close()
    zap.stop()  # woken at once, not at its next poll (ZAP_POLL_MS): a curator's exit waits for it
    assert not zap._thread.is_alive()
    again = zap.context.socket(zmq.ROUTER)
    try:  # ZeroMQ releases a closed socket's endpoint in its reaper thread: give it a moment
        deadline = time.monotonic() + 5.0
        while True:
            try:
                again.bind("inproc://zeromq.zap.01")
                break
            except zmq.ZMQError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
    finally:
        again.close(linger=0)
