"""A crash campaign against a served marketplace: consumers send sketch requests at once while owner
agents are SIGKILLed at random moments (and started again by the server). Whatever the kills hit,
every owner's lifetime ledger, once reconciled, holds nothing reserved, charges no request twice,
never spends above the owner's budget, and counts only what was marked as having left the owner;
every release the consumer's report names is committed on that owner's ledger; every request ends
with a report or an error within its deadline; and the marketplace serves on."""

from __future__ import annotations

import collections
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT
from test_serve import STARTED, free_port, no_process_left  # noqa: F401 - the fixture kills what a test leaves

from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.service.client import RequestFailed, RequestRefused
from marketplace.service.status import KEPT_SESSIONS

sys.path.insert(0, str(ROOT / "benchmarks"))
from proctree import tree  # noqa: E402

pytestmark = pytest.mark.slow

OWNERS = ("owner-1", "owner-2", "owner-3", "owner-4")
CONSUMERS = ("c0", "c1", "c2")
EPSILON = 0.25
"""Each request's declared cost on each owner (``sketch.epsilon``)."""
BUDGETS = {"owner-1": 5.0, "owner-2": 0.5, "owner-3": 1.5, "owner-4": 100.0}
"""What owners 1-3 can pay for (20, 2 and 6 requests) is less than the campaign asks of them; owner-4 never
runs out, so the final request has an owner to release."""
KILLS = 7
"""Agents killed, one at a time: each is back (started again, connected) before the next kill."""
SEED = 20261128
MAX_REQUESTS = 400
"""Requests one consumer sends at most (one after another, until the kills are over): a bound on a
runaway loop, well above what the kills take. A request takes about half a second once most owners
are out of budget, so a bound of 40 ran out before the fifth kill, and the last kills waited out
their 20 s for a session that never came and hit no session."""
WAIT_S = 120.0
"""Each request's deadline (``wait_s``): a request that outlived it would have hung."""


def market_file(tmp: Path) -> Path:
    """The marketplace of scenarios/market-serve.yaml (4 owners, sketch-quickstart's data), with small budgets."""
    market = yaml.safe_load((ROOT / "scenarios" / "market-serve.yaml").read_text())
    # owners still starting delay requests at most start_timeout_s; a dead owner is lost within heartbeat_timeout_s
    market["transport"] = {"start_timeout_s": 15, "heartbeat_interval_s": 0.25, "heartbeat_timeout_s": 2.0}
    market["lifetime"] = {
        "budget": {"epsilon": 1.0},
        "owner_budgets": {o: {"epsilon": eps} for o, eps in BUDGETS.items()},
        "relation": "add/remove-one",
        "filter": "basic",
    }
    path = tmp / "market.yaml"
    path.write_text(yaml.safe_dump(market))
    return path


def start_serve(tmp: Path) -> tuple[subprocess.Popen, Path, str]:
    """``marketplace serve`` with one agent per owner, in a process group of its own; returns once
    every owner is connected."""
    state, endpoint = tmp / "state", f"tcp://127.0.0.1:{free_port()}"
    args = ["serve", str(market_file(tmp)), "--state", str(state), "--endpoint", endpoint]
    args += ["--consumers", ",".join(CONSUMERS), "--owners-per-process", "1", "--log-level", "INFO"]
    with open(tmp / "serve.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "marketplace", *args],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    STARTED.append(proc)
    wait_for(lambda: owners_present(state), proc, "the marketplace did not come up with its 4 owners")
    return proc, state, endpoint


def status(state: Path) -> dict:
    return json.loads((state / "server.json").read_text())


def running(state: Path) -> bool:
    try:
        return bool(status(state).get("running"))
    except (OSError, ValueError):
        return False


def restarted(state: Path, n: int) -> bool:
    """Whether the server has started its agents again ``n`` times (once per agent killed)."""
    try:
        return status(state).get("agent_restarts", 0) >= n
    except (OSError, ValueError):
        return False


def owners_present(state: Path) -> bool:
    try:
        return status(state).get("owners_present") == len(OWNERS)
    except (OSError, ValueError):
        return False


def wait_for(what, serve: subprocess.Popen, why: str, deadline_s: float = 120.0) -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        assert serve.poll() is None, f"marketplace serve exited ({serve.returncode}) while waiting: {why}"
        assert time.monotonic() < deadline, why
        time.sleep(0.1)


def live_agents(serve: int) -> list[int]:
    """The agents ``serve`` runs now (its children that are neither gone nor dead and unreaped)."""
    found = []
    for pid in tree(serve):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if pid != serve and stat.rsplit(")", 1)[1].split()[0] != "Z":
            found.append(pid)
    return sorted(found)


def send(endpoint: str, state: Path, consumer: str, out: Path):
    """One sketch request of ``consumer``: its report, or the error it ended with."""
    import marketplace

    try:
        return marketplace.request(
            ROOT / "scenarios" / "sketch-quickstart.yaml",
            market=endpoint,
            keys=state / "consumers" / consumer,
            overrides={"sketch.epsilon": EPSILON, "sketch.samples": 2000},
            out=out,
            check=False,
            wait_s=WAIT_S,
        )
    except Exception as err:  # noqa: BLE001 - the test checks it is one the client means to raise
        return err


def consume(name: str, endpoint: str, state: Path, tmp: Path, killing: threading.Event, results: dict) -> None:
    """One consumer's requests, one after another: two at least, and more while the kills go on."""
    for i in range(MAX_REQUESTS):
        if not killing.is_set() and i >= 2:
            return
        results[name, i] = send(endpoint, state, name, tmp / f"out-{name}-{i}")


def kill_agents(serve: int, state: Path, rng: random.Random, kills: list[int], killing: threading.Event) -> None:
    """KILLS times: once the last agent killed is back, at a moment while a session runs (when there
    is one) and a random while later, SIGKILL one of ``serve``'s live agents, chosen at random; then
    clear ``killing``."""
    try:
        for _ in range(KILLS):
            deadline = time.monotonic() + 60  # the last agent killed is back, or the checks below say so
            while not (restarted(state, len(kills)) and owners_present(state)) and time.monotonic() < deadline:
                time.sleep(0.05)
            deadline = time.monotonic() + 20  # a moment while a session runs, when there is one
            while not running(state) and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 1.5))
            agents = live_agents(serve)
            if agents:
                victim = rng.choice(agents)
                os.kill(victim, signal.SIGKILL)
                kills.append(victim)
    finally:
        killing.clear()


def run_campaign(serve: subprocess.Popen, state: Path, endpoint: str, tmp: Path) -> tuple[dict, list[int]]:
    """The consumers' requests racing the seeded killer, to their end; every thread must end within
    its requests' deadlines. Returns each request's report or error, by (consumer, number), and the
    agents killed."""
    rng = random.Random(SEED)
    results: dict[tuple[str, int], object] = {}
    kills: list[int] = []
    killing = threading.Event()
    killing.set()
    threads = [
        threading.Thread(target=consume, args=(c, endpoint, state, tmp, killing, results)) for c in CONSUMERS
    ] + [threading.Thread(target=kill_agents, args=(serve.pid, state, rng, kills, killing))]
    for t in threads:
        t.start()
    for t in threads:  # each request is bounded by its wait_s: a thread still alive here hung
        t.join(timeout=MAX_REQUESTS * (WAIT_S + 30))
    assert not any(t.is_alive() for t in threads), "a request outlived its deadline"
    return results, kills


def final_request_completes(serve: subprocess.Popen, state: Path, endpoint: str, tmp: Path, kills: list[int]):
    """The marketplace serves on: the killed agents are back and a final request completes. Returns its report."""
    wait_for(lambda: restarted(state, len(kills)), serve, "the killed agents were not started again")
    wait_for(lambda: owners_present(state), serve, "the restarted agents' owners did not come back")
    final = send(endpoint, state, "c0", tmp / "out-final")
    assert not isinstance(final, Exception), final
    assert final.status == "completed", final.raw.get("failures")
    assert "owner-4" in final.raw["released"]  # its budget never runs out
    return final


def stop_the_server(serve: subprocess.Popen, state: Path, tmp: Path) -> set[str]:
    """SIGTERM: the server exits cleanly and its agents with it. Returns every session the server ran:
    those server.json lists (the newest 200 only, and the campaign may run more) and every session
    folder (one for each session started), no more than it counts ended."""
    agents = live_agents(serve.pid)
    serve.send_signal(signal.SIGTERM)
    assert serve.wait(timeout=120) == 0, (tmp / "serve.log").read_text()[-3000:]
    assert not [pid for pid in agents if Path(f"/proc/{pid}").exists()], "agents outlived the server"
    final = status(state)
    listed = {s["session"] for s in final["sessions"]}
    ran = listed | {path.name for path in (state / "sessions").iterdir() if path.is_dir()}
    assert len(listed) == min(len(ran), KEPT_SESSIONS) and len(ran) <= sum(final["ended"].values()), final["ended"]
    return ran


def check_reports(reports: dict, sessions: set[str]) -> None:
    """Every report ended, under a session of the server; a completed one released some owner's sketch."""
    for key, r in reports.items():
        assert r.status in ("completed", "failed"), (key, r.status)
        assert r.raw["run_id"] in sessions, key
    for r in reports.values():  # a completed sketch request merged at least one owner's sketch
        assert r.status != "completed" or r.raw["released"], r.raw["run_id"]


def check_ledger(owner: str, state: Path, sessions: set[str]) -> tuple[dict, dict[str, str]]:
    """``owner``'s ledger, reconciled as by `marketplace ledger reconcile`: its budget, nothing left
    held or reserved, no request charged twice or outside a session, every charge one request's
    epsilon, the sum within budget, and counted only what left the owner. Returns what the
    reconcile did, and each request's state."""
    with LifetimeLedger.read(ledger_file(state / "owners", owner)) as ledger:  # as `marketplace ledger reconcile`
        done = ledger.reconcile()
        history, spent = ledger.history(), ledger.spent().eps
        holders = {r.request_id: ledger.holder(r.request_id) for r in history}
        assert ledger.budget[0] == BUDGETS[owner], (owner, ledger.budget)
    assert not done["untouched"], (owner, done)  # every holder is gone: nothing may stay held
    states = {r.request_id: r.state for r in history}
    assert len(states) == len(history), f"{owner}: a request id charged twice"
    assert set(states) <= sessions, f"{owner}: a charge under no session of the server"
    assert [i for i, s in states.items() if s == "reserved"] == [], owner
    counted = [r for r in history if r.state == "committed"]
    assert all(r.charged.eps == EPSILON for r in counted), owner
    assert spent == math.fsum(r.charged.eps for r in counted) <= BUDGETS[owner] + 1e-12, owner
    for r in counted:  # counted only when something of it may have left the owner
        assert holders[r.request_id] is not None and holders[r.request_id].left_at is not None, (owner, r)
    return done, states


def check_ledger_against_reports(owner: str, states: dict[str, str], reports: dict) -> None:
    """What each report says of ``owner`` is what its ledger holds."""
    for r in reports.values():
        request_id = r.raw["run_id"]
        # a sketch the curator received and merged left the owner: it stays spent, whatever killed whom after
        if owner in (r.raw.get("released") or []):
            assert states.get(request_id) == "committed", (owner, request_id, states.get(request_id))
        # an owner that reported its part settled its ledger before it reported, as its report says
        own = ((r.raw.get("lifetime") or {}).get("owners") or {}).get(owner)
        if own is not None and own["state"] in ("committed", "aborted", "declined"):
            assert states.get(request_id) == own["state"], (owner, request_id, own, states.get(request_id))


def print_summary(results: dict, kills: list[int], declined: int, settled: dict[str, int], state: Path) -> None:
    """What the campaign did: kills, requests by outcome, declines, and what restarts and reconciles settled."""
    statuses = collections.Counter(getattr(r, "status", type(r).__name__) for r in results.values())
    by_agents = re.findall(
        r"(\d+) reservation\(s\) left by a process that is gone rolled back .*?, (\d+) kept", logs(state)
    )
    print(
        f"{len(kills)} kills, {len(results)} requests {dict(statuses)}, {declined} declines; agents started again "
        f"rolled back {sum(int(a) for a, _ in by_agents)} reservations and kept {sum(int(b) for _, b in by_agents)}; "
        f"the final reconcile: {settled}"
    )


def test_agents_killed_at_random_moments_under_racing_requests_leave_every_ledger_sound(tmp_path):
    """Three consumers send requests one after another while a seeded killer SIGKILLs an agent, at a
    random moment while sessions run, seven times; then a final request, SIGTERM, and every ledger."""
    serve, state, endpoint = start_serve(tmp_path)
    results, kills = run_campaign(serve, state, endpoint, tmp_path)
    assert len(kills) == KILLS, kills
    errors = {key: r for key, r in results.items() if isinstance(r, Exception)}
    # a request that failed without a report says so with the client's own errors, never with a crash of the client
    assert all(isinstance(e, (RequestFailed, RequestRefused)) for e in errors.values()), errors
    results["c0", "final"] = final_request_completes(serve, state, endpoint, tmp_path, kills)
    sessions = stop_the_server(serve, state, tmp_path)

    reports = {key: r for key, r in results.items() if not isinstance(r, Exception)}
    check_reports(reports, sessions)
    declined, settled = 0, {"rolled_back": 0, "kept": 0}
    for owner in OWNERS:
        done, states = check_ledger(owner, state, sessions)
        declined += sum(1 for s in states.values() if s == "declined")
        settled = {k: n + len(done[k]) for k, n in settled.items()}
        check_ledger_against_reports(owner, states, reports)
    assert declined >= 1, "no request was declined: the budgets were never exceeded"
    print_summary(results, kills, declined, settled, state)


def logs(state: Path) -> str:
    """Every agent's log (each agent appends to its own across restarts)."""
    return "".join(path.read_text() for path in sorted((state / "agents").glob("*/agent.log")))
