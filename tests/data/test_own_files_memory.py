"""A party's own file is counted before it is held: a file over a limit (rows, inflated bytes, its
features in memory) or with a bad row is refused by a first pass that keeps nothing, and only a
file that passed is read into arrays. A party that runs out of memory anyway (limits raised past
what its machine holds) gets an error naming the party, the file and the limits to lower, and its
command exits 2 without a traceback."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import zmq.auth

from marketplace.cli import main
from marketplace.data import own_files
from marketplace.data.own_files import OwnDataError, ReadLimits, load_own_rows
from marketplace.data.public_schema import DataSchema
from marketplace.schema import build

SCHEMA = {
    "features": [{"name": "age", "lower": 0, "upper": 120}, {"name": "dose", "lower": -1, "upper": 1}],
    "label": {"name": "outcome", "classes": ["healed", "not"]},
}

MARKET = """\
name: mini
protocol: sketch
parties: {owners: 2}
data:
  schema:
    features: [{name: age, lower: 0, upper: 120}, {name: dose, lower: -1, upper: 1}]
    label: {name: outcome, classes: [healed, not]}
sketch: {lower: [0, -1], upper: [120, 1]}
"""


def schema(**changes) -> DataSchema:
    return build(DataSchema, {**SCHEMA, **changes})


@pytest.fixture
def kept(monkeypatch) -> list[int]:
    """The row counts of the files read into arrays (the second pass), in order."""
    seen: list[int] = []
    keep = own_files._keep_rows

    def spy(rows, schema, where, header, n):
        seen.append(n)
        return keep(rows, schema, where, header, n)

    monkeypatch.setattr(own_files, "_keep_rows", spy)
    return seen


def test_a_good_file_is_read_into_arrays_once_its_rows_are_counted(tmp_path, kept):
    path = tmp_path / "o.csv"
    path.write_text("age,dose,outcome\n" + "40,0.5,healed\n7,-1,not\n" * 5000)
    rows = load_own_rows(path, schema(), party="owner-1")
    assert kept == [10_000]
    assert len(rows) == 10_000 and rows.X[-1].tolist() == [7.0, -1.0] and rows.y.tolist()[:2] == [0, 1]
    assert rows.group.tolist()[:2] == [0, 1]  # without a group column the groups are the classes


def test_a_file_over_the_row_limit_is_refused_before_any_row_is_held(tmp_path, kept):
    path = tmp_path / "o.csv"
    path.write_text("age,dose,outcome\n" + "1,0,not\n" * 101)
    with pytest.raises(OwnDataError, match=r"^owner-1: .*more than 100 rows.*raise the limit with --max-rows"):
        load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_rows=100))
    assert kept == []


def test_a_gzip_inflating_past_max_bytes_is_refused_while_counted_before_any_row_is_held(tmp_path, kept):
    path = tmp_path / "bomb.csv.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"age,dose,outcome,note\n")
        f.write((b"40,0.5,healed," + b"x" * 90 + b"\n") * 2000)  # 208 kB inflated, 2000 good rows
    assert path.stat().st_size < 5_000
    with pytest.raises(
        OwnDataError,
        match=r"^owner-1: .*bomb\.csv\.gz holds more than 100000 bytes .* once decompressed, the limit; "
        r"raise the limit with --max-bytes$",
    ):
        load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_bytes=100_000))
    assert kept == []
    assert len(load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_bytes=300_000))) == 2000


def test_features_that_would_take_more_than_max_bytes_in_memory_are_refused_before_they_are_held(tmp_path, kept):
    path = tmp_path / "o.csv"
    path.write_text("age,dose,outcome\n" + "1,0,not\n" * 1000)  # 8 kB on disk, 16 kB as numbers
    with pytest.raises(
        OwnDataError, match=r"^owner-1: .*o\.csv: its 1,000 rows of 2 features would take 16,000 bytes.*--max-bytes$"
    ):
        load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_bytes=10_000))
    assert kept == []


@pytest.mark.parametrize("outside", ["refuse", "clip"])
def test_a_bad_value_on_the_last_line_is_refused_by_the_first_pass(tmp_path, kept, outside):
    path = tmp_path / "o.csv"
    path.write_text("age,dose,outcome\n" + "1,0,not\n" * 9000 + "1,nan,not\n" + "500,0,not\n")
    expected = "expected a finite number" if outside == "clip" else r"expected a number in \[-1, 1\]"
    more = "" if outside == "clip" else r".*\(2 values outside their ranges in all\)"
    with pytest.raises(OwnDataError, match=rf"line 9002, column 'dose': {expected}{more}"):
        load_own_rows(path, schema(outside=outside), party="owner-1")
    assert kept == []


def test_values_outside_their_ranges_are_clipped_with_outside_clip(tmp_path):
    path = tmp_path / "o.csv"
    path.write_text("age,dose,outcome\n500,-3,not\n" + "1,0,not\n" * 5000)
    rows = load_own_rows(path, schema(outside="clip"), party="owner-1")
    assert rows.X[0].tolist() == [120.0, -1.0] and len(rows) == 5001


def test_a_file_that_changes_between_the_passes_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "o.csv"
    path.write_text("age,dose,outcome\n" + "1,0,not\n" * 10)
    check = own_files._check_rows

    def then_grow(rows, schema, where):
        counted = check(rows, schema, where)
        with path.open("a") as f:
            f.write("2,0,healed\n")
        return counted

    monkeypatch.setattr(own_files, "_check_rows", then_grow)
    with pytest.raises(OwnDataError, match=r"^owner-1: .*o\.csv: the file changed while it was read"):
        load_own_rows(path, schema(), party="owner-1")


def out_of_memory(*args, **kwargs):
    raise MemoryError


def test_running_out_of_memory_names_the_party_the_file_and_the_limits_to_lower(tmp_path, monkeypatch):
    path = tmp_path / "o.csv"
    path.write_text("age,dose,outcome\n1,0,not\n")
    monkeypatch.setattr(own_files, "_keep_rows", out_of_memory)
    with pytest.raises(OwnDataError) as refused:
        load_own_rows(path, schema(), party="consumer (target)", limits=ReadLimits(max_bytes=2_000_000_000))
    text = str(refused.value)
    assert text.startswith(f"consumer (target): {path}: ran out of memory reading it (25 bytes on disk), within")
    assert "--max-bytes 2,000,000,000 and --max-rows 10,000,000" in text
    assert "lower --max-bytes or --max-rows" in text
    assert refused.value.__context__ is None  # nothing of the read is kept alive by the error


def test_an_npz_that_runs_out_of_memory_gives_the_same_error(tmp_path, monkeypatch):
    path = tmp_path / "o.npz"
    np.savez(path, X=np.zeros((3, 2)), y=np.array(["not", "healed", "not"]))
    assert load_own_rows(path, schema(), party="owner-1").y.tolist() == [1, 0, 1]
    monkeypatch.setattr(own_files, "_check_ranges", out_of_memory)
    with pytest.raises(OwnDataError, match=r"^owner-1: .*o\.npz: ran out of memory reading it .*--max-bytes"):
        load_own_rows(path, schema(), party="owner-1")


def test_an_npz_label_that_is_not_a_class_names_its_row(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, X=np.zeros((4, 2)), y=np.array(["not", "healed", "maybe", "never"]))
    with pytest.raises(OwnDataError, match=r"o\.npz: array y: row 2: expected one of the schema's classes"):
        load_own_rows(path, schema(), party="owner-1")


def test_a_consumer_out_of_memory_exits_2_with_the_error_and_no_traceback(tmp_path, monkeypatch, capsys):
    kit = tmp_path / "kit"
    kit.mkdir()
    zmq.auth.create_certificates(str(kit), "alice")
    zmq.auth.create_certificates(str(kit), "server")
    (kit / "server.key_secret").unlink()
    (kit / "market.yaml").write_text(MARKET)
    target = tmp_path / "target.csv"
    target.write_text("age,dose,outcome\n1,0,not\n")
    monkeypatch.setattr(own_files, "_keep_rows", out_of_memory)
    status = main(
        [
            "request",
            str(kit / "market.yaml"),
            "--market",
            "tcp://127.0.0.1:9",
            "--keys",
            str(kit),
            "--data",
            str(target),
            "--max-bytes",
            "2000000000",
            "--out",
            str(tmp_path / "out"),
            "--quiet",
        ]
    )
    err = capsys.readouterr().err
    assert status == 2, err
    assert f"marketplace request: consumer (target): {target}: ran out of memory reading it" in err
    assert "--max-bytes 2,000,000,000" in err and "Traceback" not in err and "MemoryError" not in err
