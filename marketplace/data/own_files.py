"""A party's own rows, read from its own file and checked against the marketplace's public schema.

In a schema-only marketplace (``data.schema``) an owner brings its rows (``marketplace agent
--data``, ``marketplace owner(s) --data``) and a consumer its target and test set (``marketplace
request --data --test``). Each file is read here, once, when the party starts, and checked against
the schema: the columns it must have, every feature value inside its public range (or clipped into
it, ``outside: clip``), every label one of the classes, every group one of the values. The first
problem is refused with a :class:`OwnDataError` naming the party, the file, the line, the column,
what was expected and what kind of thing was found, and a party that refuses its data sends nothing.
A party that runs out of memory reading a file within its limits is refused the same way, naming
the limits to lower (:func:`out_of_memory`).
The error never quotes a value of the file (a number out of its range, a cell that is not a number,
a label that is not a class): a served owner's refusal becomes its decline reason, which reaches
the server and the consumer's report, and the line and the column are enough to find the value.

Two formats, by the file's name:

* ``.csv`` (also ``.csv.gz``, ``.csv.bz2``, ``.tsv``): a header row naming the columns; the schema's
  feature, label and group columns are used, any other column is ignored. Read as a stream, a row at
  a time (decompressed as it is read), within :class:`ReadLimits`, twice: a first pass checks every
  row and keeps nothing, so a file over a limit or with a bad value is refused with little memory
  however large it is; only a file that passed is read again into arrays of its size.
* ``.npz`` (``numpy.savez``): arrays ``X`` (n, dim) in the schema's feature order, ``y`` (n,) the
  classes (as written in the schema, or integer labels), optionally ``group`` (n,); read by
  :func:`marketplace.data.npz_file.read_npz`, as a simulated marketplace's owner file is.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marketplace.data.bounds import RowNames
from marketplace.data.dataset import Dataset
from marketplace.data.npz_file import read_npz
from marketplace.data.public_schema import DataSchema, as_text
from marketplace.data.sources.csv_file import (
    MAX_BYTES,
    MAX_FIELD_CHARS,
    MAX_ROW_CHARS,
    MAX_ROWS,
    CsvRows,
    CsvSource,
    is_missing,
)

__all__ = [
    "OwnDataError",
    "ReadLimits",
    "load_own_rows",
    "parse_data_files",
]


class OwnDataError(ValueError):
    """A party's own file cannot be used: the message names the party, the file, where, what was
    expected and what kind of thing was found, never a value of the file (module docstring)."""


@dataclass(frozen=True)
class ReadLimits:
    """The most of a party's file that is read: bytes (after decompression), rows, and bytes in one
    field. A file over a limit is refused, naming the limit and the option that raises it (the
    command line's flags: :func:`marketplace.cli.common.add_read_limits`)."""

    max_bytes: int = MAX_BYTES
    max_rows: int = MAX_ROWS
    max_field_chars: int = MAX_FIELD_CHARS
    max_row_chars: int = MAX_ROW_CHARS

    def arguments(self) -> list[str]:
        """The flags that give a party's command these limits."""
        return [
            "--max-bytes",
            str(self.max_bytes),
            "--max-rows",
            str(self.max_rows),
            "--max-field-chars",
            str(self.max_field_chars),
            "--max-row-chars",
            str(self.max_row_chars),
        ]


SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".tsv", ".npz")


def load_own_rows(path: str | Path, schema: DataSchema, *, party: str, limits: ReadLimits = ReadLimits()) -> Dataset:
    """``party``'s rows in ``path`` (module docstring), checked against ``schema``."""
    path = Path(path)
    where = f"{party}: {path}"
    if not path.is_file():
        raise OwnDataError(f"{where}: no such file" if not path.exists() else f"{where}: not a regular file")
    name = path.name.lower()
    if not name.endswith(SUFFIXES):
        raise OwnDataError(
            f"{where}: expected a file named *.csv (or .csv.gz, .csv.bz2, .tsv) or *.npz, got {path.name!r}"
        )
    try:
        if name.endswith(".npz"):
            X, y, group = _read_npz(path, schema, where, limits)
        else:
            X, y, group = _read_csv(path, schema, where, limits, delimiter="\t" if name.endswith(".tsv") else ",")
        if len(X) == 0:
            raise OwnDataError(f"{where}: expected at least one row of data, got none")
        return Dataset(
            X=X,
            y=y,
            group=group,
            feature_names=schema.feature_names,
            group_names=schema.group_names,
            name=f"{party}'s own rows ({path.name})",
        )
    except MemoryError:
        pass  # raised below, out of the handler: the error keeps no reference to what was read
    raise out_of_memory(party, path, limits)


def out_of_memory(party: str, path: Path, limits: ReadLimits) -> OwnDataError:
    """The error of a party that ran out of memory reading its own file within its limits: the
    limits let through more than this machine holds, so it says which limits applied and what to set."""
    try:
        size = f"{path.stat().st_size:,} bytes on disk"
    except OSError:
        size = "its size unknown"
    return OwnDataError(
        f"{party}: {path}: ran out of memory reading it ({size}), within its limits --max-bytes "
        f"{limits.max_bytes:,} and --max-rows {limits.max_rows:,}; lower --max-bytes or --max-rows to what "
        f"this machine's memory holds, so that a file too large is refused before it is read, or give "
        f"{party} more memory or a smaller file"
    )


def _outside(X: np.ndarray, schema: DataSchema) -> np.ndarray:
    """Values refused: not finite, or (unless the schema clips them) outside their public range."""
    if schema.outside == "clip":
        return ~np.isfinite(X)
    return ~np.isfinite(X) | (X < schema.lower) | (X > schema.upper)


def _check_ranges(X: np.ndarray, schema: DataSchema, where: str, lines: RowNames) -> np.ndarray:
    """``X`` with every value in its range (clipped into it in place, ``outside: clip``); refused at
    the first value outside it (or not finite), named by its row in ``lines``."""
    bad = _outside(X, schema)
    if bad.any():
        r, j = map(int, np.argwhere(bad)[0])
        raise _range_error(schema, where, lines[r], j, int(bad.sum()))
    if schema.outside == "clip":
        np.clip(X, schema.lower, schema.upper, out=X)
    return X


def _range_error(schema: DataSchema, where: str, row: str, j: int, count: int) -> OwnDataError:
    """The error of ``count`` values refused (:func:`_outside`), the first at ``row`` in feature ``j``."""
    f = schema.features[j]
    if schema.outside == "clip":
        return OwnDataError(f"{where}: {row}, column {f.name!r}: expected a finite number, found one that is not")
    more = f" ({count} values outside their ranges in all)" if count > 1 else ""
    return OwnDataError(
        f"{where}: {row}, column {f.name!r}: expected a number in [{f.lower:g}, {f.upper:g}] "
        f"(the schema's range), found one outside it{more}; fix the value, or set data.schema.outside: "
        f"clip to clip values into their ranges"
    )


# --- CSV ---------------------------------------------------------------------------------------------


FLAGS = {
    "max_bytes": "--max-bytes",
    "max_rows": "--max-rows",
    "max_field_chars": "--max-field-chars",
    "max_row_chars": "--max-row-chars",
}
"""The command-line flag that raises each limit of a party's own file."""


def _read_csv(
    path: Path, schema: DataSchema, where: str, limits: ReadLimits, *, delimiter: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of a CSV, read as a stream (:class:`~marketplace.data.sources.csv_file.CsvRows`: on
    disk and decompressed size, rows, field and row lengths bounded), twice, as ``marketplace
    validate`` reads a csv source: a first pass checks every row and value and keeps only counts, so
    a file over a limit or with a bad value is refused with little memory however large it is; only
    a file that passed, its row count known and its features within ``max_bytes``, is read again into
    arrays of that size (numbers only: features, label and group codes)."""
    party = where.split(":", 1)[0]
    cfg = CsvSource(
        path=str(path),
        label=schema.label.name,
        delimiter=delimiter,
        max_bytes=limits.max_bytes,
        max_rows=limits.max_rows,
        max_field_chars=limits.max_field_chars,
        max_row_chars=limits.max_row_chars,
    )

    def over_limit(option: str, text: str) -> OwnDataError:
        return OwnDataError(f"{party}: {text}; raise the limit with {FLAGS[option]}")

    try:
        with CsvRows(path, cfg, over_limit) as rows:
            header, n = _check_rows(rows, schema, where)
        need = n * schema.dim * 8
        if need > limits.max_bytes:
            raise OwnDataError(
                f"{where}: its {n:,} rows of {schema.dim} features would take {need:,} bytes in memory, more "
                f"than the limit of {limits.max_bytes:,} bytes; raise the limit with --max-bytes"
            )
        with CsvRows(path, cfg, over_limit) as rows:
            return _keep_rows(rows, schema, where, header, n)
    except OwnDataError:
        raise
    except ValueError as err:  # the reader's own errors name the file and the line
        raise OwnDataError(f"{party}: {err}") from None


BLOCK_ROWS = 4096
"""Rows parsed and checked together (their features as one array)."""


def _columns(header: list[str], schema: DataSchema, where: str) -> tuple[list[int], int, int | None]:
    """Where the schema's features, label and group are in ``header``; refused when one is absent."""
    wanted = [*schema.feature_names, schema.label.name, *([schema.group.name] if schema.group is not None else [])]
    absent = [name for name in wanted if name not in header]
    if absent:
        raise OwnDataError(
            f"{where}: line 1: expected the schema's columns {wanted} in the header, found no "
            f"{absent} among {header[:30]}"
        )
    positions = [header.index(name) for name in schema.feature_names]
    group_at = header.index(schema.group.name) if schema.group is not None else None
    return positions, header.index(schema.label.name), group_at


def _blocks(rows: CsvRows, schema: DataSchema, where: str) -> Iterator[tuple[np.ndarray, array, array, array]]:
    """The file's rows in blocks of at most :data:`BLOCK_ROWS`: features, label codes, group codes
    (empty without a group column) and line numbers. A cell that is not a number, or a label or group
    that is not one of the schema's, is refused here, at its line; ranges are the caller's to check."""
    header = rows.header
    positions, label_at, group_at = _columns(header, schema, where)
    classes, groups_of = schema.class_codes(), schema.group_codes()
    block = np.empty((BLOCK_ROWS, schema.dim))
    labels, groups, lines = array("q"), array("q"), array("q")
    for line, row in rows:
        filled = len(lines)
        for j, i in enumerate(positions):
            text = row[i].strip()
            try:
                block[filled, j] = float(text)
            except ValueError:
                what = "a missing value" if is_missing(text) else "text that is not a number"
                raise OwnDataError(
                    f"{where}: line {line}, column {header[i]!r}: expected a number, found {what}"
                ) from None
        labels.append(_code(row[label_at].strip(), classes, header[label_at], "classes", where, line))
        if group_at is not None:
            groups.append(_code(row[group_at].strip(), groups_of, header[group_at], "group values", where, line))
        lines.append(line)
        if len(lines) == BLOCK_ROWS:
            yield block, labels, groups, lines
            labels, groups, lines = array("q"), array("q"), array("q")
    if lines:
        yield block[: len(lines)], labels, groups, lines


def _check_rows(rows: CsvRows, schema: DataSchema, where: str) -> tuple[list[str], int]:
    """First pass: every row checked, nothing kept but counts; the header and the number of rows.
    The first value outside its range (or not finite) is refused once every row was read, with the
    number of such values (:func:`_check_ranges`)."""
    n, first, count = 0, None, 0
    for X, _, _, lines in _blocks(rows, schema, where):
        bad = _outside(X, schema)
        if bad.any():
            if first is None:
                r, j = map(int, np.argwhere(bad)[0])
                first = (f"line {lines[r]}", j)
            count += int(bad.sum())
        n += len(lines)
    if first is not None:
        raise _range_error(schema, where, *first, count)
    return rows.header, n


def _keep_rows(
    rows: CsvRows, schema: DataSchema, where: str, header: list[str], n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Second pass, over a file the first pass found good with ``n`` rows: its arrays, made once at
    their size. A file that no longer reads as it did is refused: it changed between the passes."""
    changed = OwnDataError(f"{where}: the file changed while it was read; read it again once it is written")
    if rows.header != header:
        raise changed
    X = np.empty((n, schema.dim))
    y = np.empty(n, dtype=np.int64)
    group = np.empty(n, dtype=np.int64) if schema.group is not None else None
    at = 0
    try:
        for block, labels, groups, block_lines in _blocks(rows, schema, where):
            k = len(block_lines)
            if at + k > n or _outside(block, schema).any():
                raise changed
            X[at : at + k] = block
            y[at : at + k] = labels
            if group is not None:
                group[at : at + k] = groups
            at += k
    except OwnDataError as err:
        if err is changed:
            raise
        raise changed from None
    if at != n:
        raise changed
    if schema.outside == "clip":
        np.clip(X, schema.lower, schema.upper, out=X)
    return X, y, group if group is not None else _label_groups(y, schema)


def _code(value: str, lookup: dict[str, int], column: str, what: str, where: str, line: int) -> int:
    code = lookup.get(value)
    if code is None:
        shown = list(lookup)[:20]
        found = "a missing value" if not value else "a value that is not one of them"
        raise OwnDataError(
            f"{where}: line {line}, column {column!r}: expected one of the schema's {what} "
            f"{shown}{' ...' if len(lookup) > 20 else ''}, found {found}"
        )
    return code


def _label_groups(y: np.ndarray, schema: DataSchema) -> np.ndarray:
    """Without a group column the groups are the classes: the position of each row's class."""
    codes = schema.class_codes()
    group = np.zeros(len(y), dtype=np.int64)
    for position, name in enumerate(as_text(schema.label.classes)):
        group[y == codes[name]] = position
    return group


# --- npz ---------------------------------------------------------------------------------------------


def _read_npz(
    path: Path, schema: DataSchema, where: str, limits: ReadLimits
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows of an ``.npz``, read and checked by :func:`marketplace.data.npz_file.read_npz` (sized
    from its headers, no pickle, X finite and bounded, y the schema's classes, group its values);
    then every value in its schema range (or clipped into it)."""
    try:
        rows = read_npz(
            path,
            source=where,
            schema=schema,
            max_bytes=limits.max_bytes,
            option=FLAGS["max_bytes"],
            max_rows=limits.max_rows,
            rows_option=FLAGS["max_rows"],
        )
    except ValueError as err:
        raise OwnDataError(str(err)) from None
    group = rows.group if rows.group is not None else _label_groups(rows.y, schema)
    return _check_ranges(rows.X, schema, where, _RowNames()), rows.y, group


class _RowNames:
    """``row i`` of an array's row ``i``, made when asked."""

    def __getitem__(self, i: int) -> str:
        return f"row {i}"


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
                raise ValueError(
                    f"--data {text}: expected one file named {party}.csv (or .csv.gz, .csv.bz2, .tsv, "
                    f".npz) for {party}, found {len(candidates)}"
                )
            found[party] = candidates[0]
        return found
    if "=" not in text:
        if len(parties) != 1:
            raise ValueError(
                f"--data {text}: one file for {len(parties)} parties; give PARTY=FILE for each "
                f"(owner-1=a.csv,owner-2=b.csv) or a folder of <party>.csv files"
            )
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
