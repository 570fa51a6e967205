"""Lifetime ledgers kept open between sessions by a long-lived host of parties (an owner agent).

A party started for one run opens its ledger three times (to reserve, to mark its release as left,
to settle) and closes it each time: right for a process that lives one run. An agent hosts its owners
for many sessions, and opening a ledger costs more than the transaction it is opened for (the file's
record read, a second connection that checks it is a ledger, WAL mode set, the tables made if absent,
and, on closing the last connection, a checkpoint of the WAL). A thread that calls :func:`keep_open`
keeps each ledger it opens open until :func:`close_all`, one connection per file.

Nothing about what the ledger guarantees changes: every reserve, mark and settle is still its own
``BEGIN IMMEDIATE`` transaction, durable (``synchronous=FULL``) when it returns, and a crash loses no
more than it did (the reconcile of the next process settles what this one left reserved). Before each
use a kept connection is checked against the file at its path: a file that is gone, replaced (another
inode: ``marketplace ledger init --force`` set it aside) or emptied is no longer this connection's, and
the ledger is opened again from its path, with every check of a first opening (a ledger gone is
refused, a new one is the new one). A connection that raised is closed and dropped, so the next use
opens the file afresh. Kept connections belong to the thread that opened them (SQLite's rule): threads
that never called :func:`keep_open` open and close as before.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from marketplace.privacy.lifetime import LifetimeLedger

_local = threading.local()


def keep_open() -> None:
    """From now on, the calling thread keeps the ledgers it opens open (module docstring)."""
    if getattr(_local, "kept", None) is None:
        _local.kept = {}


def close_all() -> None:
    """Close every ledger the calling thread keeps open, and stop keeping them."""
    kept: dict[Path, tuple[LifetimeLedger, tuple[int, int]]] | None = getattr(_local, "kept", None)
    _local.kept = None
    for ledger, _ in (kept or {}).values():
        try:
            ledger.close()
        except Exception:  # noqa: BLE001, S110 - everything is on disk already; closing releases the file only
            pass


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when it is missing or empty (then no kept connection
    may stand for it)."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return None if stat.st_size == 0 else (stat.st_dev, stat.st_ino)


@contextmanager
def ledger_at(path: Path, opener: Callable[[], LifetimeLedger]) -> Iterator[LifetimeLedger]:
    """The ledger at ``path`` for one use: ``opener()``'s, closed after the use, or, in a thread that
    keeps ledgers open, the one kept for ``path`` while the file is still the one it opened (else
    ``opener()``'s, kept from now on). An error in the use closes and drops a kept one."""
    kept: dict[Path, tuple[LifetimeLedger, tuple[int, int]]] | None = getattr(_local, "kept", None)
    if kept is None:
        with opener() as ledger:
            yield ledger
        return
    key = Path(os.path.abspath(path))
    entry = kept.pop(key, None)
    if entry is not None and entry[1] != _identity(path):
        entry[0].close()  # the file at the path is another one now (or none): open it again, checked
        entry = None
    if entry is None:
        ledger = opener()
        identity = _identity(path)
        entry = (ledger, identity) if identity is not None else None
    else:
        ledger = entry[0]
    try:
        yield ledger
    except BaseException:
        ledger.close()
        raise
    if entry is None:
        ledger.close()
    else:
        kept[key] = entry
