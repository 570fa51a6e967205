"""An `stc` run in a sweep: the cost columns of one run (:func:`sweep_row`) and what an owner's release
cost, the table of the sweep's points and its plot, against the eps spent when the swept key is a
privacy setting. Reads reports and sweep summaries only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from marketplace.reporting.format import fmt, mean_sd, sweep_table_head
from marketplace.reporting.plots import eps_spent

sweep_headline = ("cost",)
"""The columns of :func:`sweep_row` a sweep prints for each finished run: the clustering cost on the target."""


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The metric columns of one run: the costs, and ``eps_spent`` (with ``delta_spent``), the
    largest eps an owner's ledger states for its one release (under ``zcdp``, the (eps, delta)
    equivalent of its rho), next to every ledger's own ``eps[...]``."""
    m = report.get("metrics") or {}
    refs = m.get("baselines") or {}
    row = {
        "k": m.get("k"),
        "cost": m.get("cost"),
        "estimated_cost": m.get("estimated_cost"),
        "cluster_t_cost": (refs.get("cluster_t") or {}).get("cost"),
        "nonprivate_stc_cost": (refs.get("nonprivate_stc") or {}).get("cost"),
        "source_only_cost": (refs.get("source_only") or {}).get("cost"),
        "released_centers": m.get("released_centers"),
    }
    if "private_kmeans" in refs:  # only when asked, so that other sweeps keep their columns
        row["private_kmeans_cost"] = refs["private_kmeans"].get("cost")
    privacy = report.get("privacy") or {}
    row.update(eps_spent({party: [ledger] for party, ledger in privacy.items() if party.startswith("owner-")}))
    for party, ledger in privacy.items():
        if isinstance(ledger, dict) and "eps" in ledger:
            row[f"eps[{party}]"] = ledger["eps"]
    return row


def sweep_table(summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
    """One row per sweep point: the eps an owner's release actually cost (its ledger) and the
    costs, mean±sd over repeats."""
    table = sweep_table_head(
        title,
        "cost: mean±sd over repeats (lower is better); eps spent: the largest an owner's ledger states for its release",
        keys,
    )
    kmeans = any(row.get("private_kmeans_cost_mean") is not None for row in summary)
    for name in (
        "ok",
        "eps spent",
        "protocol",
        "ClusterT",
        "non-private STC",
        *(["PrivateKmeans"] if kmeans else []),
        "S alone",
    ):
        table.add_column(name, justify="right", no_wrap=True)
    for row in summary:
        table.add_row(
            *(fmt(row.get(k)) for k in keys),
            f"{row['completed']}/{row['runs']}",
            mean_sd(row, "eps_spent", ".4g"),
            mean_sd(row, "cost", ".4f"),
            mean_sd(row, "cluster_t_cost", ".4f"),
            mean_sd(row, "nonprivate_stc_cost", ".4f"),
            *([mean_sd(row, "private_kmeans_cost", ".4f")] if kmeans else []),
            mean_sd(row, "source_only_cost", ".4f", sd=False),
        )
    return table


def plot_sweep(summary: list[dict[str, Any]], keys: list[str], path: Path, *, title: str) -> None:
    """The protocol's cost and the references' against the first swept key, or against the eps an
    owner's release actually cost when that key is a privacy setting (``stc.privacy.*``)."""
    from marketplace.reporting.plots import spent_axis, sweep_figure

    sweep_figure(
        summary,
        keys,
        path,
        title=title,
        x_column=spent_axis(keys, lambda key: key.startswith("stc.privacy.")),
        panels=[
            (
                "Cost(T, S ∪ T_k) (scaled)",
                [
                    ("protocol", "cost", True),
                    ("ClusterT", "cluster_t_cost", False),
                    ("non-private STC", "nonprivate_stc_cost", False),
                    ("PrivateKmeans", "private_kmeans_cost", True),
                ],
            ),  # it spends the budget too
        ],
    )
