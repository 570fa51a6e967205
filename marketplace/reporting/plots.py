"""Sweep plots: panels of method lines against the first swept key, with ±1 sd error bars."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Panel = tuple[str, list[tuple[str, str | None, bool]]]
"""(y-axis label, [(method name, summary column or None for a zero line, one line per series?)])."""

_STYLES = {"protocol": "o-", "greedy": "s--", "uniform": "^:"}


EPS_SPENT = "eps_spent"
"""The sweep column every protocol fills with the eps an owner gave up in the run: every ledger in
the run's report that bounds what some observer learns of the owner's data, composed (basic
composition), for the owner that gave up most; ``sweep_row`` records it with :func:`eps_spent`."""
EPS_SPENT_LABEL = "eps an owner gave up (the run's ledgers that bound it, composed)"


def eps_spent(ledgers: Mapping[str, list[dict[str, Any]]] | list[dict[str, Any]]) -> dict[str, float | None]:
    """``eps_spent`` and ``delta_spent`` of one run: for each owner, the ledgers of the report that
    bound what an observer learns of its data (``{owner: [ledger, ...]}``), composed by basic
    composition (their eps added, their deltas added), and the largest such total over the owners,
    with its delta (None when no ledger states an eps). A list instead of a mapping holds one
    ledger per owner (each owner bounded by that ledger alone): the largest of them.

    A figure for one ledger alone, where an owner is bounded by several, would understate what the
    owner gave up; tables and plots show this total (or each ledger, labelled)."""
    per_owner = ledgers if isinstance(ledgers, Mapping) else {str(i): [entry] for i, entry in enumerate(ledgers)}
    totals = []
    for entries in per_owner.values():
        stated = [entry for entry in entries if isinstance(entry, dict) and entry.get("eps") is not None]
        if stated:
            totals.append(
                (math.fsum(entry["eps"] for entry in stated), math.fsum(entry.get("delta") or 0.0 for entry in stated))
            )
    if not totals:
        return {EPS_SPENT: None, "delta_spent": None}
    eps, delta = max(totals)
    return {EPS_SPENT: eps, "delta_spent": delta}


def spent_axis(keys: list[str], is_privacy_key: Callable[[str], bool]) -> str | None:
    """``EPS_SPENT`` when the sweep's x key (``keys[0]``) sets privacy (then quality is plotted
    against the eps actually spent, not against the knob), else None (x = the key itself)."""
    return EPS_SPENT if keys and is_privacy_key(keys[0]) else None


def sweep_figure(
    summary: list[dict[str, Any]],
    keys: list[str],
    path: str | Path,
    *,
    title: str,
    panels: list[Panel],
    x_column: str | None = None,
    x_label: str | None = None,
) -> None:
    """One panel per entry of ``panels``, x = ``keys[0]``, or the summary column ``x_column`` (its
    mean over repeats; e.g. ``EPS_SPENT``) when given, labelled ``x_label`` (default: the column,
    or :data:`EPS_SPENT_LABEL`). Methods marked per-series get one line per value of ``keys[1]`` (if
    swept); the others (baselines that do not depend on it) are drawn once."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series_key = keys[1] if len(keys) > 1 else None
    if x_column is not None:
        x_key = f"{x_column}_mean"
        summary = [row for row in summary if row.get(x_key) is not None]  # runs that stated no spend have no x
        x_label = f"{x_label or (EPS_SPENT_LABEL if x_column == EPS_SPENT else x_column)}\n(swept: {keys[0]})"
    else:
        x_key = x_label = keys[0]
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in summary:
        groups.setdefault(row.get(series_key) if series_key else None, []).append(row)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    xs_all = [r[x_key] for r in summary] or [1.0]
    log_x = min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 100  # values spanning decades (an eps sweep)
    first = next(iter(groups), None)
    for axis, (ylabel, methods) in zip(axes[0], panels):
        for series, rows in groups.items():
            rows = sorted(rows, key=lambda r: r[x_key])
            xs = [r[x_key] for r in rows]
            for name, column, per_series in methods:
                if series_key and not per_series and series != first:
                    continue
                label = name + (f" ({series_key.rsplit('.', 1)[-1]}={series})" if series_key and per_series else "")
                style = _STYLES.get(name, "d-.")
                if column is None:
                    axis.plot(xs, [0.0] * len(xs), style, label=label)
                    continue
                points = [(x, r.get(f"{column}_mean"), r.get(f"{column}_sd") or 0.0) for x, r in zip(xs, rows)]
                points = [p for p in points if p[1] is not None]
                if points:
                    x, m, s = zip(*points)
                    axis.errorbar(x, m, yerr=s, fmt=style, capsize=3, label=label)
        if log_x:
            axis.set_xscale("log")
        axis.set_xlabel(x_label)
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
