"""A party's own rows, read from its own file and checked against the marketplace's public schema.

In a schema-only marketplace (``data.schema``) an owner brings its rows (``marketplace agent
--data``, ``marketplace owner(s) --data``) and a consumer its target and test set (``marketplace
request --data --test``). Each file is read here, once, when the party starts, and checked against
the schema: the columns it must have, every feature value inside its public range (or clipped into
it, ``outside: clip``), every label one of the classes, every group one of the values. The first
problem is refused with a :class:`OwnDataError` naming the party, the file, the line, the column,
what was expected and what kind of thing was found, and a party that refuses its data sends nothing.
The error never quotes a value of the file (a number out of its range, a cell that is not a number,
a label that is not a class): a served owner's refusal becomes its decline reason, which reaches
the server and the consumer's report, and the line and the column are enough to find the value.

Two formats, by the file's name:

* ``.csv`` (also ``.csv.gz``, ``.csv.bz2``, ``.tsv``): a header row naming the columns; the schema's
  feature, label and group columns are used, any other column is ignored. Read as a stream, a row at
  a time, within :class:`ReadLimits`.
* ``.npz`` (``numpy.savez``): arrays ``X`` (n, dim) in the schema's feature order, ``y`` (n,) the
  classes (as written in the schema, or integer labels), optionally ``group`` (n,).
"""

from __future__ import annotations

import argparse
import zipfile
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.public_schema import DataSchema
from marketplace.data.sources.csv_file import (
    MAX_BYTES,
    MAX_FIELD_CHARS,
    MAX_ROW_CHARS,
    MAX_ROWS,
    CsvRows,
    CsvSource,
    LineNames,
    is_missing,
)

__all__ = [
    "OWNER_FILE_MAX_BYTES",
    "OwnDataError",
    "ReadLimits",
    "check_owner_file_size",
    "load_own_rows",
    "parse_data_files",
]


class OwnDataError(ValueError):
    """A party's own file cannot be used: the message names the party, the file, where, what was
    expected and what kind of thing was found, never a value of the file (module docstring)."""


@dataclass(frozen=True)
class ReadLimits:
    """The most of a party's file that is read: bytes (after decompression), rows, and bytes in one
    field. A file over a limit is refused, naming the limit and the option that raises it."""

    max_bytes: int = MAX_BYTES
    max_rows: int = MAX_ROWS
    max_field_chars: int = MAX_FIELD_CHARS
    max_row_chars: int = MAX_ROW_CHARS

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """``--max-bytes``, ``--max-rows`` and ``--max-field-bytes`` on a command that reads a party's file."""
        d = ReadLimits()
        for flag, value, what in (
            (
                "--max-bytes",
                d.max_bytes,
                "bytes of a data file (on disk, after decompression, and its features in memory)",
            ),
            ("--max-rows", d.max_rows, "rows of a data file"),
            ("--max-field-chars", d.max_field_chars, "characters in one CSV field"),
            ("--max-row-chars", d.max_row_chars, "characters in one CSV row"),
        ):
            parser.add_argument(
                flag, type=_at_least_one, default=value, metavar="N", help=f"read at most N {what} (default {value:,})"
            )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ReadLimits:
        return cls(
            max_bytes=args.max_bytes,
            max_rows=args.max_rows,
            max_field_chars=args.max_field_chars,
            max_row_chars=args.max_row_chars,
        )

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
        raise OwnDataError(
            f"{where}: expected a file named *.csv (or .csv.gz, .csv.bz2, .tsv) or *.npz, got {path.name!r}"
        )
    if len(X) == 0:
        raise OwnDataError(f"{where}: expected at least one row of data, got none")
    X = _check_ranges(X, schema, where, lines)
    return Dataset(
        X=X,
        y=y,
        group=group,
        feature_names=schema.feature_names,
        group_names=schema.group_names,
        name=f"{party}'s own rows ({path.name})",
    )


def _check_ranges(X: np.ndarray, schema: DataSchema, where: str, lines: list[str]) -> np.ndarray:
    lower, upper = schema.lower, schema.upper
    bad = ~np.isfinite(X) | (X < lower) | (X > upper)
    if schema.outside == "clip":
        nonfinite = ~np.isfinite(X)
        if nonfinite.any():
            r, j = map(int, np.argwhere(nonfinite)[0])
            raise OwnDataError(
                f"{where}: {lines[r]}, column {schema.feature_names[j]!r}: expected a finite number, "
                "found one that is not"
            )
        return np.clip(X, lower, upper)
    if bad.any():
        r, j = map(int, np.argwhere(bad)[0])
        f = schema.features[j]
        count = int(bad.sum())
        more = f" ({count} values outside their ranges in all)" if count > 1 else ""
        raise OwnDataError(
            f"{where}: {lines[r]}, column {f.name!r}: expected a number in [{f.lower:g}, {f.upper:g}] "
            f"(the schema's range), found one outside it{more}; fix the value, or set data.schema.outside: "
            f"clip to clip values into their ranges"
        )
    return X


def _codes(
    values: list[str], lookup: dict[str, int], column: str, what: str, where: str, lines: list[str]
) -> np.ndarray:
    out = np.empty(len(values), dtype=np.int64)
    for i, value in enumerate(values):
        code = lookup.get(value)
        if code is None:
            shown = list(lookup)[:20]
            raise OwnDataError(
                f"{where}: {lines[i]}, column {column!r}: expected one of the schema's {what} "
                f"{shown}{' ...' if len(lookup) > 20 else ''}, found a value that is not one of them"
            )
        out[i] = code
    return out


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
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """The rows of a CSV, read as a stream (:class:`~marketplace.data.sources.csv_file.CsvRows`: on
    disk and decompressed size, rows, field and row lengths bounded), each value checked as it is
    read; what is kept is numbers only (features, label and group codes, line numbers)."""
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
            return _parse_rows(rows, schema, where, limits)
    except OwnDataError:
        raise
    except ValueError as err:  # the reader's own errors name the file and the line
        raise OwnDataError(f"{party}: {err}") from None


def _parse_rows(
    rows: CsvRows, schema: DataSchema, where: str, limits: ReadLimits
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    header = rows.header
    wanted = [*schema.feature_names, schema.label.name, *([schema.group.name] if schema.group is not None else [])]
    absent = [name for name in wanted if name not in header]
    if absent:
        raise OwnDataError(
            f"{where}: line 1: expected the schema's columns {wanted} in the header, found no "
            f"{absent} among {header[:30]}"
        )
    positions = [header.index(name) for name in schema.feature_names]
    label_at = header.index(schema.label.name)
    group_at = header.index(schema.group.name) if schema.group is not None else None
    classes, groups_of = schema.class_codes(), schema.group_codes()
    most = max(1, limits.max_bytes // (8 * schema.dim))  # the features in memory stay within max_bytes too
    chunks: list[np.ndarray] = []
    block = np.empty((4096, schema.dim))
    filled = 0
    labels, groups, lines = array("q"), array("q"), array("q")
    for line, row in rows:
        if len(lines) >= most:
            raise OwnDataError(
                f"{where}: more than {most:,} rows of {schema.dim} features would take more than "
                f"{limits.max_bytes:,} bytes in memory; raise the limit with --max-bytes"
            )
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
        filled += 1
        if filled == len(block):
            chunks.append(block)
            block, filled = np.empty((len(block), schema.dim)), 0
    chunks.append(block[:filled])
    y = np.frombuffer(labels, dtype=np.int64).copy() if labels else np.zeros(0, dtype=np.int64)
    group = (
        (np.frombuffer(groups, dtype=np.int64).copy() if groups else np.zeros(0, dtype=np.int64))
        if group_at is not None
        else _label_groups(y, schema)
    )
    return np.concatenate(chunks), y, group, LineNames(lines)


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
    position = {code: i for i, code in enumerate(codes[c] for c in schema.label.classes)}
    return np.array([position[int(v)] for v in y], dtype=np.int64)


# --- npz ---------------------------------------------------------------------------------------------


def _read_npz(
    path: Path, schema: DataSchema, where: str, limits: ReadLimits
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    size = path.stat().st_size
    try:
        check_owner_file_size(str(path), limits.max_bytes, "--max-bytes")
    except ValueError as err:
        raise OwnDataError(f"{where.split(':', 1)[0]}: {err}") from None
    try:
        archive = np.load(path, allow_pickle=False)
    except (EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        raise OwnDataError(
            f"{where}: expected a .npz archive (numpy.savez) with arrays X and y, found "
            f"{'an empty file' if size == 0 else f'something else ({type(err).__name__})'}"
        ) from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise OwnDataError(f"{where}: expected a .npz archive with arrays X and y, found a single .npy array")
    with archive as f:
        absent = [name for name in ("X", "y") if name not in f.files]
        if absent:
            raise OwnDataError(
                f"{where}: expected arrays 'X' and 'y' (and optionally 'group'), found {sorted(f.files)}"
            )
        try:
            X, y_raw = f["X"], f["y"]
            group_raw = f["group"] if "group" in f.files else None
        except ValueError as err:
            raise OwnDataError(
                f"{where}: expected arrays of plain numbers or text, found Python objects ({err})"
            ) from None
    if X.dtype.kind not in "biuf" or X.ndim != 2 or X.shape[1] != schema.dim:
        raise OwnDataError(
            f"{where}: array X: expected numbers of shape (n, {schema.dim}) (the schema's features "
            f"{list(schema.feature_names)[:10]}), found dtype {X.dtype} and shape {X.shape}"
        )
    n = X.shape[0]
    if n > limits.max_rows:
        raise OwnDataError(f"{where}: {n:,} rows, more than {limits.max_rows:,}; raise the limit with --max-rows")
    lines = [f"row {i}" for i in range(n)]
    for name, arr in (("y", y_raw), ("group", group_raw)):
        if arr is not None and arr.shape != (n,):
            raise OwnDataError(
                f"{where}: array {name}: expected shape ({n},), one value per row of X, found {arr.shape}"
            )
    y = _codes([_text(v) for v in y_raw.tolist()], schema.class_codes(), "y", "classes", where, lines)
    if schema.group is not None:
        if group_raw is None:
            raise OwnDataError(
                f"{where}: expected an array 'group' (the schema has a group column "
                f"{schema.group.name!r}), found {sorted(f.files)}"
            )
        group = _codes(
            [_text(v) for v in group_raw.tolist()], schema.group_codes(), "group", "group values", where, lines
        )
    else:
        group = _label_groups(y, schema)
    return np.asarray(X, dtype=np.float64), y, group, lines


def _text(value: object) -> str:
    """An array element as the schema writes it: integers without a decimal point."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- the size of an npz, from its headers -------------------------------------------------------


OWNER_FILE_MAX_BYTES = MAX_BYTES
"""The default limit on an owner's own data file (``--data``): its size on disk, and the bytes its
arrays take in memory (as float64 for X)."""


def check_owner_file_size(path: str, max_bytes: int = OWNER_FILE_MAX_BYTES, option: str | None = None) -> None:
    """Refuse, before anything is loaded, an owner file (``--data``) larger than ``max_bytes`` on
    disk, a single ``.npy`` array, or an archive whose arrays X and y, by the shapes and types
    their headers state, would take more than ``max_bytes`` in memory (X as float64). Reads only
    the file's size and the arrays' headers; other problems are left to :func:`load_owner_file`.
    ``option`` is how the user raises the limit (a command-line flag), named by the error."""
    import zipfile

    from numpy.lib import format as npy

    file = Path(path)
    if not file.is_file():
        return
    size = file.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path}: the file is {size} bytes, more than the limit of {max_bytes} bytes{_raise(option)}")
    with file.open("rb") as f:
        if f.read(6) == npy.MAGIC_PREFIX:
            raise ValueError(f"{path}: expected a .npz archive with arrays X and y, got a single .npy array")
    if not zipfile.is_zipfile(file):
        return
    need, shapes = 0, []
    try:
        with zipfile.ZipFile(file) as archive:
            for name in ("X", "y", "group"):
                if f"{name}.npy" not in archive.namelist():
                    continue
                with archive.open(f"{name}.npy") as member:
                    version = npy.read_magic(member)
                    if version == (1, 0):
                        shape, _, dtype = npy.read_array_header_1_0(member)
                    elif version == (2, 0):
                        shape, _, dtype = npy.read_array_header_2_0(member)
                    else:
                        return  # left to np.load, which refuses what it cannot read
                count = 1
                for length in shape:
                    count *= int(length)
                need += count * max(dtype.itemsize, 8 if name == "X" else dtype.itemsize)
                shapes.append(f"{name} {tuple(shape)} of {dtype}")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return  # a damaged archive: load_owner_file says what it is
    if need > max_bytes:
        raise ValueError(
            f"{path}: its arrays ({', '.join(shapes)}) would take {need} bytes in memory, more than the "
            f"limit of {max_bytes} bytes{_raise(option)}"
        )


def _raise(option: str | None) -> str:
    return f"; raise it with {option} to read it" if option else ""


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
