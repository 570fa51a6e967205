"""Sweeps: one scenario run over a grid of values and repeats, written as CSV and plotted.

A sweep varies scenario keys (``summarize.rounds=50,100,150``), takes every combination, and runs
each ``repeats`` times with seeds ``seed, seed + 1, ...`` (so any single point can be rerun with
``marketplace run S --set seed=N --set key=value``). It comes from the command line
(``--sweep KEY=V1,V2``, ``--repeats N``) or from the scenario's ``sweep:`` section.

Every point is validated before the first run starts. Results:

* ``runs.csv``: one row per run (the swept values, repeat, seed, status, the protocol's own columns
  from its exchange's ``sweep_row``, wall time);
* ``summary.csv``: mean and standard deviation over repeats of every numeric column, per point;
* ``sweep.png``: the exchange's plot against the first numeric swept key (for `summarize`, the
  paper's Figure 1 layout);
* ``runs/NNN-.../``: every run's own report.
"""

from __future__ import annotations

import copy
import csv
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marketplace.runtime.results import Report
from marketplace.scenario import Scenario, ScenarioError, parse_scenario
from marketplace.scenario.config import ScenarioConfig
from marketplace.scenario.load import parse_value, set_path, unknown_key_message
from marketplace.schema import key_is_known

__all__ = [
    "SweepPoint",
    "SweepResult",
    "parse_axis",
    "plan_sweep",
    "result_line",
    "row_of",
    "run_folder",
    "run_sweep",
    "summarize_rows",
    "write_csv",
]


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: the swept values, the repeat index, the seed and the validated scenario."""

    index: int
    values: dict[str, Any]
    repeat: int
    seed: int
    scenario: Scenario

    @property
    def label(self) -> str:
        parts = [f"{key.rsplit('.', 1)[-1]}={value}" for key, value in self.values.items()]
        return re.sub(r"[^A-Za-z0-9_.=-]+", "_", "-".join(parts + [f"r{self.repeat}"]))


@dataclass
class SweepResult:
    """A finished sweep: ``rows`` (one per run, as in ``runs.csv``), ``summary`` (mean and sd over
    repeats per point, as in ``summary.csv``), the swept ``keys``, the sweep folder ``out`` and
    each run's own folder (``run_folders``, in the order of ``rows``)."""

    rows: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    keys: list[str]
    out: Path
    run_folders: list[Path] = field(default_factory=list)

    @property
    def failed(self) -> list[dict[str, Any]]:
        """The rows of the runs that did not complete."""
        return [row for row in self.rows if row.get("status") != "completed"]

    def report(self, index: int) -> Report:
        """The full report of run ``index`` (a row's ``point``), read from its folder."""
        return Report.load(self.run_folders[index])


def parse_axis(text: str) -> tuple[str, list[Any]]:
    """``key.path=v1,v2,...`` -> (key, [values parsed as YAML scalars])."""
    key, sep, values = text.partition("=")
    key = key.strip()
    if not sep or not key or not values.strip():
        raise ScenarioError("--sweep", "", f"{text!r} must look like key.path=value1,value2,...")
    return key, [parse_value(item.strip(), key, "--sweep") for item in values.split(",")]


def plan_sweep(scenario: Scenario, axes: dict[str, list[Any]], repeats: int) -> list[SweepPoint]:
    """Every combination of ``axes`` x ``repeats``, each validated as a full scenario (raises
    :class:`ScenarioError` naming the sweep value at fault before anything runs)."""
    if repeats < 1:
        raise ScenarioError(scenario.source, "sweep.repeats", f"expected an integer >= 1, got {repeats}")
    for key in axes:
        if not isinstance(key, str) or not key_is_known(ScenarioConfig, key):
            raise ScenarioError("sweep", "", unknown_key_message(str(key)))
    base = copy.deepcopy(scenario.raw)
    base.pop("sweep", None)
    base_seed = int(base.get("seed", 0))
    keys = list(axes)
    points: list[SweepPoint] = []
    for combo in itertools.product(*(axes[k] for k in keys)) if keys else [()]:
        values = dict(zip(keys, combo))
        for repeat in range(repeats):
            raw = copy.deepcopy(base)
            for key, value in values.items():
                set_path(raw, key, value, source="sweep")
            raw["seed"] = base_seed + repeat
            where = ", ".join(f"{k}={v}" for k, v in values.items()) or "base point"
            checked = parse_scenario(raw, source=f"{scenario.source} [sweep {where}]", base_dir=Path.cwd())
            points.append(SweepPoint(len(points), values, repeat, base_seed + repeat, checked))
    return points


def row_of(point: SweepPoint, report: dict[str, Any]) -> dict[str, Any]:
    """The CSV row of one finished run: the swept values, then the protocol's own columns."""
    from marketplace.plugins import exchange

    row: dict[str, Any] = {
        "point": point.index,
        **point.values,
        "repeat": point.repeat,
        "seed": point.seed,
        "status": report.get("status"),
    }
    row.update(exchange(point.scenario.config.protocol).sweep_row(report))
    row["wall_s"] = (report.get("timing") or {}).get("wall_s")
    return row


def run_folder(out: str | Path, point: SweepPoint) -> Path:
    """The folder of ``point``'s run inside the sweep folder ``out``."""
    return Path(out) / "runs" / f"{point.index:03d}-{point.label}"


EPS_COLUMN = re.compile(r"(^|_)eps($|_|\[)")
"""Sweep columns holding an eps a run spent (``eps_spent``, ``eps[curator]``, ``owner_eps``, ``eps_max``)."""


def result_line(point: SweepPoint, row: dict[str, Any], total: int) -> str:
    """One finished run of a sweep, for a person watching: its place, the swept values, the seed,
        the status, the protocol's headline figures (its exchange's ``sweep_headline`` columns, else
        the first figures of its row), the eps spent (the row's ``eps_spent``, the bound the protocol
    states per owner; else the largest eps column), and the wall time."""
    from marketplace.plugins import exchange

    shown = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in point.values.items()) or "base"
    columns = list(row)
    own = columns[columns.index("status") + 1 :] if "status" in columns else []
    headline = exchange(point.scenario.config.protocol).sweep_headline
    chosen = [c for c in headline if c in row] if headline else [c for c in own if not EPS_COLUMN.search(c)][:3]
    figures = [f"{c} {_figure(row[c])}" for c in chosen if row.get(c) is not None]
    eps = [row[c] for c in own if EPS_COLUMN.search(c) and isinstance(row.get(c), (int, float))]
    if isinstance(row.get("eps_spent"), (int, float)):  # the protocol's own figure (its exchange's sweep_row)
        figures.append(f"eps spent {_figure(row['eps_spent'])}")
    elif eps:
        figures.append(f"eps spent {_figure(max(eps))}")
    wall = row.get("wall_s")
    tail = f", {wall:.1f} s" if isinstance(wall, (int, float)) else ""
    return (
        f"[{point.index + 1}/{total}] {shown} seed {point.seed}: {row.get('status')}"
        + (f", {', '.join(figures)}" if figures else "")
        + tail
    )


def _figure(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def run_sweep(
    points: list[SweepPoint],
    out: str | Path,
    *,
    driver: str = "inprocess",
    launch: str = "forkserver",
    on_run: Callable[[SweepPoint, dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run every point (in order), write ``runs.csv`` and ``summary.csv`` (and ``sweep.png`` when a
    numeric key is swept) under ``out``; returns the per-run rows. ``out`` must be new or empty
    (:class:`~marketplace.runtime.run_folder.RunFolderError`), and ``driver`` and ``launch`` valid (ValueError),
    both checked here once, before the first run."""
    from marketplace.runner.run import check_driver, run_in_folder
    from marketplace.runtime.run_folder import check_run_folder

    checked_driver, checked_launch = check_driver(driver, launch)
    out = check_run_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for point in points:  # each run in a new folder of its own under out
        report = run_in_folder(point.scenario, run_folder(out, point), driver=checked_driver, launch=checked_launch)
        rows.append(row_of(point, report))
        write_csv(out / "runs.csv", rows)  # rewritten after every run: an interrupted sweep keeps what it did
        if on_run is not None:
            on_run(point, rows[-1])
    keys = list(points[0].values) if points else []
    summary = summarize_rows(rows, keys)
    write_csv(out / "summary.csv", summary)
    numeric = [
        k
        for k in keys
        if all(isinstance(p.values[k], (int, float)) and not isinstance(p.values[k], bool) for p in points)
    ]
    if numeric:  # x: the first numeric key; one protocol line per value of the first other key
        from marketplace.plugins import exchange

        exchange(points[0].scenario.config.protocol).plot_sweep(
            summary,
            [numeric[0], *[k for k in keys if k != numeric[0]][:1]],
            out / "sweep.png",
            title=points[0].scenario.config.name,
        )
    return rows


def _mean_sd(column: list[float | None]) -> tuple[float | None, float | None]:
    values = [v for v in column if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not values:
        return None, None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return mean, sd


def summarize_rows(rows: list[dict[str, Any]], keys: list[str]) -> list[dict[str, Any]]:
    """Mean and sample standard deviation over repeats, one row per combination of swept values."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(repr(row.get(k)) for k in keys), []).append(row)
    skip = {"point", "repeat", "seed", "status", *keys}
    numeric = [
        c
        for c in dict.fromkeys(c for r in rows for c in r)
        if c not in skip
        and all(isinstance(r.get(c), (int, float, type(None))) and not isinstance(r.get(c), bool) for r in rows)
    ]
    out = []
    for members in groups.values():
        summary: dict[str, Any] = {k: members[0].get(k) for k in keys}
        summary["runs"] = len(members)
        summary["completed"] = sum(1 for m in members if m.get("status") == "completed")
        for column in numeric:
            mean, sd = _mean_sd([m.get(column) for m in members])
            summary[f"{column}_mean"], summary[f"{column}_sd"] = mean, sd
        out.append(summary)
    return out


def write_csv(path: str | Path, rows: list[dict[str, Any]]) -> None:
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
