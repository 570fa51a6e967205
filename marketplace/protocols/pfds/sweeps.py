"""A `pfds` run in a sweep: the error and fidelity columns of one run (:func:`sweep_row`), the table of
the sweep's points and its plot. Reads reports and sweep summaries only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from marketplace.protocols.pfds.display import LABELS, METHODS
from marketplace.reporting.format import fmt, mean_sd, sweep_table_head
from marketplace.reporting.plots import eps_spent

sweep_headline = ("pfds_error",)
"""The columns of :func:`sweep_row` a sweep prints for each finished run: PFDS's mean error over the evaluated
agents."""


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The error and fidelity columns of one run, and ``eps_spent`` (with ``delta_spent``): the
    largest eps a sharer's ledger states (at most ``pfds.epsilon``: levels that read no data cost
    nothing)."""
    metrics = report.get("metrics") or {}
    row: dict[str, Any] = {}
    for name in METHODS:
        m = metrics.get(name) or {}
        row[f"{name}_error"] = m.get("mean")
        row[f"{name}_consumer_error"] = m.get("consumer")
    for name, f in (report.get("fidelity") or {}).items():
        row[f"{name}_size_error"] = f.get("mean_abs_size_error")
        row[f"{name}_rel_size_error"] = f.get("mean_rel_size_error")
    privacy = report.get("privacy") or {}
    eps = [p["eps"] for p in privacy.values() if isinstance(p, dict) and p.get("eps") is not None]
    row["eps_max"] = max(eps) if eps else None
    row.update(eps_spent({party: [ledger] for party, ledger in privacy.items() if party.startswith("owner-")}))
    row["sharers"] = (report.get("agents") or {}).get("sharers")
    return row


def sweep_table(summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
    """One row per sweep point: the eps a sharer actually spent (its ledger), every method's
    error and the synthetic size errors, mean±sd over repeats."""
    table = sweep_table_head(
        title,
        "mean±sd over repeats of the mean error over evaluated agents; eps spent: the largest a sharer's ledger states",
        keys,
    )
    table.add_column("ok", justify="right")
    table.add_column("eps spent", justify="right", no_wrap=True)
    for name in METHODS:
        table.add_column(LABELS[name], justify="right", no_wrap=True)
    table.add_column("size err PFDS / PFDS^-", justify="right")
    for row in summary:
        pfds_size, minus_size = (
            mean_sd(row, key, ".0f", sd=False) for key in ("pfds_size_error", "pfds_minus_size_error")
        )
        sizes = f"{pfds_size} / {minus_size}"
        table.add_row(
            *(fmt(row.get(k)) for k in keys),
            f"{row['completed']}/{row['runs']}",
            mean_sd(row, "eps_spent", ".4g"),
            *(mean_sd(row, f"{name}_error", ".3f") for name in METHODS),
            sizes,
        )
    return table


def plot_sweep(summary: list[dict[str, Any]], keys: list[str], path: Path, *, title: str) -> None:
    """Error of every method (left) and the synthetic size error of PFDS and PFDS^- (right)
    against the first swept key, or against the eps a sharer actually spent (its ledger) when
    that key is ``pfds.epsilon``."""
    from marketplace.reporting.plots import spent_axis, sweep_figure

    sweep_figure(
        summary,
        keys,
        path,
        title=title,
        x_column=spent_axis(keys, lambda key: key == "pfds.epsilon"),
        panels=[
            ("error on the test fold", [(LABELS[n], f"{n}_error", n not in ("np_agt", "np_pred")) for n in METHODS]),
            (
                "mean |synthetic size - true size| (rows)",
                [("PFDS", "pfds_size_error", True), ("PFDS^-", "pfds_minus_size_error", True)],
            ),
        ],
    )
