"""How a `pfds` report reads on the terminal: its head rows (agents, each sharer's spend, fidelity) and its
table of every method's error. Reads the report only, never a world; the names and labels of the methods
are shared with the sweeps."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from marketplace.reporting.absent import is_absent
from marketplace.reporting.charge import charge_rows
from marketplace.reporting.format import accountant_text, fmt, plural, relation_text

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
    spent = {k: p for k, p in (report.get("privacy") or {}).items() if isinstance(p, dict) and p.get("eps") is not None}
    ledgers = list(spent.values())
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
        rows += charge_rows(report, {k: p["eps"] for k, p in spent.items()}, stated_as="what it spent")
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
        if m and not is_absent(m):  # a reference a served session did not ask for has no row
            table.add_row(LABELS[name], fmt(m.get("mean")), fmt(m.get("consumer")))
            if m.get("note"):
                table.caption = f"{LABELS[name]}: {m['note']}"
    return [table]
