"""A real owner, SIGKILLed at random points of its releases, never leaves its lifetime ledger below
what left it, never has one release charged twice, never releases one request twice, and carries
on from its ledger when restarted. Once its ledger is reconciled (by the test, or by the owner
itself when it restarts), no reservation stays ``reserved`` and nothing that provably never left
(no "left" record) is counted."""

from __future__ import annotations

import math
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

from marketplace.cli import main
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.privacy.lifetime.storage import is_blank

WORKER = ROOT / "tests" / "owner_crash_worker.py"
KILLS = 25
"""Real owners killed (the ledger's own crash test, tests/privacy/test_lifetime_ledger.py, kills a
stand-in owner 60 times); each kill costs a fresh interpreter and scenario."""
EPSILON = 0.01  # the worker's sketch.epsilon: each request's declared cost


def wire(path: Path) -> list[tuple[str, str]]:
    """(request id, kind) of every protocol frame that left the owner, in order."""
    if not path.exists():
        return []
    lines = path.read_text().split("\n")
    assert lines[-1] == "", "a wire line was cut short"  # each line is one write(2)
    return [tuple(line.split()[:2]) for line in lines[:-1]]


def check(ledgers: Path, wire_path: Path) -> dict[str, str]:
    """Right after a kill: every request whose release left is counted at its declared cost; no
    request left twice; the ledger's spend is the sum of its counted rows."""
    left = wire(wire_path)
    ids = [request_id for request_id, _ in left]
    assert len(ids) == len(set(ids)), "a request was released twice"
    assert {kind for _, kind in left} <= {"sketch_release"}
    db = ledger_file(ledgers, "owner-1")
    if not db.exists() or is_blank(db):  # not created yet, or killed while creating it
        assert not left
        return {}
    with LifetimeLedger.read(db) as ledger:
        history, spent = ledger.history(), ledger.spent().eps
    states = {r.request_id: r.state for r in history}
    assert len(states) == len(history), "a request id was charged twice"
    for request_id in ids:
        assert states.get(request_id) in ("reserved", "committed"), (request_id, states.get(request_id))
    counted = [r for r in history if r.state in ("reserved", "committed")]
    assert all(r.cost.eps == EPSILON for r in counted)
    assert spent == math.fsum(r.charged.eps for r in counted) >= EPSILON * len(ids)
    return states


def reconciled(db: Path, wire_path: Path) -> tuple[int, set[str]]:
    """Right after a kill, ``db`` reconciled (the owner is dead, so every reservation is settled):
    nothing stays reserved; every request whose release left is committed and was marked as left
    before its frame; every counted request was marked as left (one that provably never left is not
    counted); the spend is the sum of the committed rows. Returns how many reconcile rolled back, and
    the ids it kept as spent."""
    with LifetimeLedger.read(db) as ledger:
        done = ledger.reconcile()
        history, spent = ledger.history(), ledger.spent().eps
        holders = {r.request_id: ledger.holder(r.request_id) for r in history}
    left = {request_id for request_id, _ in wire(wire_path)}
    assert not done["untouched"], done
    assert [r.request_id for r in history if r.state == "reserved"] == []
    states = {r.request_id: r.state for r in history}
    assert all(states[request_id] == "committed" for request_id in left), (left, states)
    for r in history:
        if r.state == "committed":
            assert holders[r.request_id].left_at is not None, r  # counted: something may have left
        if r.state == "aborted":
            assert r.request_id not in left and holders[r.request_id].left_at is None, r
    assert spent == math.fsum(r.charged.eps for r in history if r.state == "committed") >= EPSILON * len(left)
    return len(done["rolled_back"]), set(done["kept"])


def marked_left(db: Path) -> set[str]:
    """The reservations of ``db`` marked as left whose holder is gone: what a reconcile keeps as spent."""
    with LifetimeLedger.read(db) as ledger:
        reserved = [r.request_id for r in ledger.history() if r.state == "reserved"]
        holders = {request_id: ledger.holder(request_id) for request_id in reserved}
    return {request_id for request_id, h in holders.items() if h is not None and h.left_at is not None}


def copy_of(db: Path, to: Path) -> Path:
    """A consistent copy of the ledger ``db`` (SQLite's backup), to reconcile without touching it."""
    to.unlink(missing_ok=True)
    source, target = sqlite3.connect(db), sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return to


def lines_of(path: Path) -> int:
    """The whole lines written to ``path`` so far (read while the worker may be appending one)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def wait_for_a_release(child: subprocess.Popen, wire_path: Path, *, since: int, deadline_s: float = 120.0) -> None:
    """Poll until the worker has written a release past the first ``since`` wire lines (or has ended)."""
    end = time.monotonic() + deadline_s
    while lines_of(wire_path) <= since and child.poll() is None:
        assert time.monotonic() < end, f"the owner released nothing in {deadline_s} s"
        time.sleep(0.01)


@pytest.mark.slow
def test_sigkill_of_a_real_owner_at_random_points(tmp_path):
    ledgers, wire_path = tmp_path / "ledgers", tmp_path / "wire.log"
    rng = random.Random(20261126)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    retried = rolled_back = 0
    kept: set[str] = set()  # marked as left, then killed before the release was written: spent, never on the wire
    for kill in range(KILLS):
        child = subprocess.Popen(
            [sys.executable, str(WORKER), str(ledgers), str(wire_path)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline().strip() == "ready", child.stderr.read()
        if kill % 4 < 2:  # half the kills land after the restarted owner released something, however slow the machine
            wait_for_a_release(child, wire_path, since=lines_of(wire_path))
        time.sleep(rng.uniform(0.0, 0.2))
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL, err[-2000:]
        retried += sum(1 for line in out.splitlines() if line.startswith("declined"))
        check(ledgers, wire_path)
        db = ledger_file(ledgers, "owner-1")
        if not db.exists() or is_blank(db):
            continue
        if kill % 2:  # reconcile the ledger itself, as an operator would: the restarted owner finds it settled
            to_keep = marked_left(db)  # what the command will keep: reconciled() then finds nothing left to do
            assert main(["ledger", "reconcile", str(db)]) == 0
            counts = reconciled(db, wire_path)
            counts = (counts[0], counts[1] | to_keep)
        else:  # reconcile a copy: the restarted owner reconciles the ledger itself when it first opens it
            counts = reconciled(copy_of(db, tmp_path / "copy.ledger.sqlite"), wire_path)
        rolled_back, kept = rolled_back + counts[0], kept | counts[1]
    states = check(ledgers, wire_path)
    released = {request_id for request_id, _ in wire(wire_path)}
    assert len(released) >= KILLS // 3, len(released)  # the owner kept releasing across its restarts
    # a request the owner committed left (its commit comes after the release); one reconcile kept was marked as
    # left, and may have been killed before its frame reached the wire: it stays spent, never refunded
    assert all(request_id in released | kept for request_id, state in states.items() if state == "committed")
    # a request rolled back never left; one that may have left and is retried is declined, never released again
    assert all(request_id not in released for request_id, state in states.items() if state == "aborted")
    assert rolled_back + len(kept) >= 1, "no kill landed between a reservation and its settlement"
    print(f"reconcile rolled back {rolled_back}, kept {len(kept)}; {retried} retries declined")
