"""Data sources of the STC experiments (private source-target clustering): Office-Caltech10 and
Superconductivity. In both, the source set S and the target set T are two *groups* of one dataset:
a scenario gives the owner the source group (``data.partition.groups: [s]``) and the consumer the
target group (``data.consumer.target_groups: [t]``).

* ``office_caltech``: the Office-Caltech10 image features (``surf``: 800-d SURF bag of words, or
  ``googlenet``: 1024-d GoogLeNet features; the latter has no caltech10 file). The group of a row
  is its domain, with ids fixed whatever ``domains`` lists: amazon 0, webcam 1, dslr 2,
  caltech10 3. The label is the object class 1..10. Preprocessing is per record: each row is
  scaled to unit Euclidean norm (an all-zero row stays zero), then goes through the public
  Gaussian random projection to ``project_dim`` dimensions.
* ``superconductivity``: two independent random subsamples of UCI Superconductivity (1,000 and
  500 rows; 28 rows are in both). The n500 file is a *public reference sample*; the experiment's
  rows are the n1000 file's rows that are not in the n500 file (972 rows). The per-feature mean
  and standard deviation used for standardisation, and the quartile cut points of the critical
  temperature that define the four groups low (0), middle-low (1), middle-high (2) and high (3)
  (the paper's split, following Pardoe & Stone), are computed from the reference file only, so no
  statistic of the experiment's own records is used: every step applied to an experiment row is a
  fixed per-record map. Rows are standardised with the reference statistics (a standard deviation
  of 0 counts as 1), then go through the public Gaussian random projection to ``project_dim``.
  The label is the critical temperature rounded to the nearest kelvin (:class:`Dataset` labels are
  integers; the group holds the temperature class).

The projection's seed is drawn from the source stream of the run seed: public randomness, the same
for every party that builds the same world. Every file is read through ``read_verified`` (the
shared data folder's ``MANIFEST.txt`` checksums).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.schema import Range, SchemaError

OFFICE_DOMAINS = ("amazon", "webcam", "dslr", "caltech10")
"""Group ids of the Office-Caltech10 domains: their positions here (fixed, whatever is loaded)."""
OFFICE_FEATURES = {"surf": ("surf", 800, OFFICE_DOMAINS), "googlenet": ("googlenet1024", 1024, OFFICE_DOMAINS[:3])}
"""features -> (sub-folder, width, domains that have a file)."""

SUPERCONDUCTIVITY_EXPERIMENT = "subsampled_superconduct_n1000.csv"
SUPERCONDUCTIVITY_REFERENCE = "subsampled_superconduct_n500.csv"
SUPERCONDUCTIVITY_FEATURES = 81
SUPERCONDUCTIVITY_LABEL = "critical_temp"
TEMPERATURE_GROUPS = ("low", "middle-low", "middle-high", "high")


@dataclass(frozen=True)
class OfficeCaltechSource:
    """Office-Caltech10 features (``root`` holds surf/ and googlenet1024/); groups are the domains
    amazon 0, webcam 1, dslr 2, caltech10 3."""

    root: str
    features: Literal["surf", "googlenet"] = "surf"
    domains: tuple[str, ...] | None = None
    """Domains to load (default: every domain with a file for ``features``; googlenet has no
    caltech10); group ids stay fixed whatever is listed."""
    project_dim: Annotated[int, Range(min=0)] = 8
    """Gaussian random projection of the unit-norm rows to this many dimensions (0 keeps all features)."""


@dataclass(frozen=True)
class SuperconductivitySource:
    """UCI Superconductivity subsamples (``root`` holds the n1000 and n500 files): the experiment's
    972 rows, standardised with the n500 reference sample's statistics; groups are the reference
    quartiles of the critical temperature (low, middle-low, middle-high, high)."""

    root: str
    project_dim: Annotated[int, Range(min=0)] = 8
    """Gaussian random projection of the standardised rows to this many dimensions (0 keeps all 81)."""


# --------------------------------------------------------------------------- checks and dispatch


def check_available(kind: str, cfg, path: str) -> None:
    """SchemaError naming the config key when a file is missing or an option cannot work (no file is read)."""
    if kind not in ("office_caltech", "superconductivity"):
        return
    if cfg is None:
        raise SchemaError(f"{path}.{kind}", f"a {kind} section (with root)", "nothing")
    if kind == "office_caltech":
        _check_office(cfg, f"{path}.office_caltech")
    else:
        _check_superconductivity(cfg, f"{path}.superconductivity")


def _check_office(cfg: OfficeCaltechSource, path: str) -> None:
    if cfg.features not in OFFICE_FEATURES:
        raise SchemaError(f"{path}.features", f"one of {list(OFFICE_FEATURES)}", repr(cfg.features))
    folder, width, available = OFFICE_FEATURES[cfg.features]
    domains = office_domains(cfg)
    unknown = [d for d in domains if d not in OFFICE_DOMAINS]
    if not domains or unknown:
        raise SchemaError(f"{path}.domains", f"a non-empty list of domains from {list(OFFICE_DOMAINS)}",
                          repr(list(domains)) + (f" (unknown: {unknown})" if unknown else ""))
    if len(set(domains)) != len(domains):
        raise SchemaError(f"{path}.domains", "each domain at most once", repr(list(domains)))
    absent = [d for d in domains if d not in available]
    if absent:
        raise SchemaError(f"{path}.domains", f"domains that have {cfg.features} features: {list(available)} "
                          f"(no {cfg.features} file for {absent}; use features: surf for them)", repr(list(domains)))
    if isinstance(cfg.project_dim, bool) or not isinstance(cfg.project_dim, int) or not 0 <= cfg.project_dim <= width:
        raise SchemaError(f"{path}.project_dim", f"an integer in [0, {width}] (0 keeps all {width} features)",
                          repr(cfg.project_dim))
    names = [f"{folder}/{d}.mat" for d in domains]
    missing = [n for n in names if not (Path(cfg.root) / n).is_file()]
    if missing:
        raise SchemaError(f"{path}.root", f"a folder holding {', '.join(names)}",
                          f"{cfg.root!r} (missing {', '.join(missing)})")


def _check_superconductivity(cfg: SuperconductivitySource, path: str) -> None:
    width = SUPERCONDUCTIVITY_FEATURES
    if isinstance(cfg.project_dim, bool) or not isinstance(cfg.project_dim, int) or not 0 <= cfg.project_dim <= width:
        raise SchemaError(f"{path}.project_dim", f"an integer in [0, {width}] (0 keeps all {width} features)",
                          repr(cfg.project_dim))
    names = (SUPERCONDUCTIVITY_EXPERIMENT, SUPERCONDUCTIVITY_REFERENCE)
    missing = [n for n in names if not (Path(cfg.root) / n).is_file()]
    if missing:
        raise SchemaError(f"{path}.root", f"a folder holding {' and '.join(names)}",
                          f"{cfg.root!r} (missing {', '.join(missing)})")


def load(kind: str, cfg, rng: np.random.Generator) -> Dataset:
    """The dataset of one of this module's kinds."""
    if kind == "office_caltech":
        return office_caltech(cfg, rng)
    if kind == "superconductivity":
        return superconductivity(cfg, rng)
    raise ValueError(f"unknown stc data source kind {kind!r}")


# --------------------------------------------------------------------------- Office-Caltech10


def office_domains(cfg: OfficeCaltechSource) -> tuple[str, ...]:
    """The domains to load: the listed ones, or every domain that has a file for ``cfg.features``."""
    return tuple(cfg.domains) if cfg.domains is not None else OFFICE_FEATURES[cfg.features][2]


def office_caltech(cfg: OfficeCaltechSource, rng: np.random.Generator) -> Dataset:
    """The rows of the listed domains (in the fixed order amazon, webcam, dslr, caltech10), each
    scaled to unit norm, then projected to ``project_dim`` dimensions with one public projection."""
    _check_office(cfg, "data.source.office_caltech")
    folder, width, _ = OFFICE_FEATURES[cfg.features]
    blocks, labels, groups = [], [], []
    for group, domain in enumerate(OFFICE_DOMAINS):
        if domain not in office_domains(cfg):
            continue
        X, y = _read_office(Path(cfg.root) / folder / f"{domain}.mat", width)
        blocks.append(X)
        labels.append(y)
        groups.append(np.full(len(y), group, dtype=np.int64))
    X = unit_rows(np.vstack(blocks))
    names = tuple(f"{cfg.features}{j}" for j in range(width))
    if cfg.project_dim > 0:
        from marketplace.data.sources import _project

        X, names = _project(X, cfg.project_dim, rng)
    return Dataset(X=X, y=np.concatenate(labels), group=np.concatenate(groups), feature_names=names,
                   group_names=OFFICE_DOMAINS, name=f"office_caltech/{cfg.features}")


def _read_office(path: Path, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Features ('fts', n x width) and labels ('labels', n x 1 or 1 x n, values 1..10) of one .mat file."""
    from scipy.io import loadmat

    from marketplace.data.sources import read_verified

    mat = loadmat(io.BytesIO(read_verified(path)))
    if "fts" not in mat or "labels" not in mat:
        raise ValueError(f"{path}: expected the variables 'fts' and 'labels', found {sorted(k for k in mat if not k.startswith('__'))}")
    X = np.asarray(mat["fts"], dtype=np.float64)
    y = np.asarray(mat["labels"]).ravel().astype(np.int64)
    if X.ndim != 2 or X.shape[1] != width or X.shape[0] != y.size:
        raise ValueError(f"{path}: expected 'fts' of shape (n, {width}) and n labels, got {X.shape} and {y.size} labels")
    if y.size and (y.min() < 1 or y.max() > 10):
        raise ValueError(f"{path}: labels must be the classes 1..10, got values in [{y.min()}, {y.max()}]")
    return X, y


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm (a per-record map; an all-zero row stays zero)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X, dtype=np.float64), where=norms > 0)


# --------------------------------------------------------------------------- Superconductivity


@dataclass(frozen=True)
class SuperconductivityTables:
    """The reference sample (n500 file) and the experiment's rows (n1000 rows not in n500), raw."""

    feature_names: tuple[str, ...]
    reference: np.ndarray
    """(500, 81) features of the public reference sample."""
    reference_temp: np.ndarray
    experiment: np.ndarray
    """(972, 81) features of the experiment's rows."""
    experiment_temp: np.ndarray


@dataclass(frozen=True)
class ReferenceStatistics:
    """What the public reference sample fixes: standardisation and the temperature cut points."""

    mean: np.ndarray
    sd: np.ndarray
    """Standard deviations, with 0 replaced by 1."""
    cuts: np.ndarray
    """The 25%, 50% and 75% quantiles of the reference critical temperatures."""

    def standardise(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean) / self.sd

    def groups(self, temp: np.ndarray) -> np.ndarray:
        """0 low (below the first cut), 1 middle-low, 2 middle-high, 3 high (at or above the last cut)."""
        return np.searchsorted(self.cuts, temp, side="right").astype(np.int64)


def superconductivity_tables(root: str | Path) -> SuperconductivityTables:
    """Read both files; the experiment's rows are the n1000 rows equal to no n500 row (all 82 values)."""
    root = Path(root)
    names, experiment = _read_superconductivity(root / SUPERCONDUCTIVITY_EXPERIMENT)
    ref_names, reference = _read_superconductivity(root / SUPERCONDUCTIVITY_REFERENCE)
    if ref_names != names:
        raise ValueError(f"{root}: the two files have different columns")
    public = {row.tobytes() for row in reference}
    keep = np.array([row.tobytes() not in public for row in experiment], dtype=bool)
    experiment = experiment[keep]
    return SuperconductivityTables(feature_names=names[:-1], reference=reference[:, :-1], reference_temp=reference[:, -1],
                                   experiment=experiment[:, :-1], experiment_temp=experiment[:, -1])


def reference_statistics(tables: SuperconductivityTables) -> ReferenceStatistics:
    """Mean, standard deviation (0 -> 1) and temperature quartile cut points of the reference sample only."""
    sd = tables.reference.std(axis=0)
    return ReferenceStatistics(mean=tables.reference.mean(axis=0), sd=np.where(sd > 0, sd, 1.0),
                               cuts=np.quantile(tables.reference_temp, [0.25, 0.5, 0.75]))


def superconductivity(cfg: SuperconductivitySource, rng: np.random.Generator) -> Dataset:
    """The experiment's 972 rows, standardised with the reference statistics and projected to
    ``project_dim``; groups: the reference quartile class of the critical temperature."""
    _check_superconductivity(cfg, "data.source.superconductivity")
    tables = superconductivity_tables(cfg.root)
    stats = reference_statistics(tables)
    X = stats.standardise(tables.experiment)
    names = tables.feature_names
    if cfg.project_dim > 0:
        from marketplace.data.sources import _project

        X, names = _project(X, cfg.project_dim, rng)
    return Dataset(X=X, y=np.rint(tables.experiment_temp).astype(np.int64), group=stats.groups(tables.experiment_temp),
                   feature_names=names, group_names=TEMPERATURE_GROUPS, name="superconductivity")


def _read_superconductivity(path: Path) -> tuple[tuple[str, ...], np.ndarray]:
    """Header and float matrix of one subsample file (81 features then critical_temp)."""
    from marketplace.data.sources import read_verified

    reader = csv.reader(io.StringIO(read_verified(path).decode("utf-8-sig")))
    header = tuple(name.strip() for name in next(reader, []))
    if len(header) != SUPERCONDUCTIVITY_FEATURES + 1 or header[-1] != SUPERCONDUCTIVITY_LABEL:
        raise ValueError(f"{path}: expected {SUPERCONDUCTIVITY_FEATURES} feature columns then "
                         f"{SUPERCONDUCTIVITY_LABEL!r}, got {len(header)} columns ending in {header[-1:]}")
    rows = []
    for row in reader:
        if not row or all(not field.strip() for field in row):
            continue
        try:
            values = [float(field) for field in row]
        except ValueError:
            values = []
        if len(values) != len(header) or not np.all(np.isfinite(values)):
            raise ValueError(f"{path}, line {reader.line_num}: expected {len(header)} finite numbers, got {row!r}")
        rows.append(values)
    return header, np.array(rows, dtype=np.float64).reshape(-1, len(header))
