"""A party's own rows in a ``.npz`` archive (``numpy.savez``): the one reader of such a file.

An owner of a simulated marketplace may bring its rows as an ``.npz`` (:func:`marketplace.parties.load_owner_file`),
and a party of a marketplace described by its public schema may too (:mod:`marketplace.data.own_files`). Both
read it here. The file is the party's, and untrusted:

* it is sized before anything is loaded: the file on disk, then its arrays by the shapes and types their
  headers state (:func:`check_owner_file_size`), so a small compressed archive that would inflate past the
  limit is refused without being inflated;
* it is loaded with ``allow_pickle=False``: an array of Python objects, which could run code, is refused;
* ``X`` (n, dim) must hold numbers, finite and small enough that the bids and releases computed from them
  stay finite (:func:`marketplace.data.bounds.check_rows`); ``y`` (n,) integer class labels (or, against a
  schema, the schema's classes); ``group`` (n,), against a schema with a group column, its group values.

Every refusal is a ValueError that names the file, the array, what was expected and what was found, and
never quotes a value of the file (a served owner's refusal becomes a decline reason other parties see),
say ``own.npz: array y: row 1: expected an integer class label, found a value that is not a whole number``.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from marketplace.data.bounds import check_rows
from marketplace.data.public_schema import DataSchema
from marketplace.data.sources.csv_file import MAX_BYTES

__all__ = ["OWNER_FILE_MAX_BYTES", "NpzRows", "check_owner_file_size", "read_npz"]

OWNER_FILE_MAX_BYTES = MAX_BYTES
"""The default limit on an owner's own data file (``--data``): its size on disk, and the bytes its
arrays take in memory (as float64 for X)."""

ARCHIVE = "a .npz archive (numpy.savez) with arrays X and y"
"""What every file read here must be."""


@dataclass(frozen=True)
class NpzRows:
    """The checked arrays of a party's ``.npz``."""

    X: np.ndarray
    """(n, dim) float64, C-contiguous, n >= 1, every value finite and bounded."""
    y: np.ndarray
    """(n,) int64: the integer labels, or, against a schema, the codes of its classes."""
    group: np.ndarray | None
    """(n,) int64, the codes of the schema's group values; None without a schema's group column."""


def read_npz(
    path: str | Path,
    *,
    source: str | None = None,
    schema: DataSchema | None = None,
    max_bytes: int = OWNER_FILE_MAX_BYTES,
    option: str | None = None,
    max_rows: int | None = None,
    rows_option: str | None = None,
) -> NpzRows:
    """The rows of the ``.npz`` at ``path`` (module docstring), checked, or a ValueError whose text
    starts with ``source`` (default: the path). Without ``schema`` X may have any width and y holds
    integer labels; with one, X has a column per schema feature (in its order), y holds its classes
    (as the schema writes them, or integer labels) and, when it has a group column, the file has an
    array ``group`` of its values. ``max_bytes`` bounds the file and its arrays, ``max_rows`` the
    rows; ``option`` and ``rows_option`` are the flags that raise them, named by their errors."""
    source = source or str(path)
    check_owner_file_size(str(path), max_bytes, option, source=source)
    arrays, files = _load(Path(path), source, schema)
    X = _features(arrays["X"], source, schema)
    n = len(X)
    if max_rows is not None and n > max_rows:
        raise ValueError(f"{source}: array X: expected at most {max_rows:,} rows, found {n:,}{_raise(rows_option)}")
    for name in ("y", "group"):
        if name in arrays and arrays[name].shape != (n,):
            raise ValueError(
                f"{source}: array {name}: expected shape ({n},), one value per row of X, "
                f"found shape {arrays[name].shape}"
            )
    check_rows(X, f"{source}: array X", columns=schema.feature_names if schema is not None else None)
    if schema is None:
        return NpzRows(X=X, y=_integer_labels(arrays["y"], source), group=None)
    y = _codes(arrays["y"], schema.class_codes(), "y", "classes", source)
    if schema.group is None:  # the groups are the classes: a group array is not looked up
        return NpzRows(X=X, y=y, group=None)
    if "group" not in arrays:
        raise ValueError(
            f"{source}: expected arrays 'X', 'y', 'group' (the schema has a group column {schema.group.name!r}), "
            f"found arrays {files}"
        )
    group = _codes(arrays["group"], schema.group_codes(), "group", "group values", source)
    return NpzRows(X=X, y=y, group=group)


def _load(path: Path, source: str, schema: DataSchema | None) -> tuple[dict[str, np.ndarray], list[str]]:
    """The archive's arrays X, y and (against a schema) group if it has one, loaded without pickle,
    and the names of all its arrays; refused when the file is no archive, lacks X or y, or holds
    Python objects."""
    try:
        archive = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise ValueError(f"{source}: no such file") from None
    except (EOFError, OSError, zipfile.BadZipFile, ValueError) as err:
        empty = path.is_file() and path.stat().st_size == 0
        found = "an empty file" if empty else f"a file numpy cannot read as one ({type(err).__name__})"
        raise ValueError(f"{source}: expected {ARCHIVE}, found {found}") from None
    if not isinstance(archive, np.lib.npyio.NpzFile):
        raise ValueError(f"{source}: expected {ARCHIVE}, found a single .npy array")
    with archive as f:
        files = sorted(f.files)
        if "X" not in files or "y" not in files:
            raise ValueError(f"{source}: expected arrays 'X', 'y', found arrays {files}")
        arrays: dict[str, np.ndarray] = {}
        for name in ("X", "y", "group") if schema is not None else ("X", "y"):
            if name not in f.files:
                continue
            try:
                arrays[name] = f[name]
            except ValueError:  # an object array: refused, it could carry code
                raise ValueError(
                    f"{source}: array {name}: expected plain numbers (or text labels), found Python objects, "
                    "which are not loaded"
                ) from None
    return arrays, files


def _features(X: np.ndarray, source: str, schema: DataSchema | None) -> np.ndarray:
    """X as float64, refused unless it holds numbers in an (n, dim) shape with a row at least (dim:
    the schema's features, or at least one column)."""
    if X.dtype.kind not in "biuf":
        raise ValueError(
            f"{source}: array X: expected numbers, found dtype {X.dtype} (text? convert the features to numbers first)"
        )
    if schema is None:
        fits = X.ndim == 2 and X.shape[1] > 0
        expected = "(n, dim), at least one row and one column"
    else:
        fits = X.ndim == 2 and X.shape[1] == schema.dim
        expected = f"(n, {schema.dim}), at least one row (the schema's features {list(schema.feature_names)[:10]})"
    if not fits or X.shape[0] == 0:
        raise ValueError(f"{source}: array X: expected shape {expected}, found shape {X.shape}")
    return np.ascontiguousarray(X, dtype=np.float64)


def _integer_labels(y: np.ndarray, source: str) -> np.ndarray:
    """y as int64, refused unless every label is an integer (floats that are whole numbers, and fit
    in 64 bits, are integers too)."""
    if y.dtype.kind not in "biuf":
        raise ValueError(
            f"{source}: array y: expected integer class labels, found dtype {y.dtype} "
            "(text labels? map them to 0, 1, ...)"
        )
    if y.dtype.kind == "f":
        label = "an integer class label"
        _refuse_first(~np.isfinite(y), source, "y", label, "a value that is not finite")
        _refuse_first(y != np.round(y), source, "y", label, "a value that is not a whole number")
        _refuse_first(np.abs(y) >= 2**62, source, "y", label, "one too large for 64 bits")
    return y.astype(np.int64)


def _refuse_first(bad: np.ndarray, source: str, name: str, expected: str, found: str) -> None:
    rows = np.flatnonzero(bad)
    if rows.size:
        raise ValueError(f"{source}: array {name}: row {rows[0]}: expected {expected}, found {found}")


def _codes(values: np.ndarray, lookup: Mapping[str, int], name: str, what: str, source: str) -> np.ndarray:
    """The codes of an array's values (each distinct value looked up once); refused at the first row
    whose value is not one of ``lookup``'s."""
    distinct, inverse = np.unique(values, return_inverse=True)
    table = np.array([lookup.get(_text(value), -1) for value in distinct.tolist()], dtype=np.int64)
    out = table[inverse.reshape(-1)]
    shown = list(lookup)[:20]
    expected = f"one of the schema's {what} {shown}{' ...' if len(lookup) > 20 else ''}"
    _refuse_first(out < 0, source, name, expected, "a value that is not one of them")
    return out


def _text(value: object) -> str:
    """An array element as the schema writes it: integers without a decimal point."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# --- the size of an npz, from its headers -------------------------------------------------------


def check_owner_file_size(
    path: str, max_bytes: int = OWNER_FILE_MAX_BYTES, option: str | None = None, *, source: str | None = None
) -> None:
    """Refuse, before anything is loaded, an owner file (``--data``) larger than ``max_bytes`` on
    disk, a single ``.npy`` array, or an archive whose arrays X, y and group, by the shapes and types
    their headers state, would take more than ``max_bytes`` in memory (X as float64). Reads only
    the file's size and the arrays' headers; other problems are left to :func:`read_npz`.
    ``option`` is how the user raises the limit (a command-line flag), named by the error, which
    starts with ``source`` (default: the path)."""
    from numpy.lib import format as npy

    source = source or path
    file = Path(path)
    if not file.is_file():
        return
    size = file.stat().st_size
    if size > max_bytes:
        raise ValueError(
            f"{source}: the file is {size} bytes, more than the limit of {max_bytes} bytes{_raise(option)}"
        )
    with file.open("rb") as f:
        if f.read(6) == npy.MAGIC_PREFIX:
            raise ValueError(f"{source}: expected {ARCHIVE}, found a single .npy array")
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
        return  # a damaged archive: read_npz says what it is
    if need > max_bytes:
        raise ValueError(
            f"{source}: its arrays ({', '.join(shapes)}) would take {need} bytes in memory, more than the "
            f"limit of {max_bytes} bytes{_raise(option)}"
        )


def _raise(option: str | None) -> str:
    return f"; raise it with {option} to read it" if option else ""
