"""``csv``: the user's own CSV file with a header row (optionally .gz or .bz2 compressed): feature
columns, a label column, optionally a group column. The path is relative to the scenario file."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.textio import MISSING_VALUES, codes, decompress, is_number, label_codes
from marketplace.schema import SchemaError


@dataclass(frozen=True)
class CsvSource:
    path: str
    label: str
    features: tuple[str, ...] = ()
    """Columns to use as features; empty means every numeric column except label and group."""
    group: str | None = None
    """Column whose values define the groups (components) used by partition and target; absent: the label."""
    delimiter: str = ","


def check(cfg: CsvSource, path: str) -> None:
    if not Path(cfg.path).is_file():
        raise SchemaError(f"{path}.path", "an existing file", repr(cfg.path))


def csv_source(cfg: CsvSource, rng: np.random.Generator | None = None) -> Dataset:
    """Read the file. Rows with a missing value ('' or '?') in a used column are dropped. Labels:
    integers are kept as they are; other values become codes 0, 1, ... in sorted order. Groups:
    codes of the sorted values of the group column (numeric order when every value is a number),
    named by the value; without a group column, the groups are the labels."""
    path = Path(cfg.path)
    header, rows = _read_csv(path, cfg.delimiter)
    _require_columns(path, header, [cfg.label, *([cfg.group] if cfg.group is not None else []), *cfg.features])
    feature_names = list(cfg.features) or _numeric_columns(header, rows, exclude={cfg.label, cfg.group})
    if not feature_names:
        raise ValueError(f"{path}: no numeric feature column besides the label and group; header: {header}")
    used = [header.index(name) for name in {cfg.label, cfg.group, *feature_names} if name is not None]
    rows = [(line, row) for line, row in rows if not any(row[i].strip() in MISSING_VALUES for i in used)]
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


def _numeric_columns(header: list[str], rows: list[tuple[int, list[str]]], exclude: set[str | None]) -> list[str]:
    """Columns (other than ``exclude``) whose non-missing values all parse as numbers, and not all missing."""
    chosen = []
    for i, name in enumerate(header):
        if name in exclude:
            continue
        present = [v for v in (row[i].strip() for _, row in rows) if v not in MISSING_VALUES]
        if present and all(is_number(v) for v in present):
            chosen.append(name)
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
    return X


SOURCE = Source(kind="csv", options=CsvSource, load=csv_source, check=check, paths=("path",),
                summary="your own CSV file (header row; label, optional group column)")
