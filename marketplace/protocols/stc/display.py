"""How an `stc` report reads on the terminal: its head rows (the task, parsimony, each owner's ledger and
what its lifetime ledger was charged) and the table of the protocol's cost next to the references', or the
consumer's own scores with S' when nobody holds the true S. Reads the report only, never a world."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from marketplace.reporting.absent import REFERENCES_ABSENT, is_absent
from marketplace.reporting.charge import charge_rows
from marketplace.reporting.format import accountant_text, fmt, relation_text


def head_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    m = report.get("metrics") or {}
    sources = (
        "the owners' rows (their count not reported)"
        if "metrics.source_size" in (report.get(REFERENCES_ABSENT) or {})
        else f"{m.get('source_size')} source rows"
    )
    rows = [
        (
            "task",
            f"choose k = {m.get('k')} of |T| = {m.get('target_size')} target points; "
            f"{fmt(m.get('released_centers'))} released centres from {sources}",
        ),
        ("parsimony", "the curator saw no source row (T and private releases only)"),
    ]
    stated: dict[str, float | None] = {}
    rhos: dict[str, float | None] = {}
    for party, ledger in (report.get("privacy") or {}).items():
        if isinstance(ledger, dict) and "eps" in ledger:
            steps = ledger.get("steps") or []
            rho = sum(st.get("rho", 0) * st.get("count", 1) for st in steps if "rho" in st)
            how = accountant_text(ledger)
            cost = (
                f"rho = {fmt(rho)} (eps = {fmt(ledger['eps'])} at delta = {fmt(ledger['delta'])}, {how})"
                if rho
                else f"eps = {fmt(ledger['eps'])} ({how})"
            )
            rows.append(("privacy", f"{party}: {cost}; {relation_text(ledger)}"))
            stated[party], rhos[party] = ledger["eps"], rho or None
    return rows + charge_rows(report, stated, rhos)


def tables(report: dict[str, Any]) -> list[Table]:
    m = report.get("metrics") or {}
    if is_absent(m.get("baselines")):  # nobody holds the true S: the consumer's own scores, with S'
        table = Table(
            title=f"choosing k = {m.get('k', '-')} of T, scored by the consumer with the owners' releases S' "
            "(the true S is nobody's to score with here)",
            title_justify="left",
            caption="cost: Cost(T, ·), the mean distance of a target point to its nearest centre (scaled "
            "space, radius 1/2); lower is better. Under the true S, and the references: not computed "
            "(references_absent in report.json)",
            caption_justify="left",
        )
        table.add_column("method")
        table.add_column("cost", justify="right")
        table.add_row("protocol, with S' (Cost(T, S' ∪ T_k))", fmt(m.get("estimated_cost")))
        table.add_row("the releases alone (Cost(T, S'), k = 0)", fmt(m.get("released_only_cost")))
        table.add_row("the chosen points alone (Cost(T, T_k))", fmt(m.get("chosen_only_cost")))
        table.add_row("protocol, with the true S", "not computed", style="dim")
        table.add_row("references (ClusterT, non-private STC, S alone, ...)", "not computed", style="dim")
        return [table]
    table = Table(
        title=f"choosing k = {m.get('k', '-')} of T, scored with the true S",
        title_justify="left",
        caption="cost: Cost(T, S ∪ T_k), the mean distance of a target point to its nearest centre "
        "(scaled space, radius 1/2); lower is better",
        caption_justify="left",
    )
    table.add_column("method")
    table.add_column("cost", justify="right")
    table.add_row("protocol (private S')", fmt(m.get("cost")))
    names = {
        "cluster_t": "ClusterT (ignores S)",
        "nonprivate_stc": "non-private STC (true S)",
        "source_only": "S alone (k = 0)",
        "private_kmeans": "PrivateKmeans (DP k-means of S as S')",
    }
    for name, ref in (m.get("baselines") or {}).items():
        table.add_row(names.get(name, name), fmt(ref.get("cost")))
    if m.get("estimated_cost") is not None:
        table.add_row("  (the consumer's own estimate, with S')", fmt(m["estimated_cost"]), style="dim")
    return [table]
