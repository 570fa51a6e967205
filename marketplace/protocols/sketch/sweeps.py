"""A `sketch` run in a sweep: the columns of one run (:func:`sweep_row`), the table of the sweep's
points and its plot, one panel per task, against the eps an owner's release actually cost when the
swept key is a privacy setting. Reads reports and sweep summaries only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from marketplace.reporting.format import fmt, mean_sd, sweep_table_head
from marketplace.reporting.plots import eps_spent

PRIVACY_KEYS = frozenset({"sketch.epsilon", "sketch.mechanism", "sketch.delta", "sketch.numerator_share"})
"""Swept keys that set what an owner's release costs: its sweep is plotted against the eps spent."""


SWEEP_COLUMNS = ("moment1_mre", "moment2_mre", "cdf_mae", "covariance_rel_fro", "count_fraction_mae", "count_mre")


sweep_headline = ("moment1_mre", "logistic_auc")
"""The columns of :func:`sweep_row` a sweep prints for each finished run: the first-moment error and the logistic
model's AUC."""


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The error columns of one run, and ``eps_spent`` (with ``delta_spent``): the largest eps an
    owner's ledger states for its one release (``owner_eps``: the largest of every ledger's)."""
    metrics = report.get("metrics") or {}
    errors = metrics.get("errors") or {}
    baselines = metrics.get("logistic_baselines") or {}
    check = (report.get("ranking") or {}).get("check") or {}
    privacy = report.get("privacy") or {}
    eps = [e["eps"] for e in privacy.values() if isinstance(e, dict) and e.get("eps") is not None]
    row = {column: errors.get(column) for column in SWEEP_COLUMNS}
    row.update(eps_spent({party: [ledger] for party, ledger in privacy.items() if party.startswith("owner-")}))
    row.update(
        {
            "logistic_auc": metrics.get("logistic_auc"),
            "dp_erm_auc": baselines.get("dp_erm_auc"),
            "non_private_auc": baselines.get("non_private_auc"),
            "ranking_spearman": check.get("spearman"),
            "lambda": (report.get("estimates") or {}).get("lambda"),
            "owner_eps": max(eps) if eps else None,
            "released": len(report.get("released") or []),
            "collapsed": bool((metrics.get("signal") or {}).get("collapsed")),
        }
    )
    return row


def sweep_table(summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
    """One row per sweep point: the eps an owner's release actually cost (its ledger) and the
    errors, mean±sd over repeats."""
    table = sweep_table_head(
        title,
        "mean±sd over repeats; errors in unit-box coordinates; eps spent: the largest an "
        "owner's ledger states for its release",
        keys,
    )
    shown = [
        ("eps spent", "eps_spent"),
        ("mom1 MRE", "moment1_mre"),
        ("CDF MAE", "cdf_mae"),
        ("cov rel", "covariance_rel_fro"),
        ("count MAE", "count_fraction_mae"),
        ("AUC", "logistic_auc"),
        ("DP-ERM AUC", "dp_erm_auc"),
        ("rank rho", "ranking_spearman"),
    ]
    for name in ("ok", *(name for name, _ in shown)):
        table.add_column(name, justify="right", no_wrap=True)
    for row in summary:
        cells = [f"{row['completed']}/{row['runs']}"] + [mean_sd(row, column, ".3g") for _, column in shown]
        table.add_row(*(fmt(row.get(k)) for k in keys), *cells)
    return table


def plot_sweep(summary: list[dict[str, Any]], keys: list[str], path: Path, *, title: str) -> None:
    """One panel per task (error against the first swept key, log-log when it spans decades), one
    line per value of the second swept key (e.g. the map kind); plus AUC when it was measured.
    When the first swept key is a privacy setting (``PRIVACY_KEYS``), x is the eps an owner's
    release actually cost (``eps_spent``, its ledger) instead of the key."""
    import matplotlib

    from marketplace.reporting.plots import EPS_SPENT_LABEL, spent_axis

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [
        ("first moment MRE", "moment1_mre"),
        ("second moment MRE", "moment2_mre"),
        ("CDF MAE", "cdf_mae"),
        ("covariance rel. error (Frobenius)", "covariance_rel_fro"),
        ("count fraction MAE", "count_fraction_mae"),
    ]
    if any(r.get("logistic_auc_mean") is not None for r in summary):
        panels.append(("logistic regression AUC", "logistic_auc"))
    panels = [p for p in panels if any(r.get(f"{p[1]}_mean") is not None for r in summary)]
    x_key, series_key = keys[0], (keys[1] if len(keys) > 1 else None)
    x_label = x_key
    if spent_axis(keys, PRIVACY_KEYS.__contains__):
        x_key, x_label = "eps_spent_mean", f"{EPS_SPENT_LABEL}\n(swept: {keys[0]})"
        summary = [row for row in summary if row.get(x_key) is not None]  # exact sums (no eps) have no x
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in summary:
        groups.setdefault(row.get(series_key) if series_key else None, []).append(row)
    xs_all = [r[x_key] for r in summary] or [1.0]
    log_x = min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 100
    cols = min(3, max(1, len(panels)))
    rows_n = -(-max(1, len(panels)) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.4 * cols, 3.6 * rows_n), squeeze=False)
    for axis in axes.flat[len(panels) :]:
        axis.set_visible(False)
    for axis, (label, column) in zip(axes.flat, panels):
        for series, rows in groups.items():
            rows = sorted(rows, key=lambda r: r[x_key])
            pts = [
                (r[x_key], r.get(f"{column}_mean"), r.get(f"{column}_sd") or 0.0)
                for r in rows
                if r.get(f"{column}_mean") is not None
            ]
            if pts:
                x, m, sd = zip(*pts)
                axis.errorbar(x, m, yerr=sd, fmt="o-", capsize=3, label=str(series) if series_key else "M²M")
        if column == "logistic_auc":
            for name, style in (("dp_erm_auc", "s--"), ("non_private_auc", "k:")):
                rows = sorted(next(iter(groups.values()), []), key=lambda r: r[x_key])
                refs = [(r[x_key], r.get(f"{name}_mean")) for r in rows if r.get(f"{name}_mean") is not None]
                if refs:
                    axis.plot(*zip(*refs), style, label=name.replace("_auc", "").replace("_", " "))
        elif all(r.get(f"{column}_mean") is None or r[f"{column}_mean"] > 0 for r in summary):
            axis.set_yscale("log")
        if log_x:
            axis.set_xscale("log")
        axis.set_xlabel(x_label)
        axis.set_title(label, fontsize=9)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
