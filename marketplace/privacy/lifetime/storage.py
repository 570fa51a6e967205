"""The SQLite file behind a :class:`~marketplace.privacy.lifetime.ledger.LifetimeLedger`: its tables, one
row per request (:class:`Reservation`), the connection (WAL mode, ``synchronous=FULL``), the
``BEGIN IMMEDIATE`` transactions that serialise the processes sharing a file, and its creation readable
by the owner only and durable in its folder. What a row may be charged is the ledger's to decide."""

from __future__ import annotations

import datetime
import os
import socket
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marketplace.privacy.lifetime.cost import Charge, Cost, LedgerInputError

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 60.0
STATES = ("reserved", "committed", "aborted", "declined")
COUNTED = ("reserved", "committed")
"""The states that count as spent: a reservation neither committed nor aborted may have left."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    schema_version INTEGER NOT NULL,
    owner TEXT NOT NULL,
    filter TEXT NOT NULL CHECK (filter IN ('basic', 'zcdp')),
    budget_eps REAL NOT NULL,
    budget_delta REAL NOT NULL,
    relation TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS charges (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL UNIQUE,
    consumer TEXT NOT NULL,
    what TEXT NOT NULL,
    eps REAL, delta REAL NOT NULL, rho REAL,
    charged_eps REAL, charged_delta REAL, charged_rho REAL,
    state TEXT NOT NULL CHECK (state IN ('reserved', 'committed', 'aborted', 'declined')),
    reserved_at TEXT NOT NULL,
    settled_at TEXT
);
CREATE TABLE IF NOT EXISTS attempts (
    request_id TEXT PRIMARY KEY,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    left_at TEXT
);
"""
OWN_TABLES = frozenset({"ledger", "charges", "attempts", "sales", "sqlite_sequence"})
"""Every table a ledger file may hold (``attempts`` and ``sales`` appear on a ledger's first write that needs them)."""
NEEDED_TABLES = frozenset({"ledger", "charges"})
"""The tables every ledger holds from its first transaction on: a file with some tables but not these is refused."""
ATTEMPTS = SCHEMA[SCHEMA.index("CREATE TABLE IF NOT EXISTS attempts") :].strip().rstrip(";")
"""The ``attempts`` table alone: one row per reservation, naming the process that holds it (its pid and
host) and, once something of its release left, when (the "left" record). Writers create it in their own
transaction, so that a ledger written before the table existed gains it on its first write."""


@dataclass(frozen=True)
class Reservation:
    """One request's row: its id, who asked, for what, its declared cost, what the filter charged,
    its state (one of :data:`STATES`) and when it was reserved and settled (UTC, ISO 8601)."""

    seq: int
    request_id: str
    consumer: str
    what: str
    cost: Cost | None
    """None for a release declined because it has no finite declared cost."""
    charged: Charge
    state: str
    reserved_at: str
    settled_at: str | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``marketplace ledger show --json``)."""
        return {
            "seq": self.seq,
            "time": self.reserved_at,
            "settled": self.settled_at,
            "request_id": self.request_id,
            "consumer": self.consumer,
            "what": self.what,
            "cost": None
            if self.cost is None
            else {"eps": self.cost.eps, "delta": self.cost.delta, "rho": self.cost.rho},
            "charged": {k: v for k, v in self.charged._asdict().items() if v is not None},
            "state": self.state,
        }


class Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (durable when it returns), or ``ROLLBACK`` on an error."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type | None, *exc: object) -> None:
        if kind is None:
            try:
                self.db.execute("COMMIT")
                return
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")


@dataclass(frozen=True)
class Holder:
    """The process that holds a reservation: its ``pid`` on ``host``, and ``left_at`` (UTC, ISO 8601) once
    something of the release left it; None while nothing did."""

    pid: int
    host: str
    left_at: str | None


def this_process() -> tuple[int, str]:
    """(pid, host name) of the calling process, as an ``attempts`` row records it."""
    return os.getpid(), socket.gethostname()


def alive_here(pid: int, host: str) -> bool:
    """Whether the process ``pid`` of ``host`` may still run: True for a live (or unreaped) pid of this
    host, and for any pid of another host (nothing here can tell)."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def process_started() -> float:
    """When the calling process started (seconds since the epoch), from ``/proc``; on a system without it,
    when this module was first imported (no later than any reservation this process made)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime ")
        )
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return _IMPORTED


_IMPORTED = time.time()


def now() -> str:
    """The current time as the ledger writes its times (UTC, ISO 8601, milliseconds)."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def iso(seconds: float) -> str:
    """``seconds`` since the epoch as the ledger writes its times (UTC, ISO 8601, milliseconds)."""
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def reservation_of(row: tuple) -> Reservation:
    seq, request_id, consumer, what, eps, delta, rho, c_eps, c_delta, c_rho, state, reserved_at, settled_at = row
    cost = None if eps is None and rho is None else Cost(eps=eps, delta=delta, rho=rho)
    return Reservation(
        seq, request_id, consumer, what, cost, Charge(c_eps, c_delta, c_rho), state, reserved_at, settled_at
    )


def create_private(path: Path) -> bool:
    """Create an empty ledger file readable by its owner only (SQLite gives its -wal and -shm files
    the same mode); False if it already exists."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return False
    return True


def is_blank(path: Path) -> bool:
    """Whether ``path`` is a file that holds no table yet: empty, or a database whose creator was
    killed before its first transaction committed. False for anything else, unreadable files too."""
    try:
        if path.stat().st_size == 0:
            return True
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            return db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        finally:
            db.close()
    except (OSError, sqlite3.Error):
        return False


def sync_folder(folder: Path) -> None:
    """fsync a folder, so that a file just created in it survives a power loss."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def connect(path: Path, *, create: bool) -> sqlite3.Connection:
    """A connection to the ledger file at ``path`` (created if ``create``) in WAL mode with
    ``synchronous=FULL``, outside any implicit transaction; OSError when SQLite refuses WAL mode
    (a network file system, say)."""
    uri = f"{path.resolve().as_uri()}?mode={'rwc' if create else 'rw'}"
    db = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode.lower() != "wal":
        db.close()
        raise OSError(f"{path}: SQLite refused WAL mode (journal_mode is {mode!r}); put the ledger on a local disk")
    db.execute("PRAGMA synchronous=FULL")
    return db


def refuse_foreign(path: Path) -> None:
    """Refuse a file that is not a ledger (not SQLite, or SQLite of another schema: tables a ledger
    never holds) before anything is written to it, even the switch to WAL mode."""
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        db.close()
    foreign = sorted(tables - OWN_TABLES)
    if foreign:
        raise LedgerInputError(
            f"{path}: not a lifetime ledger (a SQLite database of another schema, with the tables "
            f"{', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''})"
        )
    lacking = sorted(NEEDED_TABLES - tables)
    if tables and lacking:
        raise LedgerInputError(
            f"{path}: not a whole lifetime ledger (it lacks the tables {', '.join(lacking)}); refusing to create them "
            "again, which would forget what was spent"
        )
