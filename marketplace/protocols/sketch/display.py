"""How a `sketch` report reads on the terminal: its head rows (map, parsimony, each owner's ledger and
what its lifetime ledger was charged, the ranking) and its tables (the merged sketch's errors, or its
gap to the consumer's own target when nobody holds the truth, and the logistic model's AUC). Reads the
report only, never a world."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from marketplace.reporting.absent import is_absent
from marketplace.reporting.charge import charge_rows
from marketplace.reporting.format import fmt, ledger_text, plural


def head_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    m = report.get("map") or {}
    rows = [
        (
            "sketch",
            f"{m.get('kind')} map, m = {m.get('n_features')}, d = {m.get('dim')}; "
            f"{plural(len(report.get('released') or []), 'owner')} released ({report.get('end_reason') or '-'})",
        )
    ]
    pars = report.get("parsimony") or {}
    rows.append(
        (
            "parsimony",
            f"curator saw {pars.get('points_seen', 0)} raw points ({pars.get('sketches_received', 0)} sketches)",
        )
    )
    for name, entry in (report.get("privacy") or {}).items():
        if _spent(entry):
            rows.append(("privacy", ledger_text(name, entry, mechanism=entry.get("mechanism"))))
    rows += charge_rows(report, {k: e["eps"] for k, e in (report.get("privacy") or {}).items() if _spent(e)})
    ranking = report.get("ranking") or {}
    check = ranking.get("check") or {}
    if ranking and is_absent(check):  # nobody holds the owners' rows: no true order to compare with
        rows.append(
            (
                "ranking",
                f"by sketch MMD^2 to the consumer's data: {', '.join(ranking.get('order', []))}; "
                f"true order not computed (references_absent)",
            )
        )
    elif ranking:
        rows.append(
            (
                "ranking",
                f"by sketch MMD^2: {', '.join(ranking.get('order', []))}; true: "
                f"{', '.join(check.get('true_order', []))}; "
                f"Spearman {fmt(check.get('spearman'))}",
            )
        )
    from marketplace.protocols.sketch.consumer import projection_notes

    projections = (report.get("estimates") or {}).get("projections") or {}
    for line in projection_notes(projections, (report.get("map") or {}).get("attributes")):
        rows.append(("projected", line))
    signal = (report.get("metrics") or {}).get("signal") or {}
    if signal.get("collapsed"):
        rows.append(
            (
                "COLLAPSED",
                f"the noise swamps the merged release: {signal.get('why')}; every estimate is close to what the "
                "prior alone gives, so its errors are not a quality (raise sketch.epsilon or pool more rows)",
            )
        )
    if report.get("flagged"):
        rows.append(("flagged", ", ".join(f"{k}: {v}" for k, v in report["flagged"].items())))
    if report.get("files"):
        rows.append(("sketch file", report["files"]["sketches"]["merged"]))
    return rows


def _spent(entry: Any) -> bool:
    """Whether a ``privacy`` entry is a ledger that states an eps."""
    return isinstance(entry, dict) and entry.get("eps") is not None


ERROR_METRICS = {
    "moment": "mean over attributes of |estimate - truth| / |truth| of the raw moment (absolute where the truth is 0)",
    "cdf_mae": "mean absolute error of the CDF values, over attributes and points",
    "covariance_rel_fro": "||estimate - truth||_F / ||truth||_F of the covariance matrix",
    "count_fraction_mae": "mean absolute error of the share of records inside each count box",
    "count_mre": "mean relative error of those shares, over boxes that hold at least one record",
    "count_total_rel": "|estimated size - size| / size, from the sketch's noisy count",
}
"""What each error metric of the report measures (the table shows it next to the value)."""


def error_meaning(name: str) -> str:
    if name.startswith("moment") and name.endswith("_mre"):
        return f"order {name[len('moment') : -len('_mre')]}: " + ERROR_METRICS["moment"]
    return ERROR_METRICS.get(name, "")


def tables(report: dict[str, Any]) -> list[Table]:
    metrics = report.get("metrics") or {}
    if is_absent(metrics.get("errors")):  # nobody holds the owners' rows: no truth, the consumer's own target instead
        table = Table(
            title="M²M estimates from the merged sketch against the consumer's own target (unit box): how far "
            "the owners' data lie from what the consumer wants, not an estimation error; lower is closer",
            title_justify="left",
            caption="errors against the truth: not computed (the truth needs every "
            "owner's rows, which nobody holds here; references_absent in report.json)",
            caption_justify="left",
        )
        table.add_column("statistic")
        table.add_column("gap", justify="right")
        table.add_column("what the gap is")
        table.add_row(
            "merged MMD^2",
            fmt(metrics.get("merged_mmd2")),
            "sketch estimate of MMD^2 between the owners' merged data and the consumer's target",
        )
        for name, value in (metrics.get("target_gap") or {}).items():
            table.add_row(name, fmt(value), error_meaning(name).replace("truth", "target"))
    else:
        table = Table(
            title="M²M estimates from the merged sketch against the truth (union of the owners' data, unit box); "
            "lower is better",
            title_justify="left",
        )
        table.add_column("statistic")
        table.add_column("error", justify="right")
        table.add_column("what the error is")
        for name, value in (metrics.get("errors") or {}).items():
            table.add_row(name, fmt(value), error_meaning(name))
    out = [table]
    if metrics.get("logistic_auc") is not None:
        auc = Table(
            title="logistic regression of the label: AUC on the consumer's test set (higher is better)",
            title_justify="left",
        )
        auc.add_column("model")
        auc.add_column("AUC", justify="right")
        auc.add_row("from the sketch (M²M)", fmt(metrics["logistic_auc"]))
        if is_absent(metrics.get("logistic_baselines")):
            auc.add_row("centralized references", "not computed", style="dim")
        for key, value in (
            {} if is_absent(metrics.get("logistic_baselines")) else metrics.get("logistic_baselines") or {}
        ).items():
            if not key.endswith("note"):
                auc.add_row(key.replace("_auc", "").replace("_", " "), fmt(value))
        out.append(auc)
    return out
