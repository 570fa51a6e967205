"""Loaders that turn the scenario's ``data.source`` section into a :class:`Dataset`.

Kinds: a synthetic Gaussian mixture with per-component labelling hyperplanes (covariate shift
that matters to a linear model, ``covariate_shift``), scikit-learn's bundled digits (``digits``),
any CSV file (``csv``), UCI Adult (``adult``), the MNIST test set (``mnist``) and the STC paper's
2-D sets (``stc_synthetic``); the pfds tables (``table``, in :mod:`marketplace.data.tables`); the
sketch sources ``uniform``, ``lifesci`` and ``occupancy`` (:mod:`marketplace.data.sources_sketch`);
and the stc sources ``office_caltech`` and ``superconductivity`` (:mod:`marketplace.data.sources_stc`).
File-based loaders check that their files exist (:func:`check_source_available`, also used by the
scenario validator before any process starts) and, when a ``MANIFEST.txt`` sits in a folder above
the file (the nearest within three levels), that every file read has the recorded sha256.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import os
from pathlib import Path

import numpy as np

from marketplace.data.config import AdultSource, CovariateShiftSource, CsvSource, MnistSource, SourceConfig
from marketplace.data.dataset import Dataset
from marketplace.data.tables import check_table_available, load_table
from marketplace.schema import SchemaError

MISSING_VALUES = frozenset({"", "?"})

ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
    "income",
)  # fmt: skip
ADULT_NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
ADULT_CATEGORICAL = tuple(c for c in ADULT_COLUMNS[:-1] if c not in ADULT_NUMERIC)
ADULT_FILES = ("adult.data", "adult.test")

MNIST_IMAGES = "t10k-images-idx3-ubyte.gz"
MNIST_LABELS = "t10k-labels-idx1-ubyte.gz"
MNIST_PIXELS = 28 * 28


# --------------------------------------------------------------------------- dispatch and checks


def load_source(cfg: SourceConfig, rng: np.random.Generator) -> Dataset:
    """Build the dataset described by ``cfg``; ``rng`` drives every random choice of the generator."""
    check_source_available(cfg)
    if cfg.kind == "covariate_shift":
        return covariate_shift(cfg.covariate_shift, rng)
    if cfg.kind == "digits":
        return digits()
    if cfg.kind == "stc_synthetic":
        return stc_synthetic(cfg.stc_synthetic, rng)
    if cfg.kind == "csv":
        assert cfg.csv is not None
        return csv_source(cfg.csv)
    if cfg.kind == "adult":
        assert cfg.adult is not None
        return adult(cfg.adult)
    if cfg.kind == "mnist":
        assert cfg.mnist is not None
        return mnist(cfg.mnist, rng)
    if cfg.kind == "table":
        assert cfg.table is not None
        return load_table(cfg.table, rng)
    if cfg.kind in ("uniform", "lifesci", "occupancy"):
        from marketplace.data import sources_sketch

        return sources_sketch.load(cfg.kind, getattr(cfg, cfg.kind), rng)
    if cfg.kind in ("office_caltech", "superconductivity"):
        from marketplace.data import sources_stc

        return sources_stc.load(cfg.kind, getattr(cfg, cfg.kind), rng)
    raise ValueError(f"unknown data source kind {cfg.kind!r}")


def check_source_available(cfg: SourceConfig, path: str = "data.source") -> None:
    """Raise :class:`SchemaError` when the files the source needs are missing or its options cannot work.

    Cheap (no file is read), so the scenario validator can call it before any process starts.
    Relative paths are taken relative to the current working directory.
    """
    if cfg.kind in ("lifesci", "occupancy"):
        from marketplace.data import sources_sketch

        sources_sketch.check_available(cfg.kind, getattr(cfg, cfg.kind), path)
    if cfg.kind in ("office_caltech", "superconductivity"):
        from marketplace.data import sources_stc

        sources_stc.check_available(cfg.kind, getattr(cfg, cfg.kind), path)
    if cfg.kind == "csv" and cfg.csv is not None:
        if not Path(cfg.csv.path).is_file():
            raise SchemaError(f"{path}.csv.path", "an existing file", repr(cfg.csv.path))
    elif cfg.kind == "adult" and cfg.adult is not None:
        _require_folder(cfg.adult.root, ADULT_FILES, f"{path}.adult.root")
        _check_adult_group(cfg.adult.group, f"{path}.adult.group")
    elif cfg.kind == "table" and cfg.table is not None:
        check_table_available(cfg.table, f"{path}.table")
    elif cfg.kind == "mnist" and cfg.mnist is not None:
        _require_folder(cfg.mnist.root, (MNIST_IMAGES, MNIST_LABELS), f"{path}.mnist.root")
        if cfg.mnist.project_dim > MNIST_PIXELS:
            raise SchemaError(
                f"{path}.mnist.project_dim", f"at most {MNIST_PIXELS} (0 keeps all pixels)", repr(cfg.mnist.project_dim)
            )


def _require_folder(root: str, names: tuple[str, ...], path: str) -> None:
    """Raise SchemaError at ``path`` unless ``root`` is a folder holding every file in ``names``."""
    folder = Path(root)
    if not folder.is_dir() or not all((folder / name).is_file() for name in names):
        raise SchemaError(path, f"a folder holding {' and '.join(names)}", repr(root))


def _check_adult_group(group: str, path: str) -> None:
    if group not in ADULT_CATEGORICAL:
        raise SchemaError(path, f"one of the categorical columns {list(ADULT_CATEGORICAL)}", repr(group))


# --------------------------------------------------------------------------- checksums


def read_verified(file: str | os.PathLike[str]) -> bytes:
    """The bytes of ``file``, checked against the nearest ``MANIFEST.txt`` above it.

    The manifest (lines ``size  sha256  relative/path``) is looked for in the file's folder and up
    to two folders above it, nearest first: in the shared data folder it sits one level above a
    dataset folder (``mnist/t10k-labels-idx1-ubyte.gz``), two levels above a file of a nested one
    (``office_caltech10_features/surf/amazon.mat``). No manifest, or a file it does not list: no check.
    """
    path = Path(os.path.abspath(file))
    data = path.read_bytes()
    manifest = next((folder / "MANIFEST.txt" for folder in path.parents[:3] if (folder / "MANIFEST.txt").is_file()), None)
    if manifest is not None:
        expected = _manifest_entries(manifest).get(path.relative_to(manifest.parent).as_posix())
        if expected is not None:
            _verify(path, data, *expected, manifest)
    return data


def _manifest_entries(manifest: Path) -> dict[str, tuple[int, str]]:
    """Map each relative path in the manifest to its (size, sha256)."""
    entries = {}
    for number, line in enumerate(manifest.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) != 3 or not parts[0].isdigit():
            raise ValueError(f"{manifest}, line {number}: expected 'size  sha256  path', got {line!r}")
        entries[parts[2].strip()] = (int(parts[0]), parts[1].lower())
    return entries


def _verify(path: Path, data: bytes, size: int, sha256: str, manifest: Path) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if len(data) != size or actual != sha256:
        raise ValueError(
            f"{path}: checksum mismatch with {manifest} (expected {size} bytes, sha256 {sha256}; "
            f"got {len(data)} bytes, sha256 {actual}); the file is corrupt or was changed"
        )


def _decompress(path: Path, data: bytes) -> bytes:
    """Undo gzip or bzip2 compression, chosen by the file name's suffix."""
    if path.suffix == ".gz":
        return gzip.decompress(data)
    if path.suffix == ".bz2":
        return bz2.decompress(data)
    return data


# --------------------------------------------------------------------------- synthetic and bundled


def covariate_shift(cfg: CovariateShiftSource, rng: np.random.Generator) -> Dataset:
    """A Gaussian mixture whose labels follow a different random hyperplane in each component.

    Centres ~ N(0, spread^2 I), rows ~ N(centre, noise^2 I); a row of component c is labelled 1 when
    (x - centre_c) . w_c > 0 for a random unit vector w_c, then flipped with probability
    ``label_noise``. A linear model fitted on other components therefore misses the target's rule.
    """
    k, n_c, dim = cfg.components, cfg.rows_per_component, cfg.dim
    centres = rng.normal(0.0, cfg.spread, size=(k, dim))
    normals = rng.normal(size=(k, dim))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    group = np.repeat(np.arange(k), n_c)
    offsets = rng.normal(0.0, cfg.noise, size=(k * n_c, dim))
    X = centres[group] + offsets
    y = (np.einsum("ij,ij->i", offsets, normals[group]) > 0).astype(np.int64)
    flip = rng.random(k * n_c) < cfg.label_noise
    y[flip] = 1 - y[flip]
    return Dataset(
        X=X,
        y=y,
        group=group,
        feature_names=tuple(f"f{j}" for j in range(dim)),
        group_names=tuple(f"component-{c}" for c in range(k)),
        name="covariate_shift",
    )


def stc_synthetic(cfg, rng: np.random.Generator) -> Dataset:
    """The STC paper's synthetic set ``cfg.which`` as one dataset: group 0 source, group 1 target
    (labels: the cluster each point was drawn from)."""
    from marketplace.protocols.stc.synthetic import synthetic_dataset

    data = synthetic_dataset(cfg.which, seed=int(rng.integers(2**63 - 1)), n_source=cfg.n_source, n_target=cfg.n_target)
    X = np.vstack([data.source, data.target])
    y = np.concatenate([data.source_clusters, data.target_clusters]).astype(np.int64)
    group = np.repeat([0, 1], [len(data.source), len(data.target)])
    return Dataset(X=X, y=y, group=group, feature_names=("x0", "x1"), group_names=("source", "target"),
                   name=f"stc_synthetic/{data.name}")


def digits() -> Dataset:
    """scikit-learn's 8x8 digits, pixels scaled to [0, 1]; the group of a row is its digit."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    y = bunch.target.astype(np.int64)
    return Dataset(
        X=bunch.data / 16.0,
        y=y,
        group=y,
        feature_names=tuple(bunch.feature_names),
        group_names=tuple(f"digit-{d}" for d in range(10)),
        name="digits",
    )


# --------------------------------------------------------------------------- CSV


def csv_source(cfg: CsvSource) -> Dataset:
    """Read a CSV file with a header row (optionally .gz or .bz2 compressed).

    Rows with a missing value ('' or '?') in a used column are dropped. Labels: integers are kept
    as they are; other values become codes 0, 1, ... in sorted order. Groups: codes of the sorted
    values of the group column (numeric order when every value is a number), named by the value;
    without a group column, the groups are the labels.
    """
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
    y = _label_codes(label_values)
    group_values = label_values if cfg.group is None else [row[header.index(cfg.group)].strip() for _, row in rows]
    group, group_names = _codes(group_values)
    return Dataset(X=X, y=y, group=group, feature_names=tuple(feature_names), group_names=group_names, name=path.stem)


def _read_csv(path: Path, delimiter: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (line number, fields) of every non-blank row, checking each row's width."""
    text = _decompress(path, read_verified(path)).decode("utf-8-sig")
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
    """ValueError naming every column in ``names`` that the header lacks."""
    absent = [name for name in names if name not in header]
    if absent:
        raise ValueError(f"{path}: no column named {absent}; the header has {header}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _numeric_columns(header: list[str], rows: list[tuple[int, list[str]]], exclude: set[str | None]) -> list[str]:
    """Columns (other than ``exclude``) whose non-missing values all parse as numbers, and not all missing."""
    chosen = []
    for i, name in enumerate(header):
        if name in exclude:
            continue
        values = [row[i].strip() for _, row in rows]
        present = [v for v in values if v not in MISSING_VALUES]
        if present and all(_is_number(v) for v in present):
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


def _label_codes(values: list[str]) -> np.ndarray:
    """Integer labels as they are; anything else as codes of the sorted distinct values."""
    try:
        numbers = np.array([float(v) for v in values], dtype=np.float64)
    except ValueError:
        numbers = None
    if numbers is not None and np.all(numbers == np.round(numbers)):
        return numbers.astype(np.int64)
    codes, _ = _codes(values)
    return codes


def _codes(values: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
    """Codes 0..G-1 of the distinct values, sorted numerically when all are numbers, else as text."""
    distinct = set(values)
    key = float if all(_is_number(v) for v in distinct) else str
    names = tuple(sorted(distinct, key=key))
    lookup = {name: code for code, name in enumerate(names)}
    return np.array([lookup[v] for v in values], dtype=np.int64), names


# --------------------------------------------------------------------------- UCI Adult


def adult(cfg: AdultSource) -> Dataset:
    """UCI Adult (adult.data then adult.test), rows with a missing value dropped.

    Numeric columns are standardised (z-score over all kept rows), categorical ones one-hot encoded
    with every category kept (feature ``column=value``), the label is income > 50K and the group of
    a row is the code of its value in the categorical column ``cfg.group`` (sorted values).
    """
    _check_adult_group(cfg.group, "data.source.adult.group")
    root = Path(cfg.root)
    records = [record for name in ADULT_FILES for record in _adult_records(root / name)]
    columns = list(zip(*records)) if records else [() for _ in ADULT_COLUMNS]
    table = dict(zip(ADULT_COLUMNS, columns))
    blocks, names = [], []
    for column in ADULT_COLUMNS[:-1]:
        block, block_names = _adult_encode(column, table[column])
        blocks.append(block)
        names.extend(block_names)
    y = np.array([value.rstrip(".") == ">50K" for value in table["income"]], dtype=np.int64)
    group, group_names = _codes(list(table[cfg.group]))
    return Dataset(
        X=np.hstack(blocks),
        y=y,
        group=group,
        feature_names=tuple(names),
        group_names=group_names,
        name=f"adult-by-{cfg.group}",
    )


def _adult_records(path: Path) -> list[tuple[str, ...]]:
    """Stripped fields of every complete row of one Adult file (junk first line and blanks skipped)."""
    records = []
    for number, line in enumerate(read_verified(path).decode("utf-8").splitlines(), start=1):
        if not line.strip() or line.startswith("|"):
            continue
        fields = tuple(field.strip() for field in line.split(","))
        if len(fields) != len(ADULT_COLUMNS):
            raise ValueError(f"{path}, line {number}: {len(fields)} fields, expected {len(ADULT_COLUMNS)}")
        if not any(field in MISSING_VALUES for field in fields):
            records.append(fields)
    return records


def _adult_encode(column: str, values: tuple[str, ...]) -> tuple[np.ndarray, list[str]]:
    """A standardised numeric column, or the one-hot block of a categorical one, with feature names."""
    if column in ADULT_NUMERIC:
        x = np.array(values, dtype=np.float64)
        std = x.std()
        return ((x - x.mean()) / (std if std > 0 else 1.0))[:, None], [column]
    codes, categories = _codes(list(values))
    return np.eye(len(categories))[codes], [f"{column}={category}" for category in categories]


# --------------------------------------------------------------------------- MNIST


def mnist(cfg: MnistSource, rng: np.random.Generator) -> Dataset:
    """The 10,000 MNIST test images scaled to [0, 1]; the group of a row is its digit.

    With ``project_dim`` > 0 the pixels go through a Gaussian random projection whose seed is drawn
    from ``rng``: public randomness, the same for every party building the same world.
    """
    root = Path(cfg.root)
    images = _read_idx(root / MNIST_IMAGES, ndim=3)
    labels = _read_idx(root / MNIST_LABELS, ndim=1)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{root}: {images.shape[0]} images but {labels.shape[0]} labels")
    X = images.reshape(images.shape[0], -1) / 255.0
    names = tuple(f"pixel_{r}_{c}" for r in range(images.shape[1]) for c in range(images.shape[2]))
    if cfg.project_dim > 0:
        X, names = _project(X, cfg.project_dim, rng)
    y = labels.astype(np.int64)
    return Dataset(
        X=X, y=y, group=y, feature_names=names, group_names=tuple(f"digit-{d}" for d in range(10)), name="mnist"
    )


def _read_idx(path: Path, ndim: int) -> np.ndarray:
    """Parse a gzipped IDX file of unsigned bytes, checking its magic number and its size."""
    data = gzip.decompress(read_verified(path))
    header = 4 + 4 * ndim
    if len(data) < header or data[:3] != b"\x00\x00\x08" or data[3] != ndim:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes with {ndim} dimension(s) (bad magic number)")
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    if len(data) != header + int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape} but the file holds {len(data) - header} data bytes")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def _project(X: np.ndarray, dim: int, rng: np.random.Generator) -> tuple[np.ndarray, tuple[str, ...]]:
    """Gaussian random projection of the rows to ``dim`` dimensions, seeded from ``rng``."""
    from sklearn.random_projection import GaussianRandomProjection

    projection = GaussianRandomProjection(n_components=dim, random_state=int(rng.integers(2**31 - 1)))
    return projection.fit_transform(X), tuple(f"proj{j}" for j in range(dim))
