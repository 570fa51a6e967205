"""The per-round history of a run, whatever its protocol: the report's ``history`` section, and
the ``rounds.csv`` and ``rounds.png`` the runner writes from it.

A protocol's exchange builds the section with :func:`history_section` from what its curator
recorded round by round (and what the runner's evaluation adds, such as an exact MMD^2 computed
with the world in view). The section names its own columns, the one that counts the rounds
(``x``), the columns worth plotting (``plot``) and what each column means (``about``); so this
module writes the table and draws the figure without knowing the protocol.

A history holds only what the scenario and its seed decide: no timings, no socket counters. The
in-process and the processes drivers give the same history for the same scenario.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

CSV_FILE = "rounds.csv"
PLOT_FILE = "rounds.png"


def history_section(
    rounds: Iterable[Mapping[str, Any]],
    *,
    x: str,
    columns: Iterable[str],
    plot: Iterable[str] = (),
    about: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The report's ``history``: ``rounds`` (one record per round, each a map of column -> value),
    ``columns`` in display order (``x`` first), ``plot`` (the numeric columns worth a panel each)
    and ``about`` (column -> what it holds). A record may leave a column out (it reads as null).

    Raises ValueError naming the field when a record holds a column not listed, when ``x`` is not a
    column, or when a plotted column is not one.
    """
    columns = [str(c) for c in columns]
    if x not in columns:
        raise ValueError(f"history.x: expected one of the columns {columns}, got {x!r}")
    columns = [x] + [c for c in columns if c != x]
    if len(set(columns)) != len(columns):
        raise ValueError(f"history.columns: expected distinct names, got {columns}")
    plot = [str(c) for c in plot]
    stray = [c for c in plot if c not in columns or c == x]
    if stray:
        raise ValueError(f"history.plot: expected columns other than {x!r} among {columns}, got {stray}")
    records = []
    for index, record in enumerate(rounds):
        extra = sorted(set(record) - set(columns))
        if extra:
            raise ValueError(f"history.rounds[{index}]: columns {extra} are not among history.columns {columns}")
        records.append({c: _plain(record.get(c)) for c in columns})
    about = {c: str(t) for c, t in (about or {}).items() if c in columns}
    return {"x": x, "columns": columns, "plot": plot, "about": about, "rounds": records}


def empty_history(note: str = "this protocol records no per-round history") -> dict[str, Any]:
    """The section of a run whose exchange gave none: no rounds, only the round column."""
    section = history_section([], x="round", columns=["round"])
    section["note"] = note
    return section


def _plain(value: Any) -> Any:
    """A JSON-ready cell: numpy scalars become Python numbers; NaN and infinities become null."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_rounds_csv(history: Mapping[str, Any], path: str | Path) -> None:
    """``rounds.csv``: one row per round, one column per history column (empty cells for null)."""
    columns = list(history.get("columns") or [])
    with Path(path).open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for record in history.get("rounds") or []:
            w.writerow(["" if record.get(c) is None else record.get(c) for c in columns])


def _numbers(history: Mapping[str, Any], column: str) -> list[tuple[float, float]]:
    x = history["x"]
    points = []
    for record in history.get("rounds") or []:
        a, b = record.get(x), record.get(column)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(b, bool):
            points.append((float(a), float(b)))
    return points


def plot_rounds(history: Mapping[str, Any], path: str | Path, *, title: str) -> bool:
    """``rounds.png``: one small panel per plotted column against ``x`` (matplotlib, Agg). Returns
    False, writing nothing, when no plotted column has a number to draw (a run with no rounds)."""
    panels = [(c, pts) for c in history.get("plot") or [] if (pts := _numbers(history, c))]
    if not panels:
        return False
    from marketplace.warm_imports import wait_for_background_imports

    wait_for_background_imports()  # matplotlib.use reads a pyplot another thread may be halfway through importing
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    per_row = min(3, len(panels))
    rows = math.ceil(len(panels) / per_row)
    fig, axes = plt.subplots(rows, per_row, figsize=(4.2 * per_row, 3.2 * rows), squeeze=False)
    for axis, (column, points) in zip(axes.flat, panels):
        xs, ys = zip(*points)
        axis.plot(xs, ys, "o-" if len(points) <= 30 else "-", markersize=3)
        axis.set_xlabel(history["x"])
        axis.set_title(column, fontsize=10)
        axis.grid(alpha=0.3)
    for axis in list(axes.flat)[len(panels) :]:
        axis.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


PLOTS_ENV = "MARKETPLACE_ROUND_PLOTS"
"""Set to ``off`` (or ``0``, ``no``, ``false``) to leave ``rounds.png`` out of every run folder:
drawing it costs about 0.15 s a run, and 0.5 s in a fresh process (matplotlib's import), which
adds up over a sweep of thousands of runs or a test suite. ``rounds.csv`` is always written."""


def round_plots_wanted() -> bool:
    """Whether runs draw ``rounds.png`` (yes, unless :data:`PLOTS_ENV` turns it off)."""
    return os.environ.get(PLOTS_ENV, "on").strip().lower() not in ("off", "0", "no", "false")


def write_history_files(report: Mapping[str, Any], out: str | Path, *, plot: bool = True) -> list[str]:
    """Write ``rounds.csv`` (always) and, with ``plot``, ``rounds.png`` (:func:`write_round_plot`)
    from the report's ``history`` into the run folder ``out``; returns the names written."""
    history = report.get("history") or empty_history()
    out = Path(out)
    write_rounds_csv(history, out / CSV_FILE)
    written = [CSV_FILE]
    if plot and write_round_plot(report, out):
        written.append(PLOT_FILE)
    return written


def write_round_plot(report: Mapping[str, Any], out: str | Path) -> bool:
    """``rounds.png`` from the report's ``history`` into the run folder ``out``, when there is
    something to plot, unless :data:`PLOTS_ENV` is off; returns whether it was written. Apart from
    :func:`write_history_files` for a command that shows its report before drawing (matplotlib's
    import is the slowest part of a short command's end)."""
    if not round_plots_wanted():
        return False
    history = report.get("history") or empty_history()
    title = f"{report.get('scenario', '')} ({report.get('protocol', '')}): per-round history"
    return plot_rounds(history, Path(out) / PLOT_FILE, title=title)
