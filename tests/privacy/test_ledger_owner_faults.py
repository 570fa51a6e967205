"""One owner's ledger fault stays that owner's: a ledger that is refused declines that owner alone,
naming the file; a disk or SQLite error on a ledger after its owner was admitted never becomes an
uncaught error of the run (settling keeps the reservation and says why; marking a release as left
fails with an error naming the owner and the file, so nothing leaves unrecorded).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from conftest import ROOT

import marketplace
from marketplace import plugins
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.roles import Role
from marketplace.roles.lifetime import LedgerFault, admit, settle
from marketplace.roles.party import Party

SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"


def sketch(ledgers: Path) -> marketplace.Scenario:
    return marketplace.load(SKETCH, {"lifetime.ledgers": str(ledgers), "parties.owners": 3, "sketch.epsilon": 0.4})


# --- a ledger refused


def test_an_owner_whose_ledger_is_gone_declines_naming_it_and_the_others_are_admitted(tmp_path):
    config = sketch(tmp_path).config
    exchange = plugins.exchange("sketch")
    for owner in ("owner-1", "owner-2"):
        first = admit(config, owner, exchange, request_id=f"first-{owner}")
        assert first.state == "reserved", first.reason
    db = ledger_file(tmp_path, "owner-2")
    db.unlink()
    gone = admit(config, "owner-2", exchange, request_id="second")
    assert gone.state == "declined"
    assert gone.reason.startswith(f"owner-2: the ledger {db} is refused: the lifetime ledger of 'owner-2'")
    assert not db.exists()
    assert admit(config, "owner-1", exchange, request_id="second").state == "reserved"


# --- one owner's ledger fault stays that owner's


def test_a_ledger_error_at_settling_keeps_the_reservation_and_says_why(tmp_path, monkeypatch):
    admission = admit(sketch(tmp_path).config, "owner-2", plugins.exchange("sketch"), request_id="req")
    assert admission.state == "reserved"

    def broken(self, request_id, sold=None):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(LifetimeLedger, "commit", broken)
    record = admission.settle(released=True)
    assert record["state"] == "reserved"
    assert record["reason"].startswith(f"owner-2: could not settle its reservation on the ledger {admission.path}: ")
    assert "disk I/O error" in record["reason"]
    monkeypatch.undo()
    with LifetimeLedger.read(admission.path) as ledger:
        assert [r.state for r in ledger.history()] == ["reserved"]  # counted as spent until reconciled


def test_a_ledger_error_when_marking_left_names_the_owner_and_the_file(tmp_path, monkeypatch):
    admission = admit(sketch(tmp_path).config, "owner-2", plugins.exchange("sketch"), request_id="req")

    def broken(self, request_id):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(LifetimeLedger, "mark_left", broken)
    with pytest.raises(LedgerFault) as failed:
        admission.mark_left()
    assert str(failed.value).startswith(f"owner-2: cannot mark its release as left on {admission.path}: ")
    assert not admission.left


def test_a_run_whose_one_owner_cannot_settle_completes_and_reports_why(tmp_path, monkeypatch):
    ledgers = tmp_path / "ledgers"
    commit = LifetimeLedger.commit

    def broken_for_owner_2(self, request_id, sold=None):
        if self.owner == "owner-2":
            raise sqlite3.OperationalError("disk I/O error")
        return commit(self, request_id, sold)

    monkeypatch.setattr(LifetimeLedger, "commit", broken_for_owner_2)
    marketplace.run(sketch(ledgers), tmp_path / "run", driver="inprocess")
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    owners = report["lifetime"]["owners"]
    assert report["status"] == "completed"
    assert {o: r["state"] for o, r in owners.items()} == {
        "owner-1": "committed",
        "owner-2": "reserved",
        "owner-3": "committed",
    }
    assert owners["owner-2"]["reason"].startswith("owner-2: could not settle its reservation on the ledger ")
    assert str(ledger_file(ledgers, "owner-2")) in owners["owner-2"]["reason"]


def test_settle_of_a_party_without_a_ledger_is_none():
    class Bare(Role):
        party_id, role_name = "owner-1", "owner"

        def start(self):
            return []

        def handle(self, message):
            return []

    assert settle(Party(Bare())) is None
