"""Which ledgers a folder has held: one small record beside each ledger file, so that a ledger that is
gone or emptied is refused instead of silently created again.

``<party>.ledger.sqlite`` gets ``<party>.ledger.id`` (JSON: the owner, the file's name, when the ledger
was created, and a random id of that creation) once its first transaction is on disk. A ledger file that
is missing, empty or blank while its record exists was charged before, or at least created: opening it
is refused, naming the file and what to do (restore it, or start a fresh one with ``marketplace ledger
init --force``, which keeps the old file aside). A blank file with no record is one whose creator was
killed before its first transaction committed, and is created again.
"""

from __future__ import annotations

import datetime
import json
import os
import uuid
from pathlib import Path
from typing import Any

from marketplace.privacy.lifetime.cost import LedgerInputError

RECORD_SUFFIX = ".id"
ASIDE = ".replaced-"
"""What a ledger kept aside by ``marketplace ledger init --force`` has after its name, before the time."""


class LedgerGone(LedgerInputError):
    """A ledger this folder held (its record says so) that is missing, or holds nothing any more."""


def record_of(path: Path) -> Path:
    """Where the record of the ledger at ``path`` is: ``owner-1.ledger.sqlite`` -> ``owner-1.ledger.id``."""
    return path.with_suffix(RECORD_SUFFIX)


def known(path: Path) -> dict[str, Any] | None:
    """The record of the ledger at ``path``: a dict (``owner``, ``file``, ``created``, ``id``), or None
    when there is none. A record that cannot be read still says a ledger was there: ``{"unreadable": ...}``."""
    record = record_of(path)
    try:
        text = record.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as err:
        return {"unreadable": str(err)}
    try:
        found = json.loads(text)
    except ValueError as err:
        return {"unreadable": str(err)}
    return found if isinstance(found, dict) else {"unreadable": f"not a JSON object: {text[:80]!r}"}


def remember(path: Path, owner: str, created: str) -> None:
    """Write the record of the ledger at ``path`` (created at ``created`` for ``owner``), durably and
    atomically (a temporary file renamed over it, its folder synced)."""
    record = record_of(path)
    body = {"owner": owner, "file": path.name, "created": created, "id": uuid.uuid4().hex}
    temporary = record.with_name(f".{record.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, (json.dumps(body, indent=1) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, record)
    _sync(record.parent)


def remember_once(path: Path, owner: str, created: str) -> None:
    """:func:`remember` unless the ledger at ``path`` has a record already (a ledger made before records
    were kept gains one the first time it is opened for writing)."""
    if known(path) is None:
        remember(path, owner, created)


def refuse_gone(path: Path, record: dict[str, Any], problem: str) -> LedgerGone:
    """The error for a ledger this folder held (``record``) that is now ``problem`` (missing, empty ...)."""
    when = f", created {record['created']}" if "created" in record else ""
    owner = f" of {record['owner']!r}" if "owner" in record else ""
    return LedgerGone(
        f"{path}: the lifetime ledger{owner}{when} is {problem}; refusing to start a fresh one, which would "
        f"forget what was spent. Restore the file from a backup, or, to start over on purpose, run "
        f"`marketplace ledger init --force` (the old file is kept aside). Its record: {record_of(path)}"
    )


def aside_name(path: Path, moment: datetime.datetime | None = None) -> Path:
    """Where ``marketplace ledger init --force`` keeps the file at ``path``:
    ``<name>.replaced-<UTC time>`` beside it."""
    moment = moment or datetime.datetime.now(datetime.UTC)
    return path.with_name(f"{path.name}{ASIDE}{moment.strftime('%Y%m%dT%H%M%S.%fZ')}")


def set_aside(path: Path) -> list[Path]:
    """Rename the ledger at ``path`` and its ``-wal`` and ``-shm`` files (those that exist) with one
    time suffix; never deletes. Returns the new paths."""
    stamp = aside_name(path)
    moved = []
    for extra in ("", "-wal", "-shm"):
        source = Path(f"{path}{extra}")
        if source.exists():
            target = stamp.with_name(stamp.name + extra)
            os.rename(source, target)
            moved.append(target)
    if moved:
        _sync(path.parent)
    return moved


def _sync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
