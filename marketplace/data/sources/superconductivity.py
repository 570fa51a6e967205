"""``superconductivity``: two independent random subsamples of UCI Superconductivity (1,000 and
500 rows; 28 rows are in both), for stc's low/high critical-temperature pairs. Reads the
registered dataset ``superconductivity_subsample``.

The n500 file is a *public reference sample*; the experiment's rows are the n1000 file's rows that
are not in the n500 file (972 rows). The per-feature mean and standard deviation used for
standardisation, and the quartile cut points of the critical temperature that define the four
groups low (0), middle-low (1), middle-high (2) and high (3) (the paper's split, following Pardoe
and Stone), are computed from the reference file only, so no statistic of the experiment's own
records is used: every step applied to an experiment row is a fixed per-record map. Rows are
standardised with the reference statistics (a standard deviation of 0 counts as 1), then go
through the public Gaussian random projection to ``project_dim``. The label is the critical
temperature rounded to the nearest kelvin (:class:`Dataset` labels are integers; the group holds
the temperature class).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.textio import project
from marketplace.datasets import read_bytes
from marketplace.schema import Range, SchemaError

DATASET = "superconductivity_subsample"
EXPERIMENT = "subsampled_superconduct_n1000.csv"
REFERENCE = "subsampled_superconduct_n500.csv"
FEATURES = 81
LABEL = "critical_temp"
TEMPERATURE_GROUPS = ("low", "middle-low", "middle-high", "high")


@dataclass(frozen=True)
class SuperconductivitySource:
    project_dim: Annotated[int, Range(min=0)] = 8
    """Gaussian random projection of the standardised rows to this many dimensions (0 keeps all 81)."""


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


def check(cfg: SuperconductivitySource, path: str) -> None:
    if (
        isinstance(cfg.project_dim, bool)
        or not isinstance(cfg.project_dim, int)
        or not 0 <= cfg.project_dim <= FEATURES
    ):
        raise SchemaError(
            f"{path}.project_dim",
            f"an integer in [0, {FEATURES}] (0 keeps all {FEATURES} features)",
            repr(cfg.project_dim),
        )


def superconductivity_tables() -> SuperconductivityTables:
    """Read both files; the experiment's rows are the n1000 rows equal to no n500 row (all 82 values)."""
    names, experiment = _read(EXPERIMENT)
    ref_names, reference = _read(REFERENCE)
    if ref_names != names:
        raise ValueError(f"{DATASET}: the two files have different columns")
    public = {row.tobytes() for row in reference}
    keep = np.array([row.tobytes() not in public for row in experiment], dtype=bool)
    experiment = experiment[keep]
    return SuperconductivityTables(
        feature_names=names[:-1],
        reference=reference[:, :-1],
        reference_temp=reference[:, -1],
        experiment=experiment[:, :-1],
        experiment_temp=experiment[:, -1],
    )


def reference_statistics(tables: SuperconductivityTables) -> ReferenceStatistics:
    """Mean, standard deviation (0 -> 1) and temperature quartile cut points of the reference sample only."""
    sd = tables.reference.std(axis=0)
    return ReferenceStatistics(
        mean=tables.reference.mean(axis=0),
        sd=np.where(sd > 0, sd, 1.0),
        cuts=np.quantile(tables.reference_temp, [0.25, 0.5, 0.75]),
    )


def superconductivity(cfg: SuperconductivitySource, rng: np.random.Generator) -> Dataset:
    """The experiment's 972 rows, standardised with the reference statistics and projected to
    ``project_dim``; groups: the reference quartile class of the critical temperature."""
    check(cfg, "data.source.superconductivity")
    tables = superconductivity_tables()
    stats = reference_statistics(tables)
    X = stats.standardise(tables.experiment)
    names = tables.feature_names
    if cfg.project_dim > 0:
        X, names = project(X, cfg.project_dim, rng)
    return Dataset(
        X=X,
        y=np.rint(tables.experiment_temp).astype(np.int64),
        group=stats.groups(tables.experiment_temp),
        feature_names=names,
        group_names=TEMPERATURE_GROUPS,
        name="superconductivity",
    )


def _read(name: str) -> tuple[tuple[str, ...], np.ndarray]:
    """Header and float matrix of one subsample file (81 features then critical_temp)."""
    where = f"{DATASET}/{name}"
    reader = csv.reader(io.StringIO(read_bytes(DATASET, name).decode("utf-8-sig")))
    header = tuple(field.strip() for field in next(reader, []))
    if len(header) != FEATURES + 1 or header[-1] != LABEL:
        raise ValueError(
            f"{where}: expected {FEATURES} feature columns then {LABEL!r}, got {len(header)} columns "
            f"ending in {header[-1:]}"
        )
    rows = []
    for row in reader:
        if not row or all(not field.strip() for field in row):
            continue
        try:
            values = [float(field) for field in row]
        except ValueError:
            values = []
        if len(values) != len(header) or not np.all(np.isfinite(values)):
            raise ValueError(f"{where}, line {reader.line_num}: expected {len(header)} finite numbers, got {row!r}")
        rows.append(values)
    return header, np.array(rows, dtype=np.float64).reshape(-1, len(header))


SOURCE = Source(
    kind="superconductivity",
    options=SuperconductivitySource,
    load=superconductivity,
    check=check,
    datasets=lambda cfg: (DATASET,),
    summary="UCI Superconductivity subsamples, grouped by critical-temperature quartile",
)
