"""A marketplace that stays open: `marketplace serve`, owner agents and `marketplace request`, as
separate processes over CURVE, with the owners' lifetime ledgers surviving a restart."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

pytestmark = pytest.mark.slow

MARKET = {
    "name": "tiny-market",
    "protocol": "sketch",
    "seed": 3,
    "parties": {"owners": 3},
    "data": {
        "source": {
            "kind": "covariate_shift",
            "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 200},
        },
        "partition": {"scheme": "by_group", "skew": 0.8},
        "consumer": {"target_groups": [0], "validation_size": 25, "test_size": 25},
        "seed_set": {"size": 0},
    },
    "sketch": {"lower": [-12, -12, -12], "upper": [12, 12, 12]},
    "transport": {"start_timeout_s": 20, "heartbeat_interval_s": 0.25, "heartbeat_timeout_s": 2.0},
    "lifetime": {"ledgers": "ledgers", "budget": {"epsilon": 1.0}, "owner_budgets": {"owner-2": {"epsilon": 0.3}}},
}
"""The served marketplace of the service tests (test_serve_faults and test_serve_new_consumer import it):
three owners of a small synthetic world, each with a lifetime ledger, owner-2 on a smaller budget."""
REQUEST = {
    "name": "tiny-request",
    "protocol": "sketch",
    "data": {"consumer": {"target_groups": [1], "validation_size": 25, "test_size": 25}},
    "sketch": {
        "lower": [-12, -12, -12],
        "upper": [12, 12, 12],
        "map": {"kind": "rff", "features": 40, "sigma": 0.5},
        "epsilon": 0.25,
        "samples": 2000,
        "queries": {"moments": 1, "covariance": False, "random_counts": 2},
    },
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_process_left():
    """Whatever a test leaves running (a failed assertion before its stop) is killed, with its children."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()


def cli(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kwargs.setdefault("start_new_session", True)  # a process group of its own: killed whole if left over
    proc = subprocess.Popen(
        [sys.executable, "-m", "marketplace", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )
    STARTED.append(proc)
    return proc


class Market:
    def __init__(
        self,
        tmp: Path,
        *extra: str,
        consumers: str = "alice,bob,carol",
        state: Path | None = None,
        market: dict | None = None,
        request: dict | None = None,
    ) -> None:
        """``market`` and ``request``: the marketplace's file and the request's (default MARKET, REQUEST)."""
        self.tmp = tmp
        self.state = state or tmp / "state"
        self.port = free_port()
        self.endpoint = f"tcp://127.0.0.1:{self.port}"
        self.file = tmp / "market.yaml"
        self.file.write_text(yaml.safe_dump(market or MARKET))
        (tmp / "request.yaml").write_text(yaml.safe_dump(request or REQUEST))
        self.proc = cli(
            "serve",
            str(self.file),
            "--state",
            str(self.state),
            "--endpoint",
            self.endpoint,
            "--consumers",
            consumers,
            *extra,
            cwd=tmp,
        )
        deadline = time.monotonic() + 60
        while not (self.state / "server.json").exists():
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the marketplace did not start"
            time.sleep(0.1)

    def request(
        self, consumer: str, out: str, *sets: str, keys: Path | None = None, relative: bool = False, **kwargs
    ) -> subprocess.Popen:
        """``relative``: --out as a path relative to the request's working folder (the test's)."""
        return cli(
            "request",
            str(self.tmp / "request.yaml"),
            "--market",
            self.endpoint,
            "--keys",
            str(keys or self.state / "consumers" / consumer),
            "--out",
            out if relative else str(self.tmp / out),
            "--quiet",
            "--wait",
            "300",
            *[a for s in sets for a in ("--set", s)],
            **({"cwd": self.tmp} if relative else {}),
            **kwargs,
        )

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, err


def report(folder: Path) -> dict:
    return json.loads((folder / "report.json").read_text())


def test_three_consumers_from_separate_processes_then_a_restart_keeps_every_ledger(tmp_path):
    market = Market(tmp_path)
    try:
        requests = {c: market.request(c, f"out-{c}", relative=c == "carol") for c in ("alice", "bob", "carol")}
        for consumer, proc in requests.items():
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, (consumer, out, err)
        reports = {c: report(tmp_path / f"out-{c}") for c in requests}
        sessions = {r["run_id"] for r in reports.values()}
        assert len(sessions) == 3  # one session each
        for consumer, r in reports.items():
            assert r["status"] == "completed" and r["driver"] == "market" and r["lifetime"]["consumer"] == consumer
            assert r["transport_security"].startswith("curve")
            assert r["lifetime"]["request_id"] == r["run_id"]
        # owner-2 (eps 0.3) paid for the first request it served, then declined the others
        declined = [r["lifetime"]["declined"] for r in reports.values()]
        assert sorted(map(tuple, declined)) == [(), ("owner-2",), ("owner-2",)]
        ledgers = market.state / "owners"
        with LifetimeLedger.read(ledger_file(ledgers, "owner-1")) as ledger:
            assert ledger.spent().eps == pytest.approx(0.75)
            assert sorted(r.consumer for r in ledger.history()) == ["alice", "bob", "carol"]
        status, err = market.stop()
        assert status == 0, err
        assert "marketplace stopped after 3 sessions" in err
    finally:
        if market.proc.poll() is None:
            market.proc.kill()
    again = Market(tmp_path)  # same state folder: same keys, same ledgers
    try:
        proc = again.request("alice", "out-again")
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, (out, err)
        after = report(tmp_path / "out-again")["lifetime"]["owners"]
        assert after["owner-1"]["spent"]["eps"] == pytest.approx(1.0) and after["owner-1"]["state"] == "committed"
        assert after["owner-2"]["state"] == "declined"
    finally:
        assert again.stop()[0] == 0


def test_strangers_bad_requests_and_a_vanishing_consumer_end_only_their_own_request(tmp_path):
    market = Market(tmp_path, consumers="alice,bob")
    try:
        # a key the marketplace does not know is refused at the handshake
        import zmq.auth

        stranger = tmp_path / "stranger"
        stranger.mkdir()
        zmq.auth.create_certificates(str(stranger), "mallory")
        (stranger / "server.key").write_text((market.state / "keys" / "server.key").read_text())
        proc = market.request("mallory", "out-mallory", keys=stranger)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and "refused the key of 'mallory'" in err, err
        # a request that cannot run here is refused, naming the key; nothing starts
        proc = market.request("alice", "out-bad", "sketch.epsilon=-1")
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 2 and "sketch.epsilon" in err, err
        # alice vanishes mid-session (its whole process group killed): only its session fails
        alice = market.request("alice", "out-alice", "sketch.samples=2000000")
        deadline = time.monotonic() + 120
        while not (tmp_path / "out-alice" / "scenario.yaml").exists():  # written when its session starts
            assert time.monotonic() < deadline and alice.poll() is None, "alice's session never got going"
            time.sleep(0.05)
        bob = market.request("bob", "out-bob")
        time.sleep(1.0)  # alice's consumer is connected and at work: now it vanishes
        os.killpg(alice.pid, signal.SIGKILL)
        alice.communicate(timeout=60)
        out, err = bob.communicate(timeout=300)
        assert bob.returncode == 0, (out, err)
        assert report(tmp_path / "out-bob")["status"] == "completed"
        assert not (tmp_path / "out-bob" / "report.json").read_text().count("alice")  # bob sees nothing of alice's
        # alice's session ends once its curator has lost her, which may come after bob's report
        deadline = time.monotonic() + 120
        while True:
            sessions = json.loads((market.state / "server.json").read_text())["sessions"]
            if len(sessions) == 2 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert sorted((s["consumer"], s["status"]) for s in sessions) == [("alice", "failed"), ("bob", "completed")]
        alice_session = next(s for s in sessions if s["consumer"] == "alice")
        alice_report = json.loads((market.state / "sessions" / alice_session["session"] / "report.json").read_text())
        # it vanished before its bye (the curator lost it) or after, in its own work before its report
        failures = " ".join(alice_report["failures"])
        assert "consumer was lost" in failures or "(the consumer left)" in failures, alice_report["failures"]
    finally:
        status, err = market.stop()
        assert status == 0, err


def test_sigterm_refuses_what_is_queued_and_finishes_what_runs(tmp_path):
    market = Market(tmp_path, "--max-sessions", "1")
    first = market.request("alice", "out-first", "sketch.samples=400000")
    deadline = time.monotonic() + 120
    while not (tmp_path / "out-first" / "scenario.yaml").exists():  # written when its session starts
        assert time.monotonic() < deadline
        time.sleep(0.05)
    queued = market.request("bob", "out-queued")
    while not json.loads((market.state / "server.json").read_text())["queued"]:  # bob's waits behind alice's
        assert time.monotonic() < deadline + 120 and queued.poll() is None, queued.communicate()
        time.sleep(0.05)
    status, err = market.stop()
    assert status == 0, err
    out, err_first = first.communicate(timeout=300)
    assert first.returncode == 0, err_first
    assert report(tmp_path / "out-first")["status"] == "completed"
    out, err_queued = queued.communicate(timeout=120)
    assert queued.returncode == 2 and "the marketplace is stopping" in err_queued, err_queued
    assert not (tmp_path / "out-queued" / "report.json").exists()


def test_owners_started_by_hand_join_and_the_python_api_serves_and_requests(tmp_path):
    import marketplace

    (tmp_path / "market.yaml").write_text(yaml.safe_dump(MARKET))
    (tmp_path / "request.yaml").write_text(yaml.safe_dump(REQUEST))
    port = free_port()
    with marketplace.serve(
        tmp_path / "market.yaml",
        tmp_path / "state",
        endpoint=f"tcp://127.0.0.1:{port}",
        consumers=["alice"],
        start_owners=False,
        session_port=free_port(),
    ) as market:
        keys = tmp_path / "state" / "owners"
        agent = cli(
            "agent",
            "--market",
            market.endpoint,
            "--keys",
            str(keys),
            "--ids",
            "owner-1..owner-3",
            "--ledgers",
            str(tmp_path / "agent-ledgers"),
            "--work",
            str(tmp_path / "agent"),
        )
        try:
            deadline = time.monotonic() + 120
            while json.loads((tmp_path / "state" / "server.json").read_text())["owners_present"] < 3:
                assert time.monotonic() < deadline and agent.poll() is None, "the agent's owners never came"
                time.sleep(0.05)
            result = marketplace.request(
                tmp_path / "request.yaml",
                market=market.endpoint,
                keys=tmp_path / "state" / "consumers" / "alice",
                out=tmp_path / "out",
            )
            assert result.status == "completed" and result.raw["lifetime"]["consumer"] == "alice"
            assert (tmp_path / "agent-ledgers" / "owner-1.ledger.sqlite").exists()
            assert (tmp_path / "out" / "report.json").exists() and (tmp_path / "out" / "messages.csv").exists()
        finally:
            market.stop()
            out, err = agent.communicate(timeout=60)
            assert agent.returncode == 0, err
        assert [s["status"] for s in market.sessions] == ["completed"]


def test_admission_is_first_come_first_served_within_the_caps():
    """fcfs admits in arrival order, up to max_sessions at once; a consumer's running sessions and
    waiting requests are capped, so one consumer cannot crowd out the others."""
    from marketplace.service import admission as adm

    queue = adm.Admission(rule="fcfs", max_sessions=3)
    for i, consumer in enumerate(["alice"] * 6 + ["bob", "carol"]):
        queue.add(f"s{i}", consumer, {}, f"{consumer}-{i}")
    running: list[str] = []
    started = []
    while (item := queue.next(running)) is not None:
        started.append(item)
        running.append(item.split("-")[0])
    assert started == ["alice-0", "alice-1", "alice-2"]  # max_sessions reached
    running = ["alice"] * adm.MAX_RUNNING_PER_CONSUMER
    queue.max_sessions = 99
    assert queue.next(running) == "bob-6"  # alice is at her cap: the next eligible in arrival order
    assert queue.next([*running, "bob"]) == "carol-7"
    for i in range(adm.MAX_QUEUED_PER_CONSUMER):
        queue.add(f"d{i}", "dave", {}, i)
    assert "dave already has 8 requests waiting" in queue.refusal("dave")
    assert queue.refusal("erin") is None
    gone = queue.remove(lambda w: w.consumer != "dave")
    assert gone == list(range(adm.MAX_QUEUED_PER_CONSUMER)) and queue.refusal("dave") is None


def test_dpf_admission_grants_the_smallest_dominant_share_from_unlocked_budget():
    """dpf as market workloads play it: 1/N of every budget unlocks per arrival; among requests whose
    owners can pay from unlocked budget, the smallest dominant share first; what the server admitted
    counts as spent, so a request no owner can pay for any more is never granted."""
    from marketplace.service.admission import Admission

    budgets = {"owner-1": {"eps": 1.0, "delta": 0.0}}
    queue = Admission(rule="dpf", max_sessions=8, budgets=budgets, unlock_steps=2)
    queue.add("big", "alice", {"owner-1": {"eps": 0.6, "delta": 0.0}}, "big")
    assert queue.next([]) is None  # half of the budget unlocked: 0.6 does not fit
    queue.add("small", "bob", {"owner-1": {"eps": 0.2, "delta": 0.0}}, "small")
    assert queue.next([]) == "small"  # all unlocked: the smallest dominant share first
    assert queue.next(["bob"]) == "big"  # 0.2 + 0.6 <= 1
    queue.add("more", "carol", {"owner-1": {"eps": 0.5, "delta": 0.0}}, "more")
    assert queue.next(["bob", "alice"]) is None  # 0.8 admitted: 0.5 can never be paid
    assert queue.never_granted == [("more", "no owner it asks has budget left for it")]
    with pytest.raises(ValueError, match="rule: expected one of fcfs, dpf, got 'lottery'"):
        Admission(rule="lottery")


def test_init_writes_one_kit_per_party_and_keeps_only_public_keys_on_the_server(tmp_path):
    """`serve --init --kits`: each owner's kit holds its own key pair and the server's public key,
    the consumers' kits theirs; the server's state holds no owner's or consumer's secret; a second
    --init replaces nothing."""
    (tmp_path / "market.yaml").write_text(yaml.safe_dump(MARKET))
    args = (
        "serve",
        str(tmp_path / "market.yaml"),
        "--state",
        str(tmp_path / "state"),
        "--init",
        "--kits",
        str(tmp_path / "kits"),
        "--consumers",
        "alice,bob",
    )
    first = cli(*args)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    kits, state = tmp_path / "kits", tmp_path / "state"
    for owner in ("owner-1", "owner-2", "owner-3"):
        assert sorted(p.name for p in (kits / owner).iterdir()) == [
            "market.yaml",
            f"{owner}.key",
            f"{owner}.key_secret",
            "server.key",
        ]
    assert sorted(p.name for p in (kits / "consumers" / "alice").iterdir()) == [
        "alice.key",
        "alice.key_secret",
        "market.yaml",
        "server.key",
    ]
    secrets = sorted(p.relative_to(state).as_posix() for p in state.rglob("*.key_secret"))
    assert secrets == ["keys/server.key_secret"]
    assert (state / "market.yaml").exists()  # the scenario, resolved, where the server reads it
    before = (kits / "owner-1" / "owner-1.key_secret").read_bytes()
    again = cli(*args)
    assert again.wait(timeout=120) == 0
    assert (kits / "owner-1" / "owner-1.key_secret").read_bytes() == before


def test_init_on_the_state_of_a_running_marketplace_is_refused_and_changes_nothing(tmp_path):
    """`serve OTHER --state S --init` while a server holds S (another marketplace's scenario, even):
    exit 2 naming the state folder and the server's pid, and no file of S changed or added."""
    market = Market(tmp_path)
    deadline = time.monotonic() + 60
    while not (market.state / "market.yaml").exists() or not (market.state / "serve.lock").read_text().strip():
        assert market.proc.poll() is None, market.proc.communicate()
        assert time.monotonic() < deadline, "the marketplace did not write its state"
        time.sleep(0.1)

    def files() -> dict[str, bytes]:
        return {
            p.relative_to(market.state).as_posix(): p.read_bytes()
            for p in market.state.rglob("*")
            if p.is_file() and p.name not in ("server.json", "agent.log")  # the server's own, as it serves
        }

    before = files()
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({**MARKET, "name": "another-market", "parties": {"owners": 4}}))
    init = cli("serve", str(other), "--state", str(market.state), "--init", "--consumers", "zed")
    out, err = init.communicate(timeout=120)
    assert init.returncode == 2, err
    assert str(market.state) in err and "a running marketplace holds this state folder" in err, err
    assert f"pid {market.proc.pid}" in err, err
    assert "nothing was changed" in err, err
    assert files() == before
    assert not (market.state / "consumers" / "zed").exists()
    status, err = market.stop()
    assert status == 0, err
