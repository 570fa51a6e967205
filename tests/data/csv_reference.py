"""The CSV reader as it was before it read files as a stream: the whole file decompressed and
decoded at once, every row kept as strings. Kept verbatim (renamed) as the reference the streaming
reader (marketplace.data.sources.csv_file) must agree with on every file both can read."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from marketplace.data.bounds import check_rows
from marketplace.data.dataset import Dataset
from marketplace.data.textio import MISSING_VALUES, codes, decompress, is_number, label_codes


def reference_csv_source(cfg) -> Dataset:
    """Read the file, every row of it: no row or column is left out without a word. A missing
    value (an empty cell, ``?``, ``NA``, ``N/A``, ``NaN``, ``null``, ``None``, any case) in a used
    column (a feature, the label, the group) is refused with a ValueError naming the file, the line
    and the column, as is a feature value that is not a number or too large for the protocols
    (:func:`marketplace.data.bounds.check_rows`). Without ``features``, the features are the
    columns besides label and group that hold numbers; a column that mixes numbers and text is
    refused (name the features to leave it out). Labels: integers are kept as they are; other
    values become codes 0, 1, ... in sorted order. Groups: codes of the sorted values of the group
    column (numeric order when every value is a number), named by the value; without a group
    column, the groups are the labels."""
    path = Path(cfg.path)
    header, rows = _read_csv(path, cfg.delimiter)
    _require_columns(path, header, [cfg.label, *([cfg.group] if cfg.group is not None else []), *cfg.features])
    feature_names = list(cfg.features) or _numeric_columns(path, header, rows, exclude={cfg.label, cfg.group})
    if not feature_names:
        raise ValueError(f"{path}: no numeric feature column besides the label and group; header: {header}")
    used = [header.index(name) for name in dict.fromkeys((*feature_names, cfg.label, cfg.group)) if name is not None]
    _refuse_missing(path, header, rows, used)
    X = _parse_features(path, header, rows, feature_names)
    label_values = [row[header.index(cfg.label)].strip() for _, row in rows]
    y = label_codes(label_values)
    group_values = label_values if cfg.group is None else [row[header.index(cfg.group)].strip() for _, row in rows]
    group, group_names = codes(group_values)
    return Dataset(X=X, y=y, group=group, feature_names=tuple(feature_names), group_names=group_names, name=path.stem)


def _read_csv(path: Path, delimiter: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (line number, fields) of every non-blank row, checking each row's width."""
    text = decompress(path.name, path.read_bytes()).decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text), delimiter=delimiter)
    header = [name.strip() for name in next(reader, [])]
    if not header:
        raise ValueError(f"{path}: the file is empty (a header row is needed)")
    rows = []
    for row in reader:
        if not row or all(not field.strip() for field in row):
            continue
        if len(row) != len(header):
            raise ValueError(f"{path}, line {reader.line_num}: {len(row)} fields but the header has {len(header)}")
        rows.append((reader.line_num, row))
    return header, rows


def _require_columns(path: Path, header: list[str], names: list[str]) -> None:
    absent = [name for name in names if name not in header]
    if absent:
        raise ValueError(f"{path}: no column named {absent}; the header has {header}")


MISSING = frozenset({*MISSING_VALUES, "na", "n/a", "nan", "null", "none"})
"""Cell values (compared in lower case) that mean "no value here"."""


def is_missing(text: str) -> bool:
    """Whether a cell's text marks a missing value."""
    return text.strip().lower() in MISSING


def _refuse_missing(path: Path, header: list[str], rows: list[tuple[int, list[str]]], used: list[int]) -> None:
    """ValueError naming the first line and column of ``used`` whose cell is missing, and how many
    such cells the file holds."""
    missing = [(line, i, row[i]) for line, row in rows for i in used if is_missing(row[i])]
    if missing:
        line, i, text = missing[0]
        more = f" ({len(missing)} missing cells in the columns used)" if len(missing) > 1 else ""
        raise ValueError(
            f"{path}: line {line}, column {header[i]!r}: missing value {text.strip()!r}{more}; every used "
            f"column (features, label, group) needs a value in every row: fill it in or remove the row"
        )


def _numeric_columns(
    path: Path, header: list[str], rows: list[tuple[int, list[str]]], exclude: set[str | None]
) -> list[str]:
    """Columns (other than ``exclude``) whose present values are numbers (a missing cell does not
    make a column text); a column that mixes numbers and text is refused, naming its first text cell."""
    chosen = []
    for i, name in enumerate(header):
        if name in exclude:
            continue
        present = [(line, row[i].strip()) for line, row in rows if not is_missing(row[i])]
        numeric = [is_number(v) for _, v in present]
        if present and all(numeric):
            chosen.append(name)
        elif any(numeric):
            line, text = present[numeric.index(False)]
            raise ValueError(
                f"{path}: line {line}, column {name!r}: {text!r} is not a number, but the column's other "
                f"values are; fix the value, or name the feature columns (data.source.csv.features) to leave "
                f"this column out"
            )
    return chosen


def _parse_features(path: Path, header: list[str], rows: list[tuple[int, list[str]]], names: list[str]) -> np.ndarray:
    """Float matrix of the named columns; ValueError naming file, column and line of a bad value."""
    positions = [header.index(name) for name in names]
    X = np.empty((len(rows), len(names)), dtype=np.float64)
    for r, (line, row) in enumerate(rows):
        for j, i in enumerate(positions):
            text = row[i].strip()
            try:
                X[r, j] = float(text)
            except ValueError:
                X[r, j] = np.nan
            if not np.isfinite(X[r, j]):
                raise ValueError(
                    f"{path}: column {header[i]!r}, line {line}: {text!r} is not a finite number "
                    f"(feature columns must be numeric; name the features in data.source.csv.features)"
                )
    check_rows(X, str(path), rows=[f"line {line}" for line, _ in rows], columns=names)
    return X
