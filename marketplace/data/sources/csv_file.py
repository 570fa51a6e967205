"""``csv``: the user's own CSV file with a header row (optionally .gz or .bz2 compressed): feature
columns, a label column, optionally a group column. The path is relative to the scenario file.

The file is read as a stream, never whole: a line at a time, decompressed as it is read, within
limits the scenario may raise (``max_bytes``, ``max_rows``, ``max_field_chars``,
``max_row_chars``). A first pass checks every row and cell and keeps only a few counts per column,
so a file that is refused, for whatever reason, is refused with little memory however large it
is. Only a file that passed is read again, to build the matrix of its features."""

from __future__ import annotations

import csv
import io
import math
import sys
import threading
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Annotated, Literal, overload

import numpy as np

from marketplace.data.bounds import LARGEST, RowCheck, check_rows
from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.textio import MISSING_VALUES, codes, label_codes, open_bounded
from marketplace.schema import Range, SchemaError

OPTIONS = "data.source.csv"
"""Where the options live in a scenario (named by the errors that ask to raise a limit)."""

MAX_BYTES = 1 << 30
MAX_ROWS = 10_000_000
MAX_FIELD_CHARS = 1 << 20
MAX_ROW_CHARS = 4 << 20

_FIELD_LIMIT = threading.RLock()
"""Held while a file is read: csv.field_size_limit is one setting for the whole process, set to the
file's ``max_field_chars`` for the read and put back after, so two reads in two threads (two runs
through the Python API) take turns instead of changing each other's limit."""


@dataclass(frozen=True)
class CsvSource:
    path: str
    label: str
    features: tuple[str, ...] = ()
    """Columns to use as features; empty means every numeric column except label and group."""
    group: str | None = None
    """Column whose values define the groups (components) used by partition and target; absent: the label."""
    delimiter: str = ","
    max_bytes: Annotated[int, Range(min=1)] = MAX_BYTES
    """The most bytes the file may take: on disk, once decompressed, and its features as numbers in
    memory (8 bytes a value)."""
    max_rows: Annotated[int, Range(min=1)] = MAX_ROWS
    """The most rows after the header, blank ones included."""
    max_field_chars: Annotated[int, Range(min=1)] = MAX_FIELD_CHARS
    """The longest field (cell), in characters."""
    max_row_chars: Annotated[int, Range(min=1)] = MAX_ROW_CHARS
    """The longest row, in characters (all its fields, delimiters and quotes)."""


def check(cfg: CsvSource, path: str) -> None:
    if not Path(cfg.path).is_file():
        raise SchemaError(f"{path}.path", "an existing file", repr(cfg.path))


def csv_source(cfg: CsvSource, rng: np.random.Generator | None = None) -> Dataset:
    """Read the file, every row of it: no row or column is left out without a word. A missing
    value (an empty cell, ``?``, ``NA``, ``N/A``, ``NaN``, ``null``, ``None``, any case) in a used
    column (a feature, the label, the group) is refused with a ValueError naming the file, the line
    and the column, as is a feature value that is not a number or too large for the protocols
    (:func:`marketplace.data.bounds.check_rows`). Without ``features``, the features are the
    columns besides label and group that hold numbers; a column that mixes numbers and text is
    refused (name the features to leave it out). Labels: integers are kept as they are; other
    values become codes 0, 1, ... in sorted order. Groups: codes of the sorted values of the group
    column (numeric order when every value is a number), named by the value; without a group
    column, the groups are the labels.

    A file over one of the limits (``max_bytes``, ``max_rows``, ``max_field_chars``,
    ``max_row_chars``), or that cannot be read as UTF-8 CSV text, is refused with a ValueError too;
    the error of a limit starts with the option's key path (``data.source.csv.max_rows: ...``)."""
    path = Path(cfg.path)
    survey = _survey(path, cfg)
    n, names = survey.rows, survey.feature_names
    if n * len(names) * 8 > cfg.max_bytes:
        raise _over_limit(
            "max_bytes",
            f"{path}: its {n} rows of {len(names)} features would take {n * len(names) * 8} "
            f"bytes ({_size(n * len(names) * 8)}) of memory as numbers, more than the limit "
            f"of {cfg.max_bytes} bytes ({_size(cfg.max_bytes)})",
            f" (or name fewer columns in {OPTIONS}.features)",
        )
    if survey.may_overflow:  # a value large enough that its row's squared norm might overflow: check
        _read_matrix(path, cfg, survey, keep=False)  # every row before keeping any (raises on the first)
    return _read_matrix(path, cfg, survey, keep=True)


# --- reading the file as a stream -----------------------------------------------------------------


class CsvRows:
    """A context manager: the header (``.header``), then, iterated, (line number, fields) of each
    non-blank row, each checked against the header's width and the limits of ``cfg``."""

    def __init__(self, path: Path, cfg: CsvSource, over_limit: Callable[[str, str], ValueError] | None = None) -> None:
        """``over_limit(option, text)`` is the error of a file over the limit ``option`` (default:
        naming the scenario's ``data.source.csv.<option>``; a party's own file names its flag)."""
        self.path, self.cfg = path, cfg
        self._over_limit = over_limit or _over_limit
        self.header: list[str] = []
        self.line = 0
        """Lines read so far (the csv reader's line_num)."""
        self._row_chars = 0
        self._closing: list[Callable[[], object]] = []

    def __enter__(self) -> CsvRows:
        try:
            self._open()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        while self._closing:
            self._closing.pop()()

    def _open(self) -> None:
        path, cfg = self.path, self.cfg
        size = path.stat().st_size
        if size > cfg.max_bytes:
            raise self._over_limit(
                "max_bytes",
                f"{path} is {size} bytes ({_size(size)}), more than the limit of "
                f"{cfg.max_bytes} bytes ({_size(cfg.max_bytes)})",
            )
        too_large = lambda: self._over_limit(
            "max_bytes",
            f"{path} holds more than {cfg.max_bytes} bytes "  # noqa: E731
            f"({_size(cfg.max_bytes)}) once decompressed, the limit",
        )
        try:
            binary = open_bounded(path, cfg.max_bytes, too_large)
        except OSError as err:
            raise ValueError(f"{path}: cannot open it: {err.strerror or err}") from None
        self._text = io.TextIOWrapper(binary, encoding="utf-8-sig", newline="\n")
        self._closing.append(self._text.close)
        _FIELD_LIMIT.acquire()
        self._closing.append(_FIELD_LIMIT.release)
        previous = csv.field_size_limit(min(cfg.max_field_chars, sys.maxsize))
        self._closing.append(lambda: csv.field_size_limit(previous))
        self._reader = csv.reader(self._lines(), delimiter=cfg.delimiter)
        self.header = [name.strip() for name in self._next() or []]
        if not self.header:
            raise ValueError(f"{path}: the file is empty (a header row is needed)")

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        width, rows, max_rows, reader = len(self.header), 0, self.cfg.max_rows, self._reader
        while (row := self._next()) is not None:
            rows += 1  # blank rows count: a file of nothing but line ends is stopped here too
            if rows > max_rows:
                raise self._over_limit(
                    "max_rows",
                    f"{self.path} has more than {max_rows} rows (line {reader.line_num} holds row {rows}), the limit",
                )
            if not row or (not row[0].strip() and all(not field.strip() for field in row)):
                continue
            if len(row) != width:
                raise ValueError(f"{self.path}, line {reader.line_num}: {len(row)} fields but the header has {width}")
            yield reader.line_num, row

    def _next(self) -> list[str] | None:
        """The next row of fields (None at the end); csv's own errors become a ValueError naming the line."""
        try:
            row = next(self._reader, None)
        except csv.Error as err:
            line = self._reader.line_num
            if str(err).startswith("field larger than field limit"):
                raise self._over_limit(
                    "max_field_chars",
                    f"{self.path}, line {line}: a field longer than {self.cfg.max_field_chars} characters, the limit",
                ) from None
            raise ValueError(f"{self.path}, line {line}: not valid CSV ({err})") from None
        self._row_chars = 0
        return row

    def _lines(self) -> Iterator[str]:
        """The file's lines, for the csv reader; one longer than what is left of the current row's
        ``max_row_chars`` is refused before it is read whole."""
        read, limit = self._text.readline, self.cfg.max_row_chars
        kind = {".gz": "a gzip file", ".bz2": "a bzip2 file"}.get(self.path.suffix, "the file")
        while True:
            try:
                line = read(min(limit - self._row_chars + 1, sys.maxsize))
            except UnicodeDecodeError as err:
                raise ValueError(
                    f"{self.path}: not UTF-8 text ({err.reason}: byte 0x{err.object[err.start]:02x} near "
                    f"line {self.line + 1}); save the file as UTF-8"
                ) from None
            except (OSError, EOFError, zlib.error) as err:
                raise ValueError(f"{self.path}: cannot read {kind}: {err}") from None
            if not line:
                return
            self.line += 1
            self._row_chars += len(line)
            if self._row_chars > limit:
                raise self._over_limit(
                    "max_row_chars", f"{self.path}, line {self.line}: a row longer than {limit} characters, the limit"
                )
            yield line


def _over_limit(option: str, text: str, alternative: str = "") -> ValueError:
    """The error of a file over the limit ``option``: it names the option's key path first (the
    command line shows it as the key to change) and says to raise it."""
    return ValueError(f"{OPTIONS}.{option}: {text}; raise {OPTIONS}.{option} to read it{alternative}")


def _size(n: int) -> str:
    """``1 GiB``, ``1.5 MiB``, ``800 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


# --- first pass: check everything, keep counts --------------------------------------------------


MISSING = frozenset({*MISSING_VALUES, "na", "n/a", "nan", "null", "none"})
"""Cell values (compared in lower case) that mean "no value here"."""


def is_missing(text: str) -> bool:
    """Whether a cell's text marks a missing value."""
    return text.strip().lower() in MISSING


@dataclass(frozen=True)
class _Survey:
    """What the first pass learnt: the header, the number of rows, the feature columns, and whether
    a value is so large that a row's squared norm might overflow."""

    header: list[str]
    rows: int
    feature_names: list[str]
    may_overflow: bool


def _survey(path: Path, cfg: CsvSource) -> _Survey:
    """Read every row once, keeping per column only counts and the first line of each kind of
    problem; raise the error that reading the whole file would have raised first: a row of the
    wrong width, an unknown column, a column mixing numbers and text, no feature column, a missing
    value in a used column, a feature value that is not a finite number."""
    with CsvRows(path, cfg) as reader:
        header = reader.header
        columns = _columns(header, cfg)
        # no row can overflow when every value of it is below this (d values below LARGEST / (2 sqrt(d)))
        small = LARGEST / (2 * math.sqrt(max(1, len(columns.candidates), len(cfg.features))))
        tally = _Tally(len(header), small)
        tally.count(reader, columns)  # a row of the wrong width is refused here, before any column
    _require_columns(path, header, columns.named)
    feature_names = list(cfg.features) if cfg.features else _numeric_columns(path, header, columns.candidates, tally)
    if not feature_names:
        raise ValueError(f"{path}: no numeric feature column besides the label and group; header: {_names(header)}")
    _refuse_missing(path, header, cfg, feature_names, tally)
    positions = [header.index(name) for name in feature_names]
    _refuse_not_finite(path, header, positions, tally)
    return _Survey(
        header=header, rows=tally.rows, feature_names=feature_names, may_overflow=any(tally.large[i] for i in positions)
    )


@dataclass(frozen=True)
class _Columns:
    """The columns the first pass looks at, by their index in the header."""

    named: list[str]
    """The label, the group and the named features: each must be in the header."""
    candidates: list[int]
    """The feature columns (named ones), or every column that may be one (besides label and group):
    each of their cells is read as a number. Empty when a named column is not in the header (the
    file is refused once every row's width was checked)."""
    others: list[int]
    """The label and group columns that are not candidates: checked for missing cells only."""


def _columns(header: list[str], cfg: CsvSource) -> _Columns:
    """Which columns of ``header`` the first pass reads as numbers, and which only for missing cells."""
    named = [cfg.label, *([cfg.group] if cfg.group is not None else []), *cfg.features]
    if not all(name in header for name in named):  # refused below, once every row's width was checked
        return _Columns(named=named, candidates=[], others=[])
    if cfg.features:
        candidates = list(dict.fromkeys(header.index(name) for name in cfg.features))
    else:
        candidates = [i for i, name in enumerate(header) if name not in {cfg.label, cfg.group}]
    named_at = [header.index(cfg.label), *([header.index(cfg.group)] if cfg.group is not None else [])]
    others = [i for i in dict.fromkeys(named_at) if i not in candidates]
    return _Columns(named=named, candidates=candidates, others=others)


class _Tally:
    """What the first pass keeps of the file's cells, per column: how many are missing and how many
    are text, the (line, cell) of the first of each and of the first that is not a finite number
    (text included), and whether a value is at least ``small`` (its row's squared norm might
    overflow); and how many rows there are. A few numbers a column, however long the file."""

    def __init__(self, width: int, small: float) -> None:
        self.small = small
        self.rows = 0
        self.missing, self.text = [0] * width, [0] * width
        self.first_missing: list[tuple[int, str] | None] = [None] * width
        self.first_text: list[tuple[int, str] | None] = [None] * width
        self.first_bad: list[tuple[int, str] | None] = [None] * width
        self.large = [False] * width

    def count(self, rows: Iterable[tuple[int, list[str]]], columns: _Columns) -> None:
        """Count every row's cells of ``columns``: the candidates' as numbers, the others' for a
        missing value only. A cell well inside the range (the most of them) costs one float()."""
        candidates, others, small, large = columns.candidates, columns.others, self.small, self.large
        n = 0
        for line, row in rows:
            n += 1
            for i in candidates:
                cell = row[i].strip()
                try:
                    value = float(cell)
                except ValueError:
                    if cell.lower() in MISSING:
                        self._missing(i, line, cell)
                    else:
                        self._text(i, line, cell)
                    continue
                if -small < value < small:
                    continue
                if value != value and cell.lower() in MISSING:  # "nan" reads as a float, and means missing
                    self._missing(i, line, cell)
                elif not math.isfinite(value):
                    self._bad(i, line, cell)
                else:
                    large[i] = True
            for i in others:
                cell = row[i].strip()
                if cell.lower() in MISSING:
                    self._missing(i, line, cell)
        self.rows = n

    def _missing(self, i: int, line: int, cell: str) -> None:
        self.missing[i] += 1
        if self.first_missing[i] is None:
            self.first_missing[i] = (line, cell)

    def _text(self, i: int, line: int, cell: str) -> None:
        """A cell that is not a number: text, so not a finite number either."""
        self.text[i] += 1
        if self.first_text[i] is None:
            self.first_text[i] = (line, _shown(cell))
        self._bad(i, line, cell)

    def _bad(self, i: int, line: int, cell: str) -> None:
        if self.first_bad[i] is None:
            self.first_bad[i] = (line, _shown(cell))


def _numeric_columns(path: Path, header: list[str], candidates: list[int], tally: _Tally) -> list[str]:
    """Without named features: the candidate columns that hold numbers (a value, and no text), in
    header order. A column of numbers with some text is refused at its first text (a mistake in
    the file, or a column to leave out by naming the features); a column of text is left out."""
    feature_names = []
    for i in candidates:
        present = tally.rows - tally.missing[i]
        if present and not tally.text[i]:
            feature_names.append(header[i])
        elif present > tally.text[i]:
            line, cell = _first(tally.first_text[i])
            raise ValueError(
                f"{path}: line {line}, column {header[i]!r}: {cell} is not a number, but the column's "
                f"other values are; fix the value, or name the feature columns "
                f"({OPTIONS}.features) to leave this column out"
            )
    return feature_names


def _refuse_missing(path: Path, header: list[str], cfg: CsvSource, feature_names: list[str], tally: _Tally) -> None:
    """Refuse a missing value in a used column (a feature, the label, the group): the first by line,
    then by the order of the columns used, saying how many there are in all."""
    used = [header.index(name) for name in dict.fromkeys((*feature_names, cfg.label, cfg.group)) if name is not None]
    found = [(at[0], k, i, at) for k, i in enumerate(used) if (at := tally.first_missing[i]) is not None]
    if found:
        _, _, i, (line, cell) = min(found)  # the first line, then the first column used
        count = sum(tally.missing[i] for i in used)
        more = f" ({count} missing cells in the columns used)" if count > 1 else ""
        raise ValueError(
            f"{path}: line {line}, column {header[i]!r}: missing value {cell!r}"
            f"{more}; every used column (features, label, group) needs a value in every row: fill it in "
            f"or remove the row"
        )


def _refuse_not_finite(path: Path, header: list[str], positions: list[int], tally: _Tally) -> None:
    """Refuse a feature value that is not a finite number (text, an infinity): the first by line,
    then by the order of the features."""
    bad = [(at[0], j, i, at) for j, i in enumerate(positions) if (at := tally.first_bad[i]) is not None]
    if bad:
        line, _, i, (_, cell) = min(bad)
        raise ValueError(
            f"{path}: column {header[i]!r}, line {line}: {cell} is not a finite number "
            f"(feature columns must be numeric; name the features in {OPTIONS}.features)"
        )


def _first(seen: tuple[int, str] | None) -> tuple[int, str]:
    """The (line, cell) :func:`_survey` kept for a kind of cell it counted (so saw at least once)."""
    if seen is None:
        raise AssertionError("a kind of cell was counted without its first (line, cell)")
    return seen


def _require_columns(path: Path, header: list[str], names: list[str]) -> None:
    absent = [name for name in names if name not in header]
    if absent:
        raise ValueError(f"{path}: no column named {absent}; the header has {_names(header)}")


def _shown(cell: str) -> str:
    """A cell's text as an error message quotes it: its repr, cut short when it is long (a field
    may hold a megabyte), saying how long it was."""
    if len(cell) <= 80:
        return repr(cell)
    return f"{cell[:60]!r}... ({len(cell)} characters)"


def _names(header: list[str]) -> str:
    """The header as an error message shows it: the list of names, its first names only when it
    is long."""
    shown = repr(header)
    if len(shown) <= 2000:
        return shown
    return f"{header[:20]!r}... ({len(header)} columns)"


# --- second pass: the matrix ----------------------------------------------------------------------


class LineNames:
    """``line N`` of row ``r``, made when asked (the row names of :func:`check_rows`)."""

    def __init__(self, lines: array) -> None:
        self._lines = lines

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, r: int) -> str:
        return f"line {self._lines[r]}"


@overload
def _read_matrix(path: Path, cfg: CsvSource, survey: _Survey, *, keep: Literal[True]) -> Dataset: ...
@overload
def _read_matrix(path: Path, cfg: CsvSource, survey: _Survey, *, keep: Literal[False]) -> None: ...
def _read_matrix(path: Path, cfg: CsvSource, survey: _Survey, *, keep: bool) -> Dataset | None:
    """Read the file again, now known to be good, and build its Dataset (``keep``), or only check
    its rows' values block by block (:class:`~marketplace.data.bounds.RowCheck`) and keep nothing."""
    header, names = survey.header, survey.feature_names
    d = len(names)
    pick = itemgetter(*(header.index(name) for name in names))
    label_at = header.index(cfg.label)
    group_at = header.index(cfg.group) if cfg.group is not None else None
    kept = _Kept()
    values, lines, labels, groups = kept.values, kept.lines, kept.labels, kept.groups  # the loop's, as locals
    label_ids, group_ids = kept.label_ids, kept.group_ids
    blocks = _BlockCheck(path, names)
    changed = ValueError(f"{path}: the file changed while it was read; read it again once it is written")
    n = 0
    with CsvRows(path, cfg) as reader:
        if reader.header != header:
            raise changed
        for line, row in reader:
            n += 1
            try:
                row_values = [float(cell) for cell in pick(row)] if d > 1 else [float(pick(row))]
            except ValueError:
                raise changed from None
            if keep:
                values.extend(row_values)
                lines.append(line)
                labels.append(label_ids.setdefault(row[label_at].strip(), len(label_ids)))
                if group_at is not None:
                    groups.append(group_ids.setdefault(row[group_at].strip(), len(group_ids)))
                continue
            blocks.add(line, row_values)
    if n != survey.rows:
        raise changed
    if not keep:
        blocks.done()
        return None
    return kept.dataset(path, names, n, grouped=group_at is not None)


class _BlockCheck:
    """The rows of a file that only has its values checked (:func:`_read_matrix` without ``keep``):
    gathered in blocks of about 64 Ki values, each checked as it fills, so nothing of the file is
    kept beyond one block."""

    def __init__(self, path: Path, names: list[str]) -> None:
        self._d = len(names)
        self._check = RowCheck(str(path), columns=names)
        self._block, self._rows = array("d"), max(1, (1 << 16) // self._d)
        self._lines: list[str] = []

    def add(self, line: int, row_values: list[float]) -> None:
        self._block.extend(row_values)
        self._lines.append(f"line {line}")
        if len(self._lines) == self._rows:
            self._flush()

    def done(self) -> None:
        """Check the last, partial block, then the whole (raises on the first row out of bounds)."""
        if self._lines:
            self._flush()
        self._check.done()

    def _flush(self) -> None:
        self._check.add(np.frombuffer(self._block, dtype=np.float64).reshape(-1, self._d), 0, self._lines)
        self._block, self._lines = array("d"), []


@dataclass
class _Kept:
    """What :func:`_read_matrix` keeps of each row to build the Dataset: its feature values and
    line, and the codes of its label and group in the order they first appear (made the sorted
    codes by :meth:`dataset`); compact arrays, not Python lists of numbers."""

    values: array = field(default_factory=lambda: array("d"))
    lines: array = field(default_factory=lambda: array("q"))
    labels: array = field(default_factory=lambda: array("q"))
    groups: array = field(default_factory=lambda: array("q"))
    label_ids: dict[str, int] = field(default_factory=dict)
    group_ids: dict[str, int] = field(default_factory=dict)

    def dataset(self, path: Path, names: list[str], n: int, *, grouped: bool) -> Dataset:
        """The Dataset of the ``n`` rows kept, once their values are checked (:func:`check_rows`,
        naming rows by line). Labels get :func:`label_codes`; groups the codes of the group
        column's values (``grouped``), or of the labels."""
        d = len(names)
        X = np.frombuffer(self.values, dtype=np.float64).reshape(n, d) if n else np.empty((0, d), dtype=np.float64)
        check_rows(X, str(path), rows=LineNames(self.lines), columns=names)
        label_values = list(self.label_ids)
        label_index = _indices(self.labels)
        y = label_codes(label_values)[label_index]
        if not grouped:
            group_codes, group_names = codes(label_values)
            group = group_codes[label_index]
        else:
            group_codes, group_names = codes(list(self.group_ids))
            group = group_codes[_indices(self.groups)]
        return Dataset(X=X, y=y, group=group, feature_names=tuple(names), group_names=group_names, name=path.stem)


def _indices(values: array) -> np.ndarray:
    return np.frombuffer(values, dtype=np.int64) if len(values) else np.empty(0, dtype=np.int64)


SOURCE = Source(
    kind="csv",
    options=CsvSource,
    load=csv_source,
    check=check,
    paths=("path",),
    summary="your own CSV file (header row; label, optional group column)",
)
