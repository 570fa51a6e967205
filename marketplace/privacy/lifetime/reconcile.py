"""Crash recovery for a lifetime ledger: who holds each reservation, its "left" record, and settling what
processes that are gone left ``reserved``.

A ``reserved`` row counts as spent, because after a crash between reserve and commit its release may have
left. The ``attempts`` table tells the two cases apart: one row per reservation naming the process that
holds it (pid and host) and, once something of its release left that process, when (the "left" record,
written before the first protocol message is handed to the transport). :func:`settle_gone` rolls back a
dead process's reservation with no "left" record (provably nothing left) and commits one with a record
(something may have left); its sale, if it reserved points to sell (:mod:`.sales`), is aborted with it, or
``kept`` (what it sold is unknown: it keeps counting the points it reserved).

Kept apart from :mod:`.ledger` because it is a separate concern from charging: these functions read and
write only the ``attempts`` table and the state of ``reserved`` rows (and of their sales), never a cost or the
filter. Each
runs on the ledger's connection inside a write transaction the caller holds (:class:`.storage.Transaction`),
except :func:`holder_of`, which only reads.
"""

from __future__ import annotations

import sqlite3

from marketplace.privacy.lifetime import sales
from marketplace.privacy.lifetime.storage import (
    ATTEMPTS,
    Holder,
    alive_here,
    iso,
    now,
    process_started,
    this_process,
)


def hold(db: sqlite3.Connection, request_id: str, *, fresh: bool) -> None:
    """Inside a write: record that this process holds ``request_id``'s reservation; ``fresh`` (a new
    reservation) clears any "left" record an earlier, settled attempt had."""
    db.execute(ATTEMPTS)
    pid, host = this_process()
    keep = "NULL" if fresh else "attempts.left_at"
    db.execute(
        "INSERT INTO attempts (request_id, pid, host, left_at) VALUES (?, ?, ?, NULL) ON CONFLICT (request_id) "
        f"DO UPDATE SET pid = excluded.pid, host = excluded.host, left_at = {keep}",
        (request_id, pid, host),
    )


def record_left(db: sqlite3.Connection, request_id: str) -> None:
    """Inside a write, once the caller has checked ``request_id`` counts as spent: record that something
    of its release is leaving this process. The first record is kept (a second call changes nothing)."""
    db.execute(ATTEMPTS)
    pid, host = this_process()
    db.execute(
        "INSERT INTO attempts (request_id, pid, host, left_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (request_id) DO UPDATE SET left_at = COALESCE(attempts.left_at, excluded.left_at)",
        (request_id, pid, host, now()),
    )


def holder_of(db: sqlite3.Connection, request_id: str) -> Holder | None:
    """The process that holds request ``request_id``'s reservation, and its "left" record; None when the
    ledger has no such record (a ledger written before it kept them, or no such request)."""
    if not has_attempts(db):
        return None
    found = db.execute("SELECT pid, host, left_at FROM attempts WHERE request_id = ?", (request_id,)).fetchone()
    return None if found is None else Holder(*found)


def settle_gone(db: sqlite3.Connection) -> dict[str, list[str]]:
    """Inside a write: settle every ``reserved`` row whose holder is provably gone, rolled back
    (``aborted``) without a "left" record, ``committed`` with one. Returns
    ``{"rolled_back": [...], "kept": [...], "untouched": [...]}`` (request ids, in reservation order).

    A holder is provably gone when it is a process of this host whose pid no longer runs, or a process of
    another host that reserved before this process started (a ledger is used by one owner host at a
    time: a later one finds the earlier one gone). A reservation held by a live process of this host (it
    may be about to mark it and send), made by another host after this process started, or recorded
    before ledgers named their holders (its holder is unknown), is left ``reserved``: it still counts as
    spent, the safe side."""
    started = iso(process_started() - 1.0)  # /proc's boot time has one-second steps
    out: dict[str, list[str]] = {"rolled_back": [], "kept": [], "untouched": []}
    db.execute(ATTEMPTS)
    rows = db.execute(
        "SELECT c.request_id, c.reserved_at, a.pid, a.host, a.left_at FROM charges c "
        "LEFT JOIN attempts a ON a.request_id = c.request_id WHERE c.state = 'reserved' ORDER BY c.seq"
    ).fetchall()
    for request_id, reserved_at, pid, host, left_at in rows:
        if pid is None:
            out["untouched"].append(request_id)
            continue
        gone = not alive_here(pid, host) if host == this_process()[1] else reserved_at < started
        if not gone:
            out["untouched"].append(request_id)
            continue
        state = "committed" if left_at is not None else "aborted"
        db.execute("UPDATE charges SET state = ?, settled_at = ? WHERE request_id = ?", (state, now(), request_id))
        sales.settle_gone(db, request_id, kept=left_at is not None)
        out["kept" if left_at is not None else "rolled_back"].append(request_id)
    return out


def has_attempts(db: sqlite3.Connection) -> bool:
    """Whether the ledger has its ``attempts`` table yet (a ledger written before it kept holders has not)."""
    found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'attempts'").fetchone()
    return found is not None
