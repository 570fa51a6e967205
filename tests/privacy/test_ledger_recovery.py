"""Ledgers are never silently reset.

A ledger that existed (its record ``<party>.ledger.id`` is beside it) and is now missing or emptied is
refused, naming the file and what to do; a fresh one takes ``marketplace ledger init --force``, which
keeps the old file aside. ``marketplace ledger check`` verifies every ledger of a path, read-only.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from conftest import ROOT

import marketplace
from marketplace import plugins
from marketplace.cli import main
from marketplace.privacy.lifetime import Cost, LedgerInputError, LifetimeLedger, ledger_file
from marketplace.privacy.lifetime.known import LedgerGone, known, record_of
from marketplace.roles.lifetime import admit

SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"
RELATION = "add/remove-one (a row of owner-1's data)"


def new_ledger(folder: Path, owner: str = "owner-1") -> LifetimeLedger:
    return LifetimeLedger.open(ledger_file(folder, owner), owner=owner, budget=(1.0, 0.0), relation=RELATION)


def charged(folder: Path, owner: str = "owner-1", n: int = 30) -> Path:
    """A ledger of ``owner`` in ``folder`` with ``n`` requests (half committed), closed."""
    with new_ledger(folder, owner) as ledger:
        for i in range(n):
            ledger.reserve(f"r{i}", Cost.pure(0.01), consumer="c", what="a release of a long description " * 3)
            if i % 2:
                ledger.commit(f"r{i}")
    return ledger_file(folder, owner)


def reopen(path: Path) -> LifetimeLedger:
    return LifetimeLedger.open(path, owner="owner-1", budget=(1.0, 0.0), relation=RELATION)


def sketch(ledgers: Path) -> marketplace.Scenario:
    return marketplace.load(SKETCH, {"lifetime.ledgers": str(ledgers), "parties.owners": 3, "sketch.epsilon": 0.4})


# --- refused, never created again


def test_a_new_ledger_gets_a_record_naming_its_owner_and_creation(tmp_path):
    with new_ledger(tmp_path) as ledger:
        created = ledger.created
    record = known(ledger_file(tmp_path, "owner-1"))
    assert record["owner"] == "owner-1" and record["created"] == created
    assert record["file"] == "owner-1.ledger.sqlite" and len(record["id"]) == 32
    assert record_of(ledger_file(tmp_path, "owner-1")).stat().st_mode & 0o777 == 0o600


def test_a_ledger_made_before_records_gains_one_when_opened(tmp_path):
    db = charged(tmp_path)
    record_of(db).unlink()
    reopen(db).close()
    assert known(db)["owner"] == "owner-1"


def test_a_missing_ledger_that_existed_is_refused_naming_the_file_and_what_to_do(tmp_path):
    db = charged(tmp_path)
    for leftover in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        leftover.unlink(missing_ok=True)
    with pytest.raises(LedgerGone) as refused:
        reopen(db)
    assert str(refused.value).startswith(f"{db}: the lifetime ledger of 'owner-1', created ")
    assert "is missing" in str(refused.value) and "marketplace ledger init --force" in str(refused.value)
    assert not db.exists()  # nothing was created


@pytest.mark.parametrize("emptied", ["zero bytes", "blank sqlite"])
def test_an_emptied_ledger_that_existed_is_refused_and_left_as_it_is(tmp_path, emptied):
    db = charged(tmp_path)
    for leftover in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        leftover.unlink(missing_ok=True)
    db.write_bytes(b"")
    if emptied == "blank sqlite":
        raw = sqlite3.connect(db)
        raw.execute("PRAGMA journal_mode=WAL")
        raw.close()
    before = db.read_bytes()
    with pytest.raises(LedgerGone, match="is empty"):
        reopen(db)
    assert db.read_bytes() == before


def test_a_ledger_that_lost_its_charges_table_is_refused_not_given_a_new_one(tmp_path):
    db = charged(tmp_path)
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE charges")
    raw.commit()
    raw.close()
    with pytest.raises(LedgerInputError, match="lacks the tables charges"):
        reopen(db)
    with pytest.raises(LedgerInputError, match="lacks the tables charges"):
        LifetimeLedger.read(db)


def test_a_first_request_on_a_new_folder_creates_the_ledger_with_no_extra_step(tmp_path):
    folder = tmp_path / "new" / "ledgers"
    admission = admit(sketch(folder).config, "owner-1", plugins.exchange("sketch"))
    assert admission.state == "reserved", admission.reason
    assert known(ledger_file(folder, "owner-1"))["owner"] == "owner-1"


# --- marketplace ledger init


def test_init_refuses_an_existing_ledger_without_force(tmp_path, capsys):
    db = charged(tmp_path)
    before = db.read_bytes()
    assert main(["ledger", "init", str(tmp_path), "--owner", "owner-1", "--eps", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{db}: a file is there already" in err and "--force" in err
    assert db.read_bytes() == before


def test_init_refuses_a_missing_ledger_that_existed_without_force(tmp_path, capsys):
    db = charged(tmp_path)
    db.unlink()
    assert main(["ledger", "init", str(tmp_path), "--owner", "owner-1", "--eps", "2"]) == 2
    assert "is missing" in capsys.readouterr().err and not db.exists()


def test_init_force_keeps_the_old_file_aside_and_starts_with_nothing_spent(tmp_path, capsys):
    db = charged(tmp_path)
    with LifetimeLedger.read(db) as ledger:
        ledger._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    old, old_id = db.read_bytes(), known(db)["id"]
    assert main(["ledger", "init", str(db), "--owner", "owner-1", "--eps", "2", "--force"]) == 0
    out = capsys.readouterr().out
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("owner-1.ledger.sqlite.replaced-")]
    main_aside = [p for p in aside if not p.name.endswith(("-wal", "-shm"))]
    assert len(main_aside) == 1 and main_aside[0].read_bytes() == old
    assert f"kept aside: {main_aside[0]}" in out
    with LifetimeLedger.read(db) as ledger:
        assert ledger.history() == [] and ledger.budget == (2.0, 0.0)
    assert known(db)["id"] != old_id


def test_init_force_replaces_a_truncated_ledger(tmp_path, capsys):
    db = charged(tmp_path)
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    assert main(["ledger", "init", str(tmp_path), "--owner", "owner-1", "--eps", "1", "--force"]) == 0
    assert main(["ledger", "check", str(tmp_path)]) == 0


@pytest.mark.parametrize(
    "args",
    [["--eps", "-1"], ["--eps", "1", "--delta", "1.5"], ["--eps", "1", "--delta", "0", "--filter", "zcdp"]],
    ids=["negative eps", "delta over 1", "zcdp without delta"],
)
def test_init_refuses_a_budget_that_is_not_one(tmp_path, capsys, args):
    assert main(["ledger", "init", str(tmp_path), "--owner", "owner-1", *args]) == 2
    assert "marketplace ledger init: " in capsys.readouterr().err
    assert not ledger_file(tmp_path, "owner-1").exists()


# --- marketplace ledger check


def check(path: Path, capsys) -> tuple[int, str]:
    code = main(["ledger", "check", str(path)])
    return code, capsys.readouterr().out


def test_check_passes_good_ledgers_one_line_each_and_writes_nothing(tmp_path, capsys):
    db1, db2 = charged(tmp_path), charged(tmp_path, "owner-2")
    before = db1.read_bytes(), db2.read_bytes()
    code, out = check(tmp_path, capsys)
    assert code == 0
    assert out.splitlines() == [f"{db1}: ok", f"{db2}: ok"]
    assert (db1.read_bytes(), db2.read_bytes()) == before


def test_check_finds_the_ledgers_of_a_serve_state_folder(tmp_path, capsys):
    (tmp_path / "state" / "owners").mkdir(parents=True)
    db = charged(tmp_path / "state" / "owners")
    code, out = check(tmp_path / "state", capsys)
    assert code == 0 and out == f"{db}: ok\n"


def test_check_of_a_truncated_ledger_fails_with_3_and_the_others_pass(tmp_path, capsys):
    good, bad = charged(tmp_path), charged(tmp_path, "owner-2")
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    code, out = check(tmp_path, capsys)
    assert code == 3
    assert out.splitlines() == [f"{good}: ok", f"{bad}: not a lifetime ledger (database disk image is malformed)"]


def test_check_of_a_missing_ledger_named_by_its_record_fails(tmp_path, capsys):
    db = charged(tmp_path)
    db.unlink()
    code, out = check(tmp_path, capsys)
    assert code == 3 and out.startswith(f"{db}: the lifetime ledger of 'owner-1'") and "missing" in out


@pytest.mark.parametrize("content", [b"", os.urandom(4096)], ids=["empty", "random bytes"])
def test_check_of_a_file_that_is_no_ledger_fails(tmp_path, capsys, content):
    db = ledger_file(tmp_path, "owner-1")
    db.write_bytes(content)
    code, out = check(db, capsys)
    assert code == 3 and out.startswith(f"{db}: ") and "ok" not in out


def test_check_of_a_path_with_no_ledger_exits_2(tmp_path, capsys):
    assert main(["ledger", "check", str(tmp_path)]) == 2
    assert "no lifetime ledger here" in capsys.readouterr().err
    assert main(["ledger", "check", str(tmp_path / "nowhere")]) == 2


def tamper(db: Path, statement: str) -> None:
    raw = sqlite3.connect(db)
    raw.execute(statement)
    raw.commit()
    raw.close()


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        ("UPDATE charges SET charged_eps = -0.5 WHERE request_id = 'r1'", "request 'r1': negative or not a number"),
        ("UPDATE charges SET charged_eps = 0.9 WHERE request_id = 'r1'", "spends more than its budget (eps="),
        (
            "UPDATE charges SET charged_eps = NULL, charged_delta = NULL WHERE request_id = 'r1'",
            "request 'r1' is committed but carries no charge",
        ),
        ("UPDATE ledger SET budget_eps = 0", "a budget that is not one"),
    ],
    ids=["negative charge", "over budget", "counted without charge", "zero budget"],
)
def test_check_names_a_broken_invariant(tmp_path, capsys, statement, problem):
    db = charged(tmp_path)
    tamper(db, statement)
    code, out = check(tmp_path, capsys)
    assert code == 3 and problem in out, out


def test_check_finds_a_sale_of_no_request_and_one_that_sold_more_than_it_reserved(tmp_path, capsys):
    db = charged(tmp_path)
    with LifetimeLedger.read(db) as ledger:
        from marketplace.privacy.lifetime import SaleTerms

        ledger.reserve("sale", Cost.pure(0.01), consumer="c", what="points", points=5, terms=SaleTerms(price=1.0))
        ledger.commit("sale", sold=3)
    assert check(tmp_path, capsys)[0] == 0
    tamper(db, "UPDATE sales SET sold = 9")
    tamper(db, "UPDATE charges SET request_id = 'renamed' WHERE request_id = 'sale'")
    code, out = check(tmp_path, capsys)
    assert code == 3 and "sale 'sale' belongs to no request of the ledger" in out
