"""What can go wrong opening or charging a :class:`~marketplace.privacy.lifetime.ledger.LifetimeLedger`,
beyond a bad argument (:class:`~marketplace.privacy.lifetime.cost.LedgerInputError`) and a decline
(:class:`~marketplace.privacy.lifetime.cost.BudgetDeclined`): a request already charged, a file that
cannot be reached, a ledger reopened with other terms; and what an SQLite error on the file means.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from marketplace.privacy.lifetime.cost import LedgerInputError
from marketplace.privacy.lifetime.storage import Reservation


class AlreadyCharged(Exception):
    """A request id this ledger already counts, reserved with ``fresh=True``: the earlier attempt may
    have released, so this one must not release again (a fresh noisy draw would go uncharged)."""

    def __init__(self, reason: str, reservation: Reservation) -> None:
        super().__init__(reason)
        self.reason, self.reservation = reason, reservation


class LedgerUnavailable(OSError):
    """A ledger file that cannot be opened or written (a read-only or immutable file or folder, a
    folder that is a file, a full disk, a lock held too long): nothing was charged."""


ACCESS_ERRORS = ("unable to open", "readonly database", "disk i/o error", "database is locked", "disk is full")
"""Words of an ``sqlite3.OperationalError`` about reaching the file rather than what it holds."""


def ledger_error(path: Path, err: sqlite3.Error) -> Exception:
    """What an SQLite error on the ledger at ``path`` means: :class:`LedgerUnavailable` when the file
    cannot be reached or written, else a :class:`LedgerInputError` saying it is not a lifetime ledger
    (random bytes, a truncated file, a database of another schema)."""
    text = str(err)
    if isinstance(err, sqlite3.OperationalError) and any(word in text.lower() for word in ACCESS_ERRORS):
        return LedgerUnavailable(f"{path}: {text}")
    return LedgerInputError(f"{path}: not a lifetime ledger ({text})")


class LedgerMismatch(ValueError):
    """An existing ledger was opened with an owner, budget, relation or filter other than its own."""
