"""A party's own rows, read from its own file and checked against the marketplace's public schema.

In a schema-only marketplace (``data.schema``) an owner brings its rows (``marketplace agent
--data``, ``marketplace owner(s) --data``) and a consumer its target and test set (``marketplace
request --data --test``). Each file is read here, once, when the party starts, and checked against
the schema: the columns it must have, every feature value inside its public range (or clipped into
it, ``outside: clip``), every label one of the classes, every group one of the values. The first
problem is refused with a :class:`OwnDataError` naming the party, the file, the line, the column,
what was expected and what was found, and a party that refuses its data sends nothing.

Two formats, by the file's name:

* ``.csv`` (also ``.csv.gz``, ``.csv.bz2``, ``.tsv``): a header row naming the columns; the schema's
  feature, label and group columns are used, any other column is ignored. Read as a stream, a row at
  a time, within :class:`ReadLimits`.
* ``.npz`` (``numpy.savez``): arrays ``X`` (n, dim) in the schema's feature order, ``y`` (n,) the
  classes (as written in the schema, or integer labels), optionally ``group`` (n,).
"""

from __future__ import annotations

import argparse
import bz2
import csv
import gzip
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.public_schema import DataSchema
from marketplace.data.sources.csv_file import is_missing

__all__ = ["OwnDataError", "ReadLimits", "load_own_rows", "parse_data_files"]


class OwnDataError(ValueError):
    """A party's own file cannot be used: the message names the party, the file, where, what was
    expected and what was found."""


@dataclass(frozen=True)
class ReadLimits:
    """The most of a party's file that is read: bytes (after decompression), rows, and bytes in one
    field. A file over a limit is refused, naming the limit and the option that raises it."""

    max_bytes: int = 1 << 30
    max_rows: int = 10_000_000
    max_field_bytes: int = 1 << 20

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """``--max-bytes``, ``--max-rows`` and ``--max-field-bytes`` on a command that reads a party's file."""
        d = ReadLimits()
        for flag, value, what in (("--max-bytes", d.max_bytes, "bytes of a data file, after decompression"),
                                  ("--max-rows", d.max_rows, "rows of a data file"),
                                  ("--max-field-bytes", d.max_field_bytes, "bytes in one CSV field")):
            parser.add_argument(flag, type=_at_least_one, default=value, metavar="N",
                                help=f"read at most N {what} (default {value:,})")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReadLimits:
        return cls(max_bytes=args.max_bytes, max_rows=args.max_rows, max_field_bytes=args.max_field_bytes)


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".tsv", ".npz")


def load_own_rows(path: str | Path, schema: DataSchema, *, party: str, limits: ReadLimits = ReadLimits()) -> Dataset:
    """``party``'s rows in ``path`` (module docstring), checked against ``schema``."""
    path = Path(path)
    where = f"{party}: {path}"
    if not path.is_file():
        raise OwnDataError(f"{where}: no such file" if not path.exists() else f"{where}: not a regular file")
    name = path.name.lower()
    if name.endswith(".npz"):
        X, y, group, lines = _read_npz(path, schema, where, limits)
    elif name.endswith((".csv", ".csv.gz", ".csv.bz2", ".tsv")):
        X, y, group, lines = _read_csv(path, schema, where, limits, delimiter="\t" if name.endswith(".tsv") else ",")
    else:
        raise OwnDataError(f"{where}: expected a file named *.csv (or .csv.gz, .csv.bz2, .tsv) or *.npz, got {path.name!r}")
    if len(X) == 0:
        raise OwnDataError(f"{where}: expected at least one row of data, got none")
    X = _check_ranges(X, schema, where, lines)
    return Dataset(X=X, y=y, group=group, feature_names=schema.feature_names, group_names=schema.group_names,
                   name=f"{party}'s own rows ({path.name})")


def _check_ranges(X: np.ndarray, schema: DataSchema, where: str, lines: list[str]) -> np.ndarray:
    lower, upper = schema.lower, schema.upper
    bad = ~np.isfinite(X) | (X < lower) | (X > upper)
    if schema.outside == "clip":
        nonfinite = ~np.isfinite(X)
        if nonfinite.any():
            r, j = map(int, np.argwhere(nonfinite)[0])
            raise OwnDataError(f"{where}: {lines[r]}, column {schema.feature_names[j]!r}: expected a finite number, "
                               f"found {float(X[r, j])!r}")
        return np.clip(X, lower, upper)
    if bad.any():
        r, j = map(int, np.argwhere(bad)[0])
        f = schema.features[j]
        count = int(bad.sum())
        more = f" ({count} values outside their ranges in all)" if count > 1 else ""
        raise OwnDataError(f"{where}: {lines[r]}, column {f.name!r}: expected a number in [{f.lower:g}, {f.upper:g}] "
                           f"(the schema's range), found {float(X[r, j])!r}{more}; fix the value, or set data.schema.outside: "
                           f"clip to clip values into their ranges")
    return X


def _codes(values: list[str], lookup: dict[str, int], column: str, what: str, where: str, lines: list[str]) -> np.ndarray:
    out = np.empty(len(values), dtype=np.int64)
    for i, value in enumerate(values):
        code = lookup.get(value)
        if code is None:
            shown = list(lookup)[:20]
            raise OwnDataError(f"{where}: {lines[i]}, column {column!r}: expected one of the schema's {what} "
                               f"{shown}{' ...' if len(lookup) > 20 else ''}, found {value!r}")
        out[i] = code
    return out


# --- CSV ---------------------------------------------------------------------------------------------


class _Counted(io.RawIOBase):
    """A binary stream that refuses to give more than ``limit`` bytes (decompressed: a gzip bomb is
    stopped after ``limit`` bytes, not after it has filled the memory)."""

    def __init__(self, raw: io.BufferedIOBase, limit: int, where: str) -> None:
        self.raw, self.limit, self.where, self.count = raw, limit, where, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        n = self.raw.readinto(buffer)
        self.count += n or 0
        if self.count > self.limit:
            raise OwnDataError(f"{self.where}: the file holds more than {self.limit:,} bytes (after decompression), "
                               f"the most read of one party's file; raise the limit with --max-bytes")
        return n or 0


def _open_text(path: Path, where: str, limits: ReadLimits) -> io.TextIOBase:
    name = path.name.lower()
    raw = gzip.open(path, "rb") if name.endswith(".gz") else bz2.open(path, "rb") if name.endswith(".bz2") else open(path, "rb")  # noqa: SIM115
    return io.TextIOWrapper(io.BufferedReader(_Counted(raw, limits.max_bytes, where)), encoding="utf-8-sig",
                            newline="")


def _rows(path: Path, where: str, limits: ReadLimits, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each row, the header first, within the limits."""
    csv.field_size_limit(max(limits.max_field_bytes, 1))
    with _open_text(path, where, limits) as text:
        reader = csv.reader(text, delimiter=delimiter)
        try:
            for row in reader:
                yield reader.line_num, row
        except csv.Error as err:
            raise OwnDataError(f"{where}: line {reader.line_num}: {err} (at most {limits.max_field_bytes:,} bytes in "
                               f"one field; raise it with --max-field-bytes)") from None
        except (UnicodeDecodeError, EOFError, OSError, zipfile.BadZipFile) as err:
            raise OwnDataError(f"{where}: line {reader.line_num}: cannot be read as CSV text ({err})") from None


def _read_csv(path: Path, schema: DataSchema, where: str, limits: ReadLimits, *,
              delimiter: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    rows = _rows(path, where, limits, delimiter)
    first = next(rows, None)
    if first is None:
        raise OwnDataError(f"{where}: expected a header row naming the columns, got an empty file")
    header = [name.strip() for name in first[1]]
    wanted = [*schema.feature_names, schema.label.name, *([schema.group.name] if schema.group is not None else [])]
    absent = [name for name in wanted if name not in header]
    if absent:
        raise OwnDataError(f"{where}: line {first[0]}: expected the schema's columns {wanted} in the header, found no "
                           f"{absent} among {header[:30]}")
    positions = [header.index(name) for name in schema.feature_names]
    label_at = header.index(schema.label.name)
    group_at = header.index(schema.group.name) if schema.group is not None else None
    chunks: list[np.ndarray] = []
    block = np.empty((4096, schema.dim))
    filled = 0
    labels: list[str] = []
    groups: list[str] = []
    lines: list[str] = []
    for line, row in rows:
        if not row or all(not field.strip() for field in row):
            continue
        if len(row) != len(header):
            raise OwnDataError(f"{where}: line {line}: expected {len(header)} fields (as in the header), found {len(row)}")
        if len(lines) >= limits.max_rows:
            raise OwnDataError(f"{where}: more than {limits.max_rows:,} rows, the most read of one party's file; raise "
                               f"the limit with --max-rows")
        for j, i in enumerate(positions):
            text = row[i].strip()
            try:
                value = float(text)
            except ValueError:
                what = "a missing value" if is_missing(text) else repr(text)
                raise OwnDataError(f"{where}: line {line}, column {header[i]!r}: expected a number, found {what}") from None
            block[filled, j] = value
        for at, out, column in ((label_at, labels, schema.label.name), (group_at, groups, None)):
            if at is None:
                continue
            text = row[at].strip()
            if is_missing(text) and text not in (schema.label.classes if column else schema.group_names):
                raise OwnDataError(f"{where}: line {line}, column {header[at]!r}: expected a value, found a missing one")
            out.append(text)
        lines.append(f"line {line}")
        filled += 1
        if filled == len(block):
            chunks.append(block)
            block, filled = np.empty((len(block), schema.dim)), 0
    chunks.append(block[:filled])
    X = np.concatenate(chunks) if chunks else np.zeros((0, schema.dim))
    y = _codes(labels, schema.class_codes(), schema.label.name, "classes", where, lines)
    group = (_codes(groups, schema.group_codes(), schema.group.name, "group values", where, lines)
             if schema.group is not None else _label_groups(y, schema))
    return X, y, group, lines


def _label_groups(y: np.ndarray, schema: DataSchema) -> np.ndarray:
    """Without a group column the groups are the classes: the position of each row's class."""
    codes = schema.class_codes()
    position = {code: i for i, code in enumerate(codes[c] for c in schema.label.classes)}
    return np.array([position[int(v)] for v in y], dtype=np.int64)


# --- npz ---------------------------------------------------------------------------------------------


def _read_npz(path: Path, schema: DataSchema, where: str,
              limits: ReadLimits) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise OwnDataError(f"{where}: {size:,} bytes, more than {limits.max_bytes:,}, the most read of one party's "
                           f"file; raise the limit with --max-bytes")
    try:
        archive = np.load(path, allow_pickle=False)
    except (EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        raise OwnDataError(f"{where}: expected a .npz archive (numpy.savez) with arrays X and y, found "
                           f"{'an empty file' if size == 0 else f'something else ({type(err).__name__})'}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise OwnDataError(f"{where}: expected a .npz archive with arrays X and y, found a single .npy array")
    with archive as f:
        for member in f.zip.infolist():  # the sizes the archive declares, before anything is inflated
            if member.file_size > limits.max_bytes:
                raise OwnDataError(f"{where}: array {member.filename!r} inflates to {member.file_size:,} bytes, more "
                                   f"than {limits.max_bytes:,}; raise the limit with --max-bytes")
        absent = [name for name in ("X", "y") if name not in f.files]
        if absent:
            raise OwnDataError(f"{where}: expected arrays 'X' and 'y' (and optionally 'group'), found {sorted(f.files)}")
        try:
            X, y_raw = f["X"], f["y"]
            group_raw = f["group"] if "group" in f.files else None
        except ValueError as err:
            raise OwnDataError(f"{where}: expected arrays of plain numbers or text, found Python objects ({err})") from None
    if X.dtype.kind not in "biuf" or X.ndim != 2 or X.shape[1] != schema.dim:
        raise OwnDataError(f"{where}: array X: expected numbers of shape (n, {schema.dim}) (the schema's features "
                           f"{list(schema.feature_names)[:10]}), found dtype {X.dtype} and shape {X.shape}")
    n = X.shape[0]
    if n > limits.max_rows:
        raise OwnDataError(f"{where}: {n:,} rows, more than {limits.max_rows:,}; raise the limit with --max-rows")
    lines = [f"row {i}" for i in range(n)]
    for name, arr in (("y", y_raw), ("group", group_raw)):
        if arr is not None and arr.shape != (n,):
            raise OwnDataError(f"{where}: array {name}: expected shape ({n},), one value per row of X, found {arr.shape}")
    y = _codes([_text(v) for v in y_raw.tolist()], schema.class_codes(), "y", "classes", where, lines)
    if schema.group is not None:
        if group_raw is None:
            raise OwnDataError(f"{where}: expected an array 'group' (the schema has a group column "
                               f"{schema.group.name!r}), found {sorted(f.files)}")
        group = _codes([_text(v) for v in group_raw.tolist()], schema.group_codes(), "group", "group values", where, lines)
    else:
        group = _label_groups(y, schema)
    return np.asarray(X, dtype=np.float64), y, group, lines


def _text(value: object) -> str:
    """An array element as the schema writes it: integers without a decimal point."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- which file is whose -----------------------------------------------------------------------------


def parse_data_files(text: str, parties: list[str]) -> dict[str, Path]:
    """The files of ``--data``: ``FILE`` for a single party, ``owner-1=a.csv,owner-2=b.csv``, or a
    folder holding ``<party>.csv`` (or ``.npz``, ...) for each of ``parties``. Every party gets
    exactly one file; ValueError names what is wrong."""
    text = text.strip()
    if not text:
        raise ValueError("--data: expected FILE, PARTY=FILE,... or a folder of <party>.csv files, got nothing")
    folder = Path(text)
    if "=" not in text and folder.is_dir():
        found: dict[str, Path] = {}
        for party in parties:
            candidates = [folder / f"{party}{suffix}" for suffix in SUFFIXES if (folder / f"{party}{suffix}").is_file()]
            if len(candidates) != 1:
                raise ValueError(f"--data {text}: expected one file named {party}.csv (or .csv.gz, .csv.bz2, .tsv, "
                                 f".npz) for {party}, found {len(candidates)}")
            found[party] = candidates[0]
        return found
    if "=" not in text:
        if len(parties) != 1:
            raise ValueError(f"--data {text}: one file for {len(parties)} parties; give PARTY=FILE for each "
                             f"(owner-1=a.csv,owner-2=b.csv) or a folder of <party>.csv files")
        return {parties[0]: Path(text)}
    found = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        party, sep, file = item.partition("=")
        party, file = party.strip(), file.strip()
        if not sep or not party or not file:
            raise ValueError(f"--data: expected PARTY=FILE, got {item!r}")
        if party not in parties:
            raise ValueError(f"--data: {party!r} is not one of the parties here ({', '.join(parties[:10])})")
        if party in found:
            raise ValueError(f"--data: {party} given more than once")
        found[party] = Path(file)
    missing = [p for p in parties if p not in found]
    if missing:
        raise ValueError(f"--data: no file for {', '.join(missing[:10])}; every party hosted here needs its own")
    return found
