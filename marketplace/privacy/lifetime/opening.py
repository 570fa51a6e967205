"""Opening a lifetime ledger's file: where a party keeps it, the arguments of
:meth:`~marketplace.privacy.lifetime.ledger.LifetimeLedger.open` checked before the disk is touched,
the file connected (a ledger known to be gone, or a file not of this marketplace, refused), its tables
made and its row of metadata read or written, and a reopening with other terms refused.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from marketplace.privacy.lifetime.cost import LedgerInputError, check_filter, fail, positive, probability
from marketplace.privacy.lifetime.errors import LedgerMismatch, ledger_error
from marketplace.privacy.lifetime.filters import Limits
from marketplace.privacy.lifetime.known import known, refuse_gone
from marketplace.privacy.lifetime.storage import (
    SCHEMA,
    SCHEMA_VERSION,
    connect,
    create_private,
    is_blank,
    now,
    refuse_foreign,
    sync_folder,
)

LEDGER_SUFFIX = ".ledger.sqlite"


def ledger_file(folder: str | os.PathLike, party: str) -> Path:
    """Where a party's kit folder keeps its lifetime ledger: ``<folder>/<party>.ledger.sqlite``."""
    return Path(folder) / f"{party}{LEDGER_SUFFIX}"


def text_arg(value: Any, name: str, where: str) -> str:
    """``value``, an argument ``name`` of ``where`` that must be a non-empty string."""
    if not isinstance(value, str) or not value.strip():
        raise fail(name, where, "a non-empty string", value)
    return value


def _relation(value: Any, where: str) -> str:
    short = getattr(value, "short", None)  # a marketplace.privacy.neighbouring.Neighbouring
    return text_arg(short() if callable(short) else value, "relation", where)


def refuse_incomplete(path: Path, owner: str, budget: Any, relation: Any) -> NoReturn:
    """Refuse to create a ledger at ``path`` without its budget or relation, naming what is missing."""
    missing = " and ".join(n for n, v in (("budget", budget), ("relation", relation)) if v is None)
    raise LedgerInputError(f"{path}: no lifetime ledger there yet; creating one for {owner!r} needs its {missing}.")


@dataclass(frozen=True)
class Wanted:
    """What a caller of :meth:`LifetimeLedger.open` asks of the ledger, checked: its owner, and its
    budget, relation and filter (None: whatever the ledger holds; a new ledger needs the budget and
    relation, and takes the filter ``basic`` by default)."""

    owner: str
    budget: tuple[float, float] | None
    relation: str | None
    filter: str | None

    @classmethod
    def checked(cls, owner: Any, budget: Any, relation: Any, filter: Any) -> Wanted:
        """The arguments of :meth:`LifetimeLedger.open` checked, before the disk is touched: a bad
        one is refused naming it, as is a zcdp budget without a delta."""
        where = "LifetimeLedger.open"
        owner = text_arg(owner, "owner", where)
        if budget is not None:
            if not isinstance(budget, (tuple, list)) or len(budget) != 2:
                raise fail("budget", where, "a pair (eps, delta)", budget)
            budget = (positive(budget[0], "budget[0] (eps)", where), probability(budget[1], "budget[1] (delta)", where))
        relation = None if relation is None else _relation(relation, where)
        filter = None if filter is None else check_filter(filter, where)
        if budget is not None and filter == "zcdp":
            Limits("zcdp", *budget)  # a zcdp filter needs delta > 0: say so before touching the disk
        return cls(owner=owner, budget=budget, relation=relation, filter=filter)


def open_file(path: Path, wanted: Wanted) -> tuple[sqlite3.Connection, Any]:
    """The connection to the ledger at ``path`` and its row of metadata, the file created (and its
    folder synced) when it is not there yet. A ledger whose record says it was there and is gone or
    emptied is refused (:func:`.known.refuse_gone`), as is creating one without its budget and
    relation."""
    record = known(path)  # before the file: a record is written only after its ledger is on disk
    if record is not None and not path.exists():
        raise refuse_gone(path, record, "missing")
    if not path.exists() and (wanted.budget is None or wanted.relation is None):
        refuse_incomplete(path, wanted.owner, wanted.budget, wanted.relation)
    new = create_private(path)
    db = _connect_file(path, record, new)
    meta = _stored_meta(db, path, record, wanted)
    if new:
        sync_folder(path.parent)
    return db, meta


def read_file(path: Path) -> tuple[sqlite3.Connection, Any]:
    """The connection to the existing ledger at ``path`` and its row of metadata, as they are (for
    ``marketplace ledger show``); never creates one. The connection is closed on every error."""
    if not path.is_file():
        record = known(path)
        if record is not None and not path.exists():
            raise refuse_gone(path, record, "missing")
        raise FileNotFoundError(f"{path}: no such ledger file")
    db = None
    try:
        refuse_foreign(path)
        db = connect(path, create=False)
        meta = db.execute("SELECT * FROM ledger").fetchone()
    except sqlite3.Error as err:
        if db is not None:
            db.close()
        raise ledger_error(path, err) from None
    if meta is None:
        db.close()
        raise LedgerInputError(f"{path}: not a lifetime ledger (it holds no budget)")
    return db, meta


def check_same(path: Path, stored: Wanted, wanted: Wanted) -> None:
    """Refuse, naming both, to reopen the ledger at ``path`` (which holds ``stored``) with an owner,
    budget, relation or filter other than its own (``wanted``; None: whatever it holds)."""
    differs = []
    if wanted.owner != stored.owner:
        differs.append(f"owner {wanted.owner!r} (the ledger's is {stored.owner!r})")
    budget, own = wanted.budget, stored.budget
    if budget is not None and own is not None and tuple(budget) != tuple(own):
        differs.append(
            f"budget (eps={budget[0]!r}, delta={budget[1]!r}) (the ledger's is (eps={own[0]!r}, delta={own[1]!r}))"
        )
    if wanted.relation is not None and wanted.relation != stored.relation:
        differs.append(f"relation {wanted.relation!r} (the ledger's is {stored.relation!r})")
    if wanted.filter is not None and wanted.filter != stored.filter:
        differs.append(f"filter {wanted.filter!r} (the ledger's is {stored.filter!r})")
    if differs:
        raise LedgerMismatch(
            f"{path}: refusing to reopen the lifetime ledger with "
            + "; ".join(differs)
            + ". A ledger keeps one owner, budget, neighbouring relation and filter for its whole life."
        )


def _connect_file(path: Path, record: dict[str, Any] | None, new: bool) -> sqlite3.Connection:
    """A connection to the ledger file at ``path`` (``new``: just created, empty, by this process).
    A file that was there already is refused when it is a ledger known to have been emptied
    (``record``: the record of a ledger once there) or is not an SQLite file of this marketplace."""
    try:
        if not new:
            if record is not None and is_blank(path):
                raise refuse_gone(path, record, "empty (it holds no table)")
            refuse_foreign(path)
        return connect(path, create=True)
    except sqlite3.Error as err:
        raise ledger_error(path, err) from None


def _stored_meta(db: sqlite3.Connection, path: Path, record: dict[str, Any] | None, wanted: Wanted) -> Any:
    """In one ``BEGIN IMMEDIATE`` transaction: the ledger's tables made if they are not there yet,
    and its row of metadata read, or written for a new ledger from what is ``wanted``. On any error
    the transaction is rolled back and ``db`` closed; an SQLite error says what is wrong with the
    file (:func:`ledger_error`)."""
    try:
        db.execute("BEGIN IMMEDIATE")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                db.execute(statement)
        meta = db.execute("SELECT * FROM ledger").fetchone()
        if meta is None:
            budget, relation = wanted.budget, wanted.relation
            if record is not None:
                raise refuse_gone(path, record, "empty (it holds no budget)")
            if budget is None or relation is None:  # a file left by a process killed while creating it
                refuse_incomplete(path, wanted.owner, budget, relation)
            meta = (1, SCHEMA_VERSION, wanted.owner, wanted.filter or "basic", budget[0], budget[1], relation, now())
            db.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)", meta)
        db.execute("COMMIT")
    except BaseException as err:
        if db.in_transaction:
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass  # the error being raised says what is wrong with the file
        db.close()
        if isinstance(err, sqlite3.Error):
            raise ledger_error(path, err) from None
        raise
    return meta
