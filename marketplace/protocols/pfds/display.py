"""How a `pfds` report reads on the terminal and in a sweep: its head rows, its error table, one sweep
row per run, the sweep table and the sweep plot. Reads the report only, never a world."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from marketplace.reporting.format import accountant_text, fmt, mean_sd, plural, relation_text, sweep_table_head
from marketplace.reporting.plots import eps_spent

METHODS = ("pfds", "np_agt", "dp_pred", "pfds_s", "pfds_minus", "np_pred")


LABELS = {
    "pfds": "PFDS",
    "np_agt": "NP-Agt",
    "dp_pred": "DP-Pred",
    "pfds_s": "PFDS(s)",
    "pfds_minus": "PFDS^-",
    "np_pred": "NP-Pred",
}


def head_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    agents = report.get("agents") or {}
    receivers = f" + {plural(agents['receivers'], 'receiving owner')}" if agents.get("receivers") else ""
    sharers = plural(agents["sharers"], "sharer") if isinstance(agents.get("sharers"), int) else "- sharers"
    rows = [
        (
            "agents",
            f"{sharers}{receivers} + the consumer; test fold of {agents.get('test_rows', '-')} rows; "
            f"error = {report.get('error_measure', '-')}",
        )
    ]
    ledgers = [p for p in (report.get("privacy") or {}).values() if isinstance(p, dict) and p.get("eps") is not None]
    if ledgers:
        eps = [p["eps"] for p in ledgers]
        delta = max((p.get("delta") or 0.0) for p in ledgers)
        how = "; ".join(dict.fromkeys(accountant_text(p) for p in ledgers))
        rows.append(
            (
                "privacy",
                f"each sharer: eps spent in [{fmt(min(eps))}, {fmt(max(eps))}], delta "
                f"{'= 0 (pure DP)' if delta == 0 else f'up to {fmt(delta)}'} ({how}; {relation_text(ledgers[0])})",
            )
        )
    fidelity = report.get("fidelity") or {}
    for name, f in fidelity.items():
        if f.get("mean_abs_size_error") is not None:
            rows.append(
                (
                    "fidelity",
                    f"{LABELS[name]}: mean |synthetic size - true size| = {fmt(f['mean_abs_size_error'])} rows "
                    f"({fmt(100 * f['mean_rel_size_error'])}%)",
                )
            )
    if report.get("flagged"):
        rows.append(("flagged", ", ".join(report["flagged"])))
    return rows


def tables(report: dict[str, Any]) -> list[Table]:
    table = Table(
        title=f"error on the test fold ({report.get('error_measure', '')}); mean over the evaluated agents",
        title_justify="left",
    )
    table.add_column("method")
    table.add_column("mean error", justify="right")
    table.add_column("consumer", justify="right")
    for name in METHODS:
        m = (report.get("metrics") or {}).get(name)
        if m:
            table.add_row(LABELS[name], fmt(m.get("mean")), fmt(m.get("consumer")))
            if m.get("note"):
                table.caption = f"{LABELS[name]}: {m['note']}"
    return [table]


sweep_headline = ("pfds_error",)
"""The columns of :func:`sweep_row` a sweep prints for each finished run: PFDS's mean error over the evaluated agents."""


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
        sizes = f"{mean_sd(row, 'pfds_size_error', '.0f', sd=False)} / {mean_sd(row, 'pfds_minus_size_error', '.0f', sd=False)}"
        table.add_row(
            *(fmt(row.get(k)) for k in keys),
            f"{row['completed']}/{row['runs']}",
            mean_sd(row, "eps_spent", ".4g"),
            *(mean_sd(row, f"{name}_error", ".3f") for name in METHODS),
            sizes,
        )
    return table


def plot_sweep(summary: list[dict[str, Any]], keys: list[str], path, *, title: str) -> None:
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
