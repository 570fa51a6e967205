"""Ledgers kept open between sessions (an owner agent's): one connection per file, reused while the file
at its path is the one it opened, every transaction still durable when it returns; a file replaced or
gone is opened again with every check of a first opening; a use that raised drops its connection; a
thread that keeps nothing open opens and closes per use."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from marketplace.privacy.lifetime import Cost, LifetimeLedger, ledger_file
from marketplace.privacy.lifetime.known import LedgerGone
from marketplace.roles import open_ledgers
from marketplace.roles.open_ledgers import ledger_at


@pytest.fixture
def kept() -> Iterator[None]:
    open_ledgers.keep_open()
    try:
        yield
    finally:
        open_ledgers.close_all()


def make(folder: Path) -> Path:
    path = ledger_file(folder, "owner-1")
    LifetimeLedger.open(path, owner="owner-1", budget=(10.0, 0.0), relation="add/remove-one").close()
    return path


class Opener:
    """Opens the ledger at ``path`` (as a party does: the file as it is), counting the openings."""

    def __init__(self, path: Path) -> None:
        self.path, self.opened = path, 0

    def __call__(self) -> LifetimeLedger:
        self.opened += 1
        return LifetimeLedger.read(self.path)


def charge(path: Path, opener: Opener, request_id: str) -> None:
    """A session's three transactions: reserve, mark as left, commit."""
    with ledger_at(path, opener) as ledger:
        ledger.reserve(request_id, Cost.pure(0.5), consumer="alice", what="a sketch", fresh=True)
    with ledger_at(path, opener) as ledger:
        ledger.mark_left(request_id)
    with ledger_at(path, opener) as ledger:
        ledger.commit(request_id)


def states(path: Path) -> list[tuple[str, str]]:
    with LifetimeLedger.read(path) as ledger:  # another connection: what is on disk
        return [(r.request_id, r.state) for r in ledger.history()]


def test_one_connection_serves_every_session_and_each_transaction_is_on_disk_when_it_returns(tmp_path, kept):
    path, seen = make(tmp_path), []
    opener = Opener(path)
    for i in range(3):
        with ledger_at(path, opener) as ledger:
            seen.append(ledger)
            ledger.reserve(f"req-{i}", Cost.pure(0.5), consumer="alice", what="a sketch", fresh=True)
        assert states(path)[-1] == (f"req-{i}", "reserved")  # durable before the next use
        with ledger_at(path, opener) as ledger:
            ledger.commit(f"req-{i}")
        assert states(path)[-1] == (f"req-{i}", "committed")
    assert opener.opened == 1 and all(ledger is seen[0] for ledger in seen)


def test_a_ledger_set_aside_and_started_afresh_is_opened_again_and_the_old_file_keeps_its_charges(tmp_path, kept):
    path = make(tmp_path)
    opener = Opener(path)
    charge(path, opener, "req-old")
    old, moved = LifetimeLedger.init(path, owner="owner-1", budget=(10.0, 0.0), relation="add/remove-one", force=True)
    old.close()
    charge(path, opener, "req-new")
    assert opener.opened == 2
    assert states(path) == [("req-new", "committed")]
    assert states(moved[0]) == [("req-old", "committed")]  # nothing written to the file set aside


def test_a_ledger_that_is_gone_is_refused_not_written_through_the_kept_connection(tmp_path, kept):
    path = make(tmp_path)
    opener = Opener(path)
    charge(path, opener, "req-1")
    for extra in ("", "-wal", "-shm"):
        Path(f"{path}{extra}").unlink(missing_ok=True)
    with pytest.raises((LedgerGone, FileNotFoundError)), ledger_at(path, opener):
        pass


def test_a_use_that_raised_drops_its_connection(tmp_path, kept):
    path = make(tmp_path)
    opener = Opener(path)
    with pytest.raises(RuntimeError), ledger_at(path, opener):
        raise RuntimeError("the disk is full")
    charge(path, opener, "req-1")
    assert opener.opened == 2 and states(path) == [("req-1", "committed")]


def test_a_thread_that_keeps_nothing_open_opens_and_closes_per_use(tmp_path, kept):
    path = make(tmp_path)
    opener = Opener(path)
    worker = threading.Thread(target=charge, args=(path, opener, "req-1"))
    worker.start()
    worker.join()
    assert opener.opened == 3 and states(path) == [("req-1", "committed")]
