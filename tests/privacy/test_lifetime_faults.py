"""Lifetime ledgers that cannot be used, and reservations left by owners that died.

A ledger that cannot be written, or a file that is not a lifetime ledger, makes its owner decline
the run with a reason (never a traceback), and the run goes on without it. An owner records on its
ledger when a release first leaves it, before the first frame of the protocol reaches the transport;
a process that opens the ledger later rolls back what a dead owner left reserved with no such record
(nothing left) and keeps, as spent, what it left reserved with one.

Tests run as root, where ``chmod`` stops no write. What really fails as root: a ledger folder whose
parent is a regular file (no folder can be made there), a ledger whose ``-wal`` path is taken by a
folder (SQLite cannot open its write-ahead log: the file is unusable for writing), and, where the
file system allows it, ``chattr +i`` (immutable, even for root).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT

import marketplace
from marketplace import plugins
from marketplace.cli import main
from marketplace.messages import PROTOCOL_VERSION, Envelope, encode
from marketplace.parties import build_role, make_world, share_of
from marketplace.privacy.lifetime import Cost, LedgerInputError, LifetimeLedger, ledger_file
from marketplace.roles.identity import RUNTIME_KINDS
from marketplace.roles.lifetime import admit, admit_party, settle
from marketplace.roles.party import Party
from marketplace.runner.report_schema import report_problems
from marketplace.transport.node import Node

SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"
RELATION = "add/remove-one (a row of owner-1's data)"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def new_ledger(folder: Path, owner: str = "owner-1") -> LifetimeLedger:
    return LifetimeLedger.open(ledger_file(folder, owner), owner=owner, budget=(1.0, 0.0), relation=RELATION)


def in_another_process(db: Path, body: str, *, wait: bool = True) -> subprocess.Popen:
    """Run ``body`` (``ledger`` is ``db`` opened) in a fresh interpreter that ends with ``os._exit``:
    whatever it reserved stays unsettled, as after a crash."""
    code = textwrap.dedent(
        """
        import os, sys
        from marketplace.privacy.lifetime import Cost, LifetimeLedger
        ledger = LifetimeLedger.read(sys.argv[1])
        """
    ) + textwrap.dedent(body)
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(db)], env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    if wait:
        out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err.decode()
    return child


def states(db: Path) -> dict[str, str]:
    with LifetimeLedger.read(db) as ledger:
        return {r.request_id: r.state for r in ledger.history()}


# --- the "left" record and reconcile


def test_reconcile_rolls_back_what_never_left_and_keeps_what_left(tmp_path):
    new_ledger(tmp_path).close()
    db = ledger_file(tmp_path, "owner-1")
    in_another_process(
        db,
        """
        ledger.reserve("never-left", Cost.pure(0.25), consumer="c", what="w")
        ledger.reserve("left", Cost.pure(0.5), consumer="c", what="w")
        ledger.mark_left("left")
        os._exit(0)  # killed before settling either
        """,
    )
    with LifetimeLedger.read(db) as ledger:
        assert ledger.spent().eps == 0.75  # before reconcile, both count
        assert ledger.holder("never-left").left_at is None and ledger.holder("left").left_at is not None
        done = ledger.reconcile()
        assert done == {"rolled_back": ["never-left"], "kept": ["left"], "untouched": []}
        assert ledger.spent().eps == 0.5
        assert ledger.reconcile() == {"rolled_back": [], "kept": [], "untouched": []}  # idempotent
    assert states(db) == {"never-left": "aborted", "left": "committed"}


def test_reconcile_never_touches_a_reservation_of_a_live_process(tmp_path):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("mine", Cost.pure(0.1), consumer="c", what="w")  # this live process holds it
    db = ledger_file(tmp_path, "owner-1")
    child = in_another_process(
        db,
        """
        ledger.reserve("theirs", Cost.pure(0.2), consumer="c", what="w")
        print("reserved", flush=True)
        sys.stdin.read()
        """,
        wait=False,
    )
    try:
        assert child.stdout.readline().strip() == b"reserved", child.stderr.read()
        with LifetimeLedger.read(db) as ledger:
            assert ledger.reconcile()["untouched"] == ["mine", "theirs"]
            assert ledger.spent().eps == pytest.approx(0.3)
    finally:
        child.kill()
        child.communicate(timeout=60)
    with LifetimeLedger.read(db) as ledger:
        assert ledger.reconcile() == {"rolled_back": ["theirs"], "kept": [], "untouched": ["mine"]}
    assert states(db) == {"mine": "reserved", "theirs": "aborted"}


def test_a_reservation_with_no_recorded_holder_stays_counted(tmp_path):
    """A ledger written before reservations named their holder: nothing proves its release never
    left, so reconcile leaves it reserved (counted as spent)."""
    new_ledger(tmp_path).close()
    db = ledger_file(tmp_path, "owner-1")
    in_another_process(db, 'ledger.reserve("old", Cost.pure(0.3), consumer="c", what="w")\nos._exit(0)\n')
    raw = sqlite3.connect(db)
    raw.execute("DROP TABLE attempts")
    raw.commit()
    raw.close()
    with LifetimeLedger.read(db) as ledger:
        assert ledger.holder("old") is None
        assert ledger.reconcile() == {"rolled_back": [], "kept": [], "untouched": ["old"]}
        assert ledger.spent().eps == 0.3


def test_nothing_may_leave_for_a_request_that_is_not_reserved(tmp_path):
    with new_ledger(tmp_path) as ledger:
        ledger.reserve("a", Cost.pure(0.1), consumer="c", what="w")
        ledger.abort("a")
        with pytest.raises(LedgerInputError, match="'a' is aborted, not reserved: nothing of its release may leave"):
            ledger.mark_left("a")
        with pytest.raises(LedgerInputError, match="unknown to the ledger"):
            ledger.mark_left("b")
        ledger.reserve("a", Cost.pure(0.1), consumer="c", what="w")  # reserved again: a fresh attempt
        assert ledger.holder("a").left_at is None
        first = ledger.mark_left("a") and ledger.holder("a").left_at
        ledger.mark_left("a")
        assert ledger.holder("a").left_at == first  # the first time is kept


def test_the_left_record_is_on_disk_before_the_first_protocol_frame_is_returned(tmp_path, monkeypatch):
    """A real sketch owner behind a real node: when the node hands back the owner's ``sketch_release``
    frame, the ledger already says the release left; a declining owner marks nothing."""
    scenario = marketplace.load(
        SKETCH,
        {"lifetime.ledgers": str(tmp_path), "lifetime.request_id": "req-1", "parties.owners": 2, "sketch.epsilon": 0.4},
    )
    exchange = plugins.exchange("sketch")
    share = share_of(make_world(scenario.config, exchange), "owner-1")
    from marketplace.protocols.sketch.exchange import public_map
    from marketplace.protocols.sketch.messages import SketchRequest

    fmap = public_map(scenario.config)
    request = SketchRequest(map_fingerprint=fmap.fingerprint, n_features=fmap.n_features)
    marks: list[int] = []
    real = LifetimeLedger.mark_left

    def spy(self, request_id):
        marks.append(role.traffic.protocol_messages_sent)
        return real(self, request_id)

    monkeypatch.setattr(LifetimeLedger, "mark_left", spy)
    role = build_role(scenario.config, "owner-1", world=share, exchange=exchange)
    party = admit_party(scenario.config, Party(role), exchange)
    node = Node(party, run_id="req-1", max_message_bytes=1 << 26)
    assert not [o for o in node.start() if o.kind not in RUNTIME_KINDS]
    db = ledger_file(tmp_path, "owner-1")
    with LifetimeLedger.read(db) as ledger:
        assert ledger.holder("req-1").left_at is None  # reserved, nothing left yet
    frame = encode(Envelope(PROTOCOL_VERSION, "req-1", 1, "curator", "owner-1", "sketch_request", None, request))
    sent = [o.kind for o in node.receive(frame, "curator")]
    assert "sketch_release" in sent and marks == [0]  # marked once, before the first frame was counted
    with LifetimeLedger.read(db) as ledger:
        assert ledger.holder("req-1").left_at is not None
    assert settle(party)["state"] == "committed"


# --- ledgers that cannot be used


def _random_bytes(path: Path) -> str:
    path.write_bytes(os.urandom(8192))
    return "file is not a database"


def _truncated(path: Path) -> str:
    with new_ledger(path.parent, owner=path.name.split(".")[0]) as ledger:
        for i in range(40):
            ledger.reserve(f"r{i}", Cost.pure(0.01), consumer="c", what="some release of a long description " * 3)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return "malformed"


def _other_schema(path: Path) -> str:
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE photos (name TEXT, taken TEXT)")
    db.commit()
    db.close()
    return "another schema, with the tables photos"


CORRUPT = {"random bytes": _random_bytes, "truncated": _truncated, "other schema": _other_schema}
SHOWN = {_random_bytes: "file is not a database", _truncated: "malformed", _other_schema: "another schema"}
"""What ``marketplace ledger show`` says of each."""


def _parent_is_a_file(path: Path) -> str:
    """The ledger folder lies under a regular file: no folder can be made there, even by root."""
    return "Not a directory"


def _wal_is_a_folder(path: Path) -> str:
    """A good ledger whose write-ahead log cannot be opened (its path is a folder): no write succeeds."""
    new_ledger(path.parent, owner=path.name.split(".")[0]).close()
    Path(f"{path}-wal").mkdir()
    return "unable to open database file"


def sketch(ledgers: Path, **overrides) -> marketplace.Scenario:
    settings = {"lifetime.ledgers": str(ledgers), "parties.owners": 3, "sketch.epsilon": 0.4}
    settings.update(overrides)
    return marketplace.load(SKETCH, settings)


@pytest.mark.parametrize("break_it", [*CORRUPT.values()], ids=[*CORRUPT])
def test_an_owner_whose_ledger_is_not_a_ledger_declines_naming_it(tmp_path, break_it):
    db = ledger_file(tmp_path, "owner-2")
    cause = break_it(db)
    before = db.read_bytes()
    config = sketch(tmp_path).config
    admission = admit(config, "owner-2", plugins.exchange("sketch"))
    assert admission.state == "declined" and not admission.admitted
    assert admission.reason.startswith(f"owner-2: the ledger {db} is not a privacy ledger: ")
    assert cause in admission.reason
    assert db.read_bytes() == before  # nothing was written into a file that is not a ledger


@pytest.mark.parametrize("break_it", [_parent_is_a_file, _wal_is_a_folder], ids=["parent is a file", "wal unusable"])
def test_an_owner_whose_ledger_cannot_be_written_declines_naming_it(tmp_path, break_it):
    folder = tmp_path
    if break_it is _parent_is_a_file:
        (tmp_path / "file").write_text("a regular file")
        folder = tmp_path / "file" / "ledgers"
    db = ledger_file(folder, "owner-2")
    cause = break_it(db)
    admission = admit(sketch(folder).config, "owner-2", plugins.exchange("sketch"))
    assert admission.state == "declined"
    assert admission.reason.startswith(f"owner-2: the ledger {db} is not writable: ") and cause in admission.reason


@pytest.fixture
def immutable():
    """``chattr +i`` on a path (undone after the test), or a skip where the file system or the
    process's capabilities do not allow it."""
    marked: list[Path] = []

    def mark(path: Path) -> None:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"chattr +i is not available here: {done.stderr.strip()}")
        marked.append(path)

    yield mark
    for path in marked:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_an_owner_whose_ledger_is_immutable_declines_naming_it(tmp_path, immutable):
    db = ledger_file(tmp_path, "owner-2")
    new_ledger(tmp_path, owner="owner-2").close()
    for leftover in (Path(f"{db}-wal"), Path(f"{db}-shm")):
        leftover.unlink(missing_ok=True)
    immutable(db)
    immutable(tmp_path)
    admission = admit(sketch(tmp_path).config, "owner-2", plugins.exchange("sketch"))
    assert admission.state == "declined"
    assert admission.reason.startswith(f"owner-2: the ledger {db} is not writable: ")


def run_report(scenario, out: Path, driver: str) -> dict:
    marketplace.run(scenario, out, driver=driver)
    report = json.loads((out / "report.json").read_text())
    assert report_problems(report) == []
    return report


def check_declined_and_others_charged(report: dict, db: Path, problem: str) -> None:
    owners = report["lifetime"]["owners"]
    assert report["status"] == "completed", report.get("failures")
    assert {o: r["state"] for o, r in owners.items()} == {
        "owner-1": "committed",
        "owner-2": "declined",
        "owner-3": "committed",
    }
    reason = owners["owner-2"]["reason"]
    assert reason.startswith(f"owner-2: the ledger {db} {problem}: "), reason
    assert report["lifetime"]["declined"] == ["owner-2"] and report["owners_lost"]["count"] == 0
    assert report["party_details"]["owner-2"]["result"] == {"declined": reason, "released": False}
    assert report["party_details"]["curator"]["result"]["dropouts"]["owner-2"]["declined"] is True
    assert report["messages"]["by_kind"]["sketch_release"]["count"] == 2
    assert "Traceback" not in json.dumps(report)
    for owner in ("owner-1", "owner-3"):
        with LifetimeLedger.read(ledger_file(db.parent, owner)) as ledger:
            assert [r.state for r in ledger.history()] == ["committed"] and ledger.spent().eps == 0.4


@pytest.mark.parametrize(
    ("break_it", "problem"),
    [(_random_bytes, "is not a privacy ledger"), (_wal_is_a_folder, "is not writable")],
    ids=["corrupt", "unwritable"],
)
def test_a_run_goes_on_without_the_owner_whose_ledger_is_broken(tmp_path, break_it, problem):
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    db = ledger_file(ledgers, "owner-2")
    break_it(db)
    report = run_report(sketch(ledgers), tmp_path / "run", "inprocess")
    check_declined_and_others_charged(report, db, problem)


def test_an_owner_process_with_a_truncated_ledger_ends_cleanly_and_declines(tmp_path):
    ledgers = tmp_path / "ledgers"
    ledgers.mkdir()
    db = ledger_file(ledgers, "owner-2")
    _truncated(db)
    report = run_report(sketch(ledgers), tmp_path / "run", "processes")
    check_declined_and_others_charged(report, db, "is not a privacy ledger")
    assert all(p["exit_code"] == 0 for p in report["parties"]), report["parties"]
    logs = sorted((tmp_path / "run").rglob("*.log"))
    assert logs, "the processes driver wrote no party logs"
    for log in logs:
        assert "Traceback" not in log.read_text(errors="replace"), log


# --- marketplace ledger show / reconcile


@pytest.mark.parametrize("break_it", [*CORRUPT.values()], ids=[*CORRUPT])
def test_show_of_a_corrupt_ledger_says_so_and_exits_2(tmp_path, capsys, break_it):
    db = ledger_file(tmp_path, "owner-1")
    break_it(db)
    before = db.read_bytes()
    assert main(["ledger", "show", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"marketplace ledger show: {db}: not a lifetime ledger (") and "Traceback" not in err
    assert SHOWN[break_it] in err
    assert db.read_bytes() == before


def test_show_never_reconciles_and_the_reconcile_command_does(tmp_path, capsys):
    new_ledger(tmp_path).close()
    new_ledger(tmp_path, owner="owner-2").close()
    db, db2 = ledger_file(tmp_path, "owner-1"), ledger_file(tmp_path, "owner-2")
    in_another_process(db, 'ledger.reserve("gone", Cost.pure(0.25), consumer="c", what="w")\nos._exit(0)\n')
    in_another_process(
        db2, 'ledger.reserve("sent", Cost.pure(0.5), consumer="c", what="w")\nledger.mark_left("sent")\nos._exit(0)\n'
    )
    assert main(["ledger", "show", str(db)]) == 0
    assert states(db) == {"gone": "reserved"}  # show only reads
    capsys.readouterr()
    assert main(["ledger", "reconcile", str(tmp_path), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert [(d["owner"], d["rolled_back"], d["kept"]) for d in done] == [
        ("owner-1", ["gone"], []),
        ("owner-2", [], ["sent"]),
    ]
    assert states(db) == {"gone": "aborted"} and states(db2) == {"sent": "committed"}
    (tmp_path / "owner-3.ledger.sqlite").write_bytes(b"junk" * 100)
    assert main(["ledger", "reconcile", str(tmp_path)]) == 2
    out = capsys.readouterr()
    assert "owner-1: " in out.out and "0 rolled back" in out.out
    assert "owner-3.ledger.sqlite: not a lifetime ledger (file is not a database)" in out.err
    assert "Traceback" not in out.err


@pytest.mark.parametrize("blank", ["empty", "wal header only"])
def test_a_ledger_whose_creator_was_killed_before_writing_is_created_again(tmp_path, blank):
    db = ledger_file(tmp_path, "owner-2")
    db.touch()
    if blank == "wal header only":  # the switch to WAL mode is on disk, the first transaction is not
        raw = sqlite3.connect(db)
        raw.execute("PRAGMA journal_mode=WAL")
        raw.close()
        assert db.stat().st_size > 0
    admission = admit(sketch(tmp_path).config, "owner-2", plugins.exchange("sketch"))
    assert admission.state == "reserved", admission.reason
    with LifetimeLedger.read(db) as ledger:
        assert ledger.spent().eps == 0.4 and ledger.budget[0] > 0
