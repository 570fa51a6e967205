"""A `summarize` run in a sweep: the metric columns of one run (:func:`sweep_row`, the protocol against
the non-private greedy rule, like with like), what an owner gave up (its ledgers composed), the table
of the sweep's points and Figure 1's plot. Reads reports and sweep summaries only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from marketplace.protocols.summarize.display import private_run
from marketplace.protocols.summarize.metrics import increase_pct
from marketplace.reporting.format import fmt, mean_sd, sweep_table_head
from marketplace.reporting.plots import eps_spent

sweep_headline = ("mmd2", "accuracy")
"""The columns of :func:`sweep_row` a sweep prints for each finished run: MMD^2 of the summary and the consumer's
accuracy."""


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The metric columns of one run. "Greedy" is the non-private protocol rule: in a private run the
    runner's ``non_private_greedy`` baseline, in a non-private run the protocol itself. Each
    percentage compares like with like: ``*_with_seed_set_increase_over_greedy_pct`` the MMD^2 of
    the seed set plus the summary against greedy's (the objective greedy minimizes),
    ``*_alone_increase_over_greedy_pct`` the summaries alone (greedy's summary alone need not be
    good: it balances the seed set, so a method may beat it there without beating greedy).
    ``eps_spent`` (and ``delta_spent``) is what an owner gave up over the run: the ledgers that
    bound what the other owners learn of its data (:func:`owner_ledgers`: ``D_s`` and ``auction``),
    composed by basic composition (None in a non-private run); ``eps[...]`` are every ledger's
    totals, ``eps[D_s]`` the one ``summarize.privacy.total_epsilon`` sets."""
    metrics = report.get("metrics") or {}
    baselines = metrics.get("baselines") or {}
    greedy = baselines["non_private_greedy"] if "non_private_greedy" in baselines else metrics
    uniform = baselines.get("uniform") or {}
    exact = baselines.get("exact_greedy") or {}
    parsimony = report.get("parsimony") or {}
    row = {
        "rounds": len(report.get("selection") or []),
        "mmd2": metrics.get("mmd2"),
        "accuracy": metrics.get("accuracy"),
        "mmd2_with_seed_set": metrics.get("mmd2_with_seed_set"),
        "greedy_mmd2_with_seed_set": greedy.get("mmd2_with_seed_set"),
        "mmd2_with_seed_set_increase_over_greedy_pct": increase_pct(
            metrics.get("mmd2_with_seed_set"), greedy.get("mmd2_with_seed_set")
        ),
        "mmd2_alone_increase_over_greedy_pct": increase_pct(metrics.get("mmd2"), greedy.get("mmd2")),
        "greedy_mmd2": greedy.get("mmd2"),
        "greedy_accuracy": greedy.get("accuracy"),
        "uniform_mmd2": uniform.get("mmd2"),
        "uniform_accuracy": uniform.get("accuracy"),
        "uniform_mmd2_with_seed_set": uniform.get("mmd2_with_seed_set"),
        "uniform_mmd2_with_seed_set_increase_over_greedy_pct": increase_pct(
            uniform.get("mmd2_with_seed_set"), greedy.get("mmd2_with_seed_set")
        ),
        "uniform_mmd2_alone_increase_over_greedy_pct": increase_pct(uniform.get("mmd2"), greedy.get("mmd2")),
        "exact_greedy_mmd2": exact.get("mmd2"),
        "exact_greedy_accuracy": exact.get("accuracy"),
        "rho": parsimony.get("rho"),
        "rho_embeddings": parsimony.get("rho_embeddings"),
    }
    privacy = report.get("privacy") or {}
    row.update(eps_spent({"each owner": list(owner_ledgers(privacy).values())} if private_run(report) else {}))
    row.update(
        {
            f"eps[{name}]": entry.get("eps")
            for name, entry in privacy.items()
            if isinstance(entry, dict) and "eps" in entry
        }
    )
    return row


def owner_ledgers(privacy: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ledgers of a private run that bound what an owner gives up (towards the other owners:
    :func:`owner_exposure` names them), by name: every ledger with a figure but the consumer's
    ``consumer:D_v``."""
    from marketplace.protocols.summarize.private_curator import VALIDATION

    return {
        name: entry
        for name, entry in privacy.items()
        if name != VALIDATION and isinstance(entry, dict) and "eps" in entry
    }


OWNER_EPS = "owner eps (D_s + auction)"
"""The sweep table's column of ``eps_spent``: an owner's ledgers composed, and each of them."""


def _owner_eps(row: dict[str, Any]) -> str:
    """``2.6 = 2 + 0.6``: an owner's eps (mean±sd over repeats), then the ``D_s`` and ``auction``
    ledgers' means it adds up."""
    total = mean_sd(row, "eps_spent", ".4g")
    if total == "-":
        return total
    return f"{total} = {mean_sd(row, 'eps[D_s]', '.4g', sd=False)} + {mean_sd(row, 'eps[auction]', '.4g', sd=False)}"


def sweep_table(summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
    """One row per sweep point: the eps an owner gave up (``eps_spent``: the ``D_s`` and ``auction``
    ledgers composed) and each of the two ledgers, the protocol's MMD^2 with the seed set (as % over
    greedy's MMD^2 with the seed set) and accuracy, mean±sd over repeats, next to the means of
    greedy and uniform (runs.csv / summary.csv have everything, the summaries-alone percentages too)."""
    table = sweep_table_head(
        title,
        "protocol: mean±sd over repeats; baselines: means; % = increase in MMD^2 of "
        "seed set + summary over greedy's seed set + summary (the objective greedy minimizes)",
        keys,
    )
    for name in ("ok", "% (with seed)", "accuracy", "greedy acc", "uniform % (with seed)", "uniform acc", "rho"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column(OWNER_EPS, justify="right", overflow="fold")
    for row in summary:
        table.add_row(
            *(fmt(row.get(k)) for k in keys),
            f"{row['completed']}/{row['runs']}",
            mean_sd(row, "mmd2_with_seed_set_increase_over_greedy_pct", ".0f"),
            mean_sd(row, "accuracy", ".3f"),
            mean_sd(row, "greedy_accuracy", ".3f", sd=False),
            mean_sd(row, "uniform_mmd2_with_seed_set_increase_over_greedy_pct", ".0f", sd=False),
            mean_sd(row, "uniform_accuracy", ".3f", sd=False),
            mean_sd(row, "rho", ".2f", sd=False),
            _owner_eps(row),
        )
    return table


def plot_sweep(summary: list[dict[str, Any]], keys: list[str], path: Path, *, title: str) -> None:
    """Figure 1's layout: % increase in MMD^2 of seed set + summary over greedy's seed set + summary
    (left; the objective greedy minimizes, like with like) and accuracy (right) against the first
    swept key, or against the eps an owner gave up (``eps_spent``: the ``D_s`` and ``auction``
    ledgers composed, so the axis never shows D_s's share alone) when that key is a privacy setting
    (``summarize.privacy.*``), one line per method (and per value of a second swept key, if any),
    with ±1 sd bars."""
    from marketplace.reporting.plots import spent_axis, sweep_figure

    x_column = spent_axis(keys, lambda key: key.startswith("summarize.privacy."))
    x_label = "eps an owner gave up: D_s + auction ledgers (basic composition)" if x_column else None
    sweep_figure(
        summary,
        keys,
        path,
        title=title,
        x_column=x_column,
        x_label=x_label,
        panels=[
            (
                "% increase in MMD$^2$(seed set + summary)\nover greedy's seed set + summary",
                [
                    ("protocol", "mmd2_with_seed_set_increase_over_greedy_pct", True),
                    ("greedy", None, False),
                    ("uniform", "uniform_mmd2_with_seed_set_increase_over_greedy_pct", False),
                ],
            ),
            (
                "linear-SVM accuracy (target test set)",
                [
                    ("protocol", "accuracy", True),
                    ("greedy", "greedy_accuracy", False),
                    ("uniform", "uniform_accuracy", False),
                ],
            ),
        ],
    )
