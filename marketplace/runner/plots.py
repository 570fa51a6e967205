"""Sweep plots: panels of method lines against the first swept key, with ±1 sd error bars."""

from __future__ import annotations

from pathlib import Path
from typing import Any

Panel = tuple[str, list[tuple[str, str | None, bool]]]
"""(y-axis label, [(method name, summary column or None for a zero line, one line per series?)])."""

_STYLES = {"protocol": "o-", "greedy": "s--", "uniform": "^:"}


def sweep_figure(summary: list[dict[str, Any]], keys: list[str], path: str | Path, *, title: str, panels: list[Panel]) -> None:
    """One panel per entry of ``panels``, x = ``keys[0]``. Methods marked per-series get one line per
    value of ``keys[1]`` (if swept); the others (baselines that do not depend on it) are drawn once."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x_key = keys[0]
    series_key = keys[1] if len(keys) > 1 else None
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in summary:
        groups.setdefault(row.get(series_key) if series_key else None, []).append(row)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    xs_all = [r[x_key] for r in summary]
    log_x = min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 100  # values spanning decades (an eps sweep)
    first = next(iter(groups))
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
        axis.set_xlabel(x_key)
        axis.set_ylabel(ylabel)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
