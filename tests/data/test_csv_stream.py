"""The csv source reads its file as a stream, within limits a scenario may raise.

* On every file the former reader (the whole file in memory, tests/data/csv_reference.py) could
  read, the streaming reader builds the same Dataset, or refuses it with the same error.
* A file over a limit (``max_bytes`` on disk, decompressed or as numbers in memory, ``max_rows``,
  ``max_field_chars``, ``max_row_chars``) is refused with a ValueError that names the file, the
  limit and the option to raise; raising the option lets it through.
* Through the command line (``slow``: real processes), a sparse 2 GB file and a gzip file that
  inflates past the limit are refused with exit status 2 and that message, while the process's
  peak memory stays under 500 MB.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import ROOT
from csv_reference import reference_csv_source
from hypothesis import given
from hypothesis import strategies as st

from marketplace.data import CsvSource, SourceConfig, load_source
from marketplace.data.sources.csv_file import MAX_BYTES, MAX_FIELD_CHARS, csv_source

OPTION = "data.source.csv"


def load(path: Path, **options) -> object:
    return load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), **options)), np.random.default_rng(0))


def outcome(read, cfg: CsvSource) -> tuple:
    """What a reader makes of ``cfg``: its Dataset's contents, or its error's type and message."""
    try:
        data = read(cfg)
    except Exception as err:  # noqa: BLE001 - the error itself is compared
        return ("error", type(err).__name__, str(err))
    return (
        "data",
        data.X.shape,
        data.X.tolist(),
        data.y.tolist(),
        data.group.tolist(),
        data.feature_names,
        data.group_names,
        data.name,
    )


# --- the same Dataset (or error) as the former reader ----------------------------------------------

NAMES = ["a", "b", " c ", "label", "g", "a"]
CELLS = [
    "1",
    "-2.5",
    " 3 ",
    "1e3",
    "0",
    "7",
    "2.0",
    "1_0",
    "x",
    "yes",
    "no",
    "north",
    "",
    " ",
    "?",
    "NA",
    "n/a",
    "NaN",
    "nan",
    "null",
    "None",
    "inf",
    "-inf",
    "-nan",
    "1e200",
    "9e153",
    "-1e300",
    "with,comma",
    'say "hi"',
    "two\nlines",
]


@st.composite
def tables(draw):
    """A small CSV file (as text) and options naming some of its columns (or absent ones)."""
    header = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5))
    width = len(header)
    rows = draw(st.lists(st.lists(st.sampled_from(CELLS), min_size=width, max_size=width), max_size=8))
    if rows and draw(st.booleans()) and draw(st.booleans()):  # now and then a row of the wrong width
        at = draw(st.integers(0, len(rows) - 1))
        rows[at] = rows[at][:-1] if draw(st.booleans()) else [*rows[at], "1"]
    delimiter = draw(st.sampled_from([",", ";"]))
    out = _Text()
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\n")
    writer.writerow(header)
    for row in rows:
        if draw(st.integers(0, 5)) == 0:
            out.write("\n" if draw(st.booleans()) else " \n")  # a blank line
        writer.writerow(row)
    columns = sorted({name.strip() for name in header}) + ["absent"]
    label = draw(st.sampled_from(columns))
    group = draw(st.none() | st.sampled_from(columns))
    features = tuple(draw(st.lists(st.sampled_from(columns), max_size=3)))
    return out.text, dict(label=label, group=group, features=features, delimiter=delimiter)


class _Text:
    def __init__(self) -> None:
        self.text = ""

    def write(self, s: str) -> None:
        self.text += s


@given(table=tables(), compression=st.sampled_from(["", ".gz", ".bz2"]), bom=st.booleans())
def test_the_streaming_reader_builds_what_the_former_reader_built(tmp_path_factory, table, compression, bom):
    text, options = table
    data = ("\ufeff" if bom else "") + text
    raw = data.encode("utf-8")
    path = tmp_path_factory.mktemp("t") / f"t.csv{compression}"
    path.write_bytes(
        {
            "": raw,
            ".gz": gzip.compress(raw) if compression == ".gz" else b"",
            ".bz2": bz2.compress(raw) if compression == ".bz2" else b"",
        }[compression]
    )
    cfg = CsvSource(path=str(path), **options)
    assert outcome(csv_source, cfg) == outcome(reference_csv_source, cfg)


def test_the_former_readers_examples_come_out_the_same(tmp_path):
    """A few tables picked by hand: every kind of refusal and a mixed table that loads."""
    files = {
        "ok.csv": "id,city,age,income,note,label\nc1,north,30,1.5,,yes\nc2,south,40,2.5,NA,no\n\nc3,west,50,3,x,yes\n",
        "wide.csv": "a,b,label\n1,2,0\n1,2,3,0\n",
        "mixed.csv": "a,b,label\n1,2,0\n3,abc,1\n",
        "missing.csv": "a,b,label\n1,NA,0\n,2,1\n3,4,\n",
        "inf.csv": "a,b,label\n1,2,0\n3,inf,1\n",
        "huge.csv": "a,b,label\n1,2,0\n3,-1e300,1\n5,1e200,1\n",
        "empty.csv": "",
        "textonly.csv": "name,label\nann,1\n",
        "quoted.csv": 'a,note,label\n1,"two\nlines, and a comma",0\n2,"say ""hi""",1\n',
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text)
        for options in (
            {"label": "label"},
            {"label": "label", "group": "city"},
            {"label": "label", "features": ("b", "a")},
            {"label": "label", "features": ("age", "age")},
        ):
            cfg = CsvSource(path=str(tmp_path / name), **options)
            assert outcome(csv_source, cfg) == outcome(reference_csv_source, cfg), (name, options)


# --- the limits -----------------------------------------------------------------------------------


def rows_csv(path: Path, n: int) -> Path:
    path.write_text("a,b,label\n" + "".join(f"{i}.000001,{i % 5}.500001,{i % 2}\n" for i in range(n)))
    return path


def test_a_file_larger_than_max_bytes_is_refused_before_it_is_read(tmp_path):
    path = rows_csv(tmp_path / "d.csv", 50)
    size = path.stat().st_size
    with pytest.raises(
        ValueError,
        match=rf"^{OPTION}\.max_bytes: {re.escape(str(path))} is {size} bytes .*more than the "
        rf"limit of {size - 1} bytes .*; raise {OPTION}\.max_bytes to read it$",
    ):
        load(path, label="label", max_bytes=size - 1)
    assert len(load(path, label="label", max_bytes=size)) == 50


@pytest.mark.parametrize("suffix, compress", [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_a_compressed_file_is_stopped_once_its_decompressed_bytes_pass_max_bytes(tmp_path, suffix, compress):
    text = ("a,label\n" + "1.000000001,0\n2.000000001,1\n" * 2500).encode()
    path = tmp_path / f"d.csv{suffix}"
    path.write_bytes(compress(text))
    assert path.stat().st_size < 2000
    with pytest.raises(
        ValueError,
        match=rf"^{OPTION}\.max_bytes: {re.escape(str(path))} holds more than 20000 bytes "
        rf"\(19.5 KiB\) once decompressed, the limit; raise {OPTION}\.max_bytes",
    ):
        load(path, label="label", max_bytes=20_000)
    assert len(load(path, label="label", max_bytes=len(text))) == 5000


def test_the_features_may_not_take_more_memory_than_max_bytes(tmp_path):
    """Short numbers take 8 bytes each in memory: more than the file. That counts too."""
    path = tmp_path / "d.csv"
    path.write_text("a,b,label\n" + "1,2,0\n" * 100)
    with pytest.raises(
        ValueError,
        match=rf"^{OPTION}\.max_bytes: {re.escape(str(path))}: its 100 rows of 2 features "
        rf"would take 1600 bytes .* of memory as numbers, more than the limit of 1000 "
        rf"bytes .*; raise {OPTION}\.max_bytes to read it \(or name fewer columns in "
        rf"{OPTION}\.features\)$",
    ):
        load(path, label="label", max_bytes=1000)
    assert load(path, label="label", features=("a",), max_bytes=1000).dim == 1


def test_a_file_with_more_rows_than_max_rows_is_refused_at_the_first_row_too_many(tmp_path):
    path = rows_csv(tmp_path / "d.csv", 10)
    with pytest.raises(
        ValueError,
        match=rf"^{OPTION}\.max_rows: {re.escape(str(path))} has more than 9 rows \(line 11 "
        rf"holds row 10\), the limit; raise {OPTION}\.max_rows to read it$",
    ):
        load(path, label="label", max_rows=9)
    assert len(load(path, label="label", max_rows=10)) == 10


def test_blank_lines_count_as_rows_so_a_file_of_line_ends_is_stopped_early(tmp_path):
    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress(b"a,label\n1,0\n2,1\n" + b"\n" * 1_000_000))
    with pytest.raises(
        ValueError, match=rf"^{OPTION}\.max_rows: .* has more than 1000 rows \(line 1002 holds row 1001\)"
    ):
        load(path, label="label", max_rows=1000)
    path.write_bytes(gzip.compress(b"a,label\n1,0\n\n\n2,1\n"))
    assert len(load(path, label="label", max_rows=4)) == 2


def test_a_field_longer_than_max_field_chars_is_a_clear_error_not_a_csv_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,note,label\n1,short,0\n2," + "x" * 5000 + ",1\n")
    with pytest.raises(
        ValueError,
        match=rf"^{OPTION}\.max_field_chars: {re.escape(str(path))}, line 3: a field longer "
        rf"than 4999 characters, the limit; raise {OPTION}\.max_field_chars",
    ) as err:
        load(path, label="label", max_field_chars=4999)
    assert not isinstance(err.value, csv.Error)
    assert len(load(path, label="label", max_field_chars=5000)) == 2
    assert csv.field_size_limit() == 131072, "the csv module's limit is put back after the file is read"


def test_reads_in_two_threads_keep_their_own_field_limits(tmp_path):
    """csv.field_size_limit is one setting for the process: two runs reading files at once (the
    Python API runs a scenario in a thread) must not change each other's limit."""
    from concurrent.futures import ThreadPoolExecutor

    long, short = tmp_path / "long.csv", tmp_path / "short.csv"
    long.write_text("a,note,label\n" + "".join(f"{i},{'x' * 300_000},{i % 2}\n" for i in range(4)))
    short.write_text("a,note,label\n" + "".join(f"{i},{'y' * 50},{i % 2}\n" for i in range(2000)))

    def read(path: Path, limit: int) -> int:
        return len(load(path, label="label", max_field_chars=limit))

    with ThreadPoolExecutor(2) as pool:
        for _ in range(5):
            runs = [pool.submit(read, long, 400_000), pool.submit(read, short, 100)]
            assert [run.result() for run in runs] == [4, 2000]
    assert csv.field_size_limit() == 131072


def test_the_default_field_limit_is_one_mib_not_the_csv_modules_128_kib(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("a,note,label\n1," + "x" * 500_000 + ",0\n2,y,1\n")
    assert len(load(path, label="label")) == 2
    path.write_text("a,note,label\n1," + "x" * (MAX_FIELD_CHARS + 1) + ",0\n")
    with pytest.raises(ValueError, match=rf"line 2: a field longer than {MAX_FIELD_CHARS} characters"):
        load(path, label="label")


@pytest.mark.parametrize(
    "row",
    ["1," + "2" * 3000 + ",0\n", '1,"' + "2\n" * 1500 + '",0\n', "1," * 1500 + "0\n"],
    ids=["one-long-line", "quoted-lines", "many-fields"],
)
def test_a_row_longer_than_max_row_chars_is_refused_before_it_is_read_whole(tmp_path, row):
    path = tmp_path / "d.csv"
    path.write_text("a,b,label\n1,2,0\n" + row)
    with pytest.raises(
        ValueError,
        match=rf"^{OPTION}\.max_row_chars: {re.escape(str(path))}, line \d+: a row longer "
        rf"than 2000 characters, the limit; raise {OPTION}\.max_row_chars to read it$",
    ):
        load(path, label="label", max_row_chars=2000, max_field_chars=5000)


def test_an_error_quotes_a_long_cell_cut_short(tmp_path):
    """A field may hold a megabyte: the error shows its start and its length, not all of it."""
    path = tmp_path / "d.csv"
    path.write_text("a,b,label\n1,2,0\n3," + "x" * 100_000 + ",1\n")
    with pytest.raises(
        ValueError, match=r"line 3, column 'b': 'x{60}'\.\.\. \(100000 characters\) is not a number"
    ) as err:
        load(path, label="label")
    assert len(str(err.value)) < 400


def test_a_line_of_nul_bytes_with_no_end_is_stopped_at_the_row_limit(tmp_path):
    path = tmp_path / "d.csv"
    with path.open("wb") as f:
        f.write(b"a,label\n")
        f.truncate(8 + 100_000)  # a sparse tail of NUL bytes, as a truncated or preallocated file has
    with pytest.raises(ValueError, match=rf"^{OPTION}\.max_row_chars: .*d\.csv, line 2: a row longer than 5000"):
        load(path, label="label", max_row_chars=5000)


@pytest.mark.parametrize(
    "raw, message",
    [
        (
            b"a,label\n1,0\n\xff\xfe,1\n",
            r"d\.csv: not UTF-8 text \(invalid start byte: byte 0xff near line \d\); save the file as UTF-8",
        ),
        (b"a,label\n1,0\r2,1\n", r"d\.csv, line 2: not valid CSV \(new-line character seen in unquoted field"),
    ],
)
def test_a_file_that_is_not_utf8_csv_is_refused_naming_it(tmp_path, raw, message):
    path = tmp_path / "d.csv"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=message):
        load(path, label="label")


@pytest.mark.parametrize(
    "raw", [b"not gzip at all", gzip.compress(b"a,label\n1,0\n" * 100)[:-30]], ids=["not-gzip", "truncated"]
)
def test_a_damaged_gzip_file_is_refused_naming_it(tmp_path, raw):
    path = tmp_path / "d.csv.gz"
    path.write_bytes(raw)
    with pytest.raises(ValueError, match=r"d\.csv\.gz: cannot read a gzip file: "):
        load(path, label="label")


def test_a_limit_must_be_a_positive_whole_number(tmp_path):
    from marketplace.schema import SchemaError, build

    with pytest.raises(SchemaError, match=r"data\.source\.csv\.max_rows: expected a number in \[1, inf\), got 0"):
        build(SourceConfig, {"kind": "csv", "csv": {"path": "d.csv", "label": "y", "max_rows": 0}}, "data.source")


# --- through the command line: exit 2 at bounded memory --------------------------------------------

MEASURE = """
import json, resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True, timeout=600)
print(json.dumps({"returncode": done.returncode, "stderr": done.stderr,
                  "peak_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""
"""Runs a command and reports its exit status, stderr and peak resident memory: ru_maxrss of the
children of this fresh process, that command alone (ru_maxrss is in KiB on Linux)."""

PEAK_MB = 500


def validate_measured(*args: str) -> dict:
    """`marketplace validate ARGS` in its own process: exit status, stderr and peak memory (MB)."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, sys.executable, "-m", "marketplace", "validate", *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def csv_scenario(folder: Path, data: str, **options) -> Path:
    """A scenario whose data is the CSV file ``data`` in ``folder`` (column ``label``)."""
    raw = {
        "name": "own-file",
        "protocol": "summarize",
        "seed": 1,
        "parties": {"owners": 2},
        "data": {
            "source": {"kind": "csv", "csv": {"path": data, "label": "label", **options}},
            "partition": {"scheme": "even"},
            "consumer": {"target_groups": [0], "target_share": 0.5, "validation_size": 2, "test_size": 2},
            "seed_set": {"groups": [1], "size": 2},
        },
        "summarize": {"rounds": 2, "gamma": 0.5, "features": 10},
    }
    path = folder / "own-file.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def assert_refused(result: dict, file: Path, option: str, limit: int) -> None:
    assert result["returncode"] == 2, result["stderr"]
    assert "Traceback" not in result["stderr"], result["stderr"]
    line = result["stderr"].strip().splitlines()[-1]
    assert line.startswith("marketplace: bad scenario: ") and f": {OPTION}.{option}: " in line, line
    assert str(file) in line and f"{limit}" in line and f"raise {OPTION}.{option} to read it" in line, line
    assert result["peak_mb"] < PEAK_MB, f"peak memory {result['peak_mb']:.0f} MB"


@pytest.mark.slow
def test_a_sparse_2_gb_file_is_refused_at_exit_2_with_little_memory(tmp_path):
    big = tmp_path / "big.csv"
    with big.open("wb") as f:
        f.write(b"a,b,label\n1,2,0\n")
        f.seek(2 * 1024**3)
        f.write(b"\n")
    assert big.stat().st_blocks * 512 < 1 << 20, "the test file should be sparse"
    result = validate_measured(str(csv_scenario(tmp_path, "big.csv")))
    assert_refused(result, big, "max_bytes", MAX_BYTES)
    assert (
        f"{big} is {2 * 1024**3 + 1} bytes (2 GiB), more than the limit of {MAX_BYTES} bytes (1 GiB)"
        in result["stderr"]
    )


@pytest.mark.slow
def test_a_gzip_file_that_inflates_past_max_bytes_is_refused_at_exit_2_with_little_memory(tmp_path):
    """1.1 GiB of blank lines (1 KiB each) in a gzip file of about 7 MB: one 16 MiB chunk compressed
    once and written as a gzip member again and again (a reader inflates the members one after
    another, as it would one long member), so the test spends no seconds compressing."""
    bomb = tmp_path / "bomb.csv.gz"
    chunk = gzip.compress((b" " * 1023 + b"\n") * (1 << 14), compresslevel=1, mtime=0)  # 16 MiB inflated
    with bomb.open("wb") as f:
        f.write(gzip.compress(b"a,b,label\n1,2,0\n", mtime=0))
        for _ in range(MAX_BYTES // (1 << 24) + 8):
            f.write(chunk)
    assert bomb.stat().st_size < 20 << 20
    result = validate_measured(str(csv_scenario(tmp_path, "bomb.csv.gz")))
    assert_refused(result, bomb, "max_bytes", MAX_BYTES)
    assert f"{bomb} holds more than {MAX_BYTES} bytes (1 GiB) once decompressed" in result["stderr"]


@pytest.mark.slow
def test_a_field_over_the_default_limit_is_refused_and_raising_the_option_lets_it_through(tmp_path):
    rows = "".join(f"{i},note {i},{i % 2}\n" for i in range(40))
    (tmp_path / "notes.csv").write_text("a,note,label\n" + rows + "1," + "x" * (2 * MAX_FIELD_CHARS) + ",1\n")
    refused = validate_measured(str(csv_scenario(tmp_path, "notes.csv")))
    assert_refused(refused, tmp_path / "notes.csv", "max_field_chars", MAX_FIELD_CHARS)
    assert "notes.csv, line 42: a field longer than 1048576 characters, the limit" in refused["stderr"]
    raised = validate_measured(str(csv_scenario(tmp_path, "notes.csv", max_field_chars=3 * MAX_FIELD_CHARS)))
    assert raised["returncode"] == 0, raised["stderr"]
    assert "valid (summarize; 2 owners" in raised["stderr"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "command",
    [
        ["run", "--driver", "inprocess", "--quiet"],
        ["owners", "--ids", "owner-1,owner-2", "--endpoint", "tcp://127.0.0.1:9", "--insecure", "--no-report"],
    ],
    ids=["run", "owners"],
)
def test_run_and_an_owner_host_refuse_a_file_over_a_limit_at_exit_2(tmp_path, command):
    """The owners of an agent's session rebuild the data from the scenario, as `run` does."""
    path = rows_csv(tmp_path / "d.csv", 60)
    scenario = csv_scenario(tmp_path, "d.csv", max_rows=50)
    out = ["--out", str(tmp_path / "run")] if command[0] == "run" else []
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            *command,
            str(scenario) if command[0] == "run" else "--scenario",
            *([] if command[0] == "run" else [str(scenario)]),
            *out,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert (
        f"{OPTION}.max_rows: {path} has more than 50 rows (line 52 holds row 51), the limit; raise "
        f"{OPTION}.max_rows to read it" in done.stderr
    )
