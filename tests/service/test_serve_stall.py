"""A stall of an owner's agent or of the server, longer than the control connections' heartbeat timeout
and shorter than the agent's server-silence limit, mid-session: the server loses the owner in the
session and the agent is back on a new connection at once. The server's list of the sessions it still
holds the owner in (sent every second) ends the agent's part of the others, so every owner's lifetime
reservation settles within seconds of the stall; none stays ``reserved`` (counted as spent) after its
session."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
from test_serve import MARKET, Market

from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from proctree import tree  # noqa: E402

pytestmark = pytest.mark.slow

OWNERS = ("owner-1", "owner-2", "owner-3")
LONG_MARKET = {
    **MARKET,
    "data": {
        **MARKET["data"],
        "source": {
            "kind": "covariate_shift",
            "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 60000},
        },
    },
}
"""Owners with 80,000 rows each: a session whose owners compute their sketches for seconds, holding their
reservations, so it can be stalled in the middle (the consumer's own work comes after its part ends)."""
FEATURES = "sketch.map.features=1500"
SETTLE_S = 60.0
"""How long after the stall (or after its session ended) a reservation may stay ``reserved``."""


def wait_for(what, deadline_s: float = 120.0, *, why: str = "") -> None:
    deadline = time.monotonic() + deadline_s
    while not what():
        assert time.monotonic() < deadline, why or "timed out"
        time.sleep(0.1)


def reserved(state: Path, owner: str) -> list[str]:
    """The request ids ``owner``'s ledger holds ``reserved``."""
    path = ledger_file(state / "owners", owner)
    if not path.exists():
        return []
    with LifetimeLedger.read(path) as ledger:
        return [r.request_id for r in ledger.history() if r.state == "reserved"]


def every_owner_reserved(market: Market) -> bool:
    try:
        return all(reserved(market.state, o) for o in OWNERS)
    except Exception:  # noqa: BLE001 - a ledger being written: look again
        return False


def joined(market: Market, owner: str) -> bool:
    """Whether ``owner``'s agent runs its part of a session (its node built, its reservation made)."""
    try:
        return " joined" in (market.state / "agents" / owner / "agent.log").read_text()
    except OSError:
        return False


def agent_of(market: Market, owner: str) -> int:
    for pid in tree(market.proc.pid):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"agent" in args and owner.encode() in args:
            return pid
    raise AssertionError(f"no agent process hosts {owner}")


def stall(pid: int, seconds: float) -> float:
    """SIGSTOP ``pid`` for ``seconds`` (the stall), then SIGCONT; returns when it resumed."""
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.kill(pid, signal.SIGCONT)
    return time.monotonic()


def settled_within(market: Market, owners: tuple[str, ...], since: float) -> float:
    """Poll until none of ``owners``' ledgers holds a ``reserved`` entry; the seconds since ``since``."""
    wait_for(
        lambda: not any(reserved(market.state, o) for o in owners),
        SETTLE_S,
        why=f"still reserved {SETTLE_S:g} s on: { ({o: reserved(market.state, o) for o in owners}) }",
    )
    return time.monotonic() - since


def test_an_agent_stalled_past_its_heartbeat_settles_its_owners_reservation_once_back(tmp_path):
    market = Market(tmp_path, "--owners-per-process", "1", "--log-level", "INFO", market=LONG_MARKET)
    try:
        wait_for(lambda: market_ready(market), why="the owners never connected")
        request = market.request("alice", "out", FEATURES)
        wait_for(lambda: joined(market, "owner-1"), why="owner-1 never joined the session")
        # each agent reserves once it has built its owner's part (agents of their own: each in its time)
        wait_for(lambda: every_owner_reserved(market), why="the owners never reserved for the session")
        resumed = stall(agent_of(market, "owner-1"), 8.0)  # past the 5 s heartbeat, under the 15 s silence
        took = settled_within(market, ("owner-1",), resumed)
        print(f"owner-1 settled {took:.1f} s after its agent resumed")
        out, err = request.communicate(timeout=300)
        ended = time.monotonic()
        assert request.returncode in (0, 3), (out, err)
        took = settled_within(market, OWNERS, ended)
        print(f"every owner settled {took:.1f} s after the request ended")
    finally:
        assert market.stop()[0] == 0


def test_a_stalled_server_leaves_no_reservation_once_back(tmp_path):
    market = Market(tmp_path, "--owners-per-process", "1", "--log-level", "INFO", market=LONG_MARKET)
    try:
        wait_for(lambda: market_ready(market), why="the owners never connected")
        request = market.request("alice", "out", FEATURES)
        wait_for(lambda: all(joined(market, o) for o in OWNERS), why="the owners never joined the session")
        wait_for(lambda: every_owner_reserved(market), why="the owners never reserved for the session")
        resumed = stall(market.proc.pid, 6.0)  # the server only: its agents see its connections time out
        out, err = request.communicate(timeout=300)
        ended = time.monotonic()
        assert request.returncode in (0, 3), (out, err)
        took = settled_within(market, OWNERS, ended)
        since = time.monotonic() - resumed
        print(f"every owner settled {took:.1f} s after the request ended, {since:.1f} s after the server resumed")
    finally:
        assert market.stop()[0] == 0


def market_ready(market: Market) -> bool:
    try:
        return json.loads((market.state / "server.json").read_text()).get("owners_present") == len(OWNERS)
    except (OSError, ValueError):
        return False
