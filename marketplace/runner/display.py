"""The human side of a run: live round progress and the summary table at the end."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


@contextmanager
def round_progress(console: Console, label: str) -> Iterator[Callable[[int, int], None]]:
    """A callback ``(done, total)`` that draws a live bar on a terminal, or prints plain log lines
    (about every tenth of the run) when the output is a pipe or a file."""
    if console.is_terminal:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console, transient=True) as progress:
            task = progress.add_task(label, total=None)

            def update(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            yield update
        return
    state = {"next": 0}

    def plain(done: int, total: int) -> None:
        if done >= state["next"] or done == total:
            print(f"{label}: round {done}/{total}", file=sys.stderr, flush=True)
            state["next"] = done + max(1, total // 10)

    yield plain


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def summary_tables(report: dict[str, Any]) -> list[Table]:
    """Run overview, quality against the references, and traffic per party."""
    status = report["status"]
    head = Table(title=f"{report['scenario']} ({report['protocol']}, seed {report['seed']}, driver {report['driver']})",
                 show_header=False, title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    head.add_row("status", f"[green]{status}[/]" if status == "completed" else f"[red]{status}[/]")
    for failure in report.get("failures", []):
        head.add_row("failure", failure)
    pars = report.get("parsimony") or {}
    head.add_row("rounds", f"{len(report.get('selection', []))} ({report.get('end_reason') or '-'})")
    sizes = f"|D_s| = {pars.get('summary_size', '-')}, |D_v| = {pars.get('validation_size', '-')}"
    if pars.get("embeddings_seen"):  # a less-trusted curator: embeddings instead of points
        head.add_row("parsimony", f"rho = {_fmt(pars.get('rho'))}, over embeddings {_fmt(pars.get('rho_embeddings'))}  "
                     f"(less-trusted curator saw {pars.get('points_seen', '-')} raw points and "
                     f"{pars['embeddings_seen']} h1 embeddings; {sizes})")
    else:
        head.add_row("parsimony", f"rho = {_fmt(pars.get('rho'))}  (curator saw {pars.get('points_seen', '-')} points; {sizes})")
    msgs = report["messages"]
    head.add_row("messages", f"{msgs['total']} ({msgs['bytes'] / 1024:.1f} KiB), heartbeats {msgs['heartbeats']['sent']}, "
                 f"sent/received agree: {msgs['consistency']['agree']}")
    t = report["timing"]
    head.add_row("time", f"wall {t['wall_s']:.2f} s; compute {t['compute_s']:.2f} s, transport {t['transport_s']:.3f} s (summed over parties)")
    replay = report.get("checks", {}).get("central_replay", {})
    if replay.get("applicable", True):
        head.add_row("check", f"selection equals the central replay of the protocol rule: {replay.get('matches')}")
    private = report.get("config", {}).get("summarize", {}).get("privacy", {}).get("enabled", False)
    if private:
        for name, ledger in report.get("privacy", {}).items():
            if isinstance(ledger, dict) and "eps" in ledger:
                head.add_row("privacy", f"{name}: eps = {_fmt(ledger['eps'])}, delta = {_fmt(ledger['delta'])} ({ledger.get('theorem')})")
    if report.get("dropouts"):
        head.add_row("dropouts", ", ".join(f"{k} (round {v['round']})" for k, v in report["dropouts"].items()))
    if report.get("flagged"):
        head.add_row("flagged", ", ".join(report["flagged"]))

    quality = Table(title="summary quality: exact-kernel MMD^2 to D_v of the summary alone and with the public seed set "
                          "(what the greedy rules minimize); accuracy on the consumer's test set", title_justify="left")
    quality.add_column("summary")
    quality.add_column("MMD^2 to D_v", justify="right")
    quality.add_column("with seed set", justify="right")
    quality.add_column("linear-SVM accuracy", justify="right")
    m = report["metrics"]
    label = "protocol (private)" if private else "protocol (non-private greedy)"
    quality.add_row(label, _fmt(m.get("mmd2")), _fmt(m.get("mmd2_with_seed_set")), _fmt(m.get("accuracy")))
    for name, b in m.get("baselines", {}).items():
        quality.add_row(name.replace("_", " "), _fmt(b.get("mmd2")), _fmt(b.get("mmd2_with_seed_set")), _fmt(b.get("accuracy")))
    if m.get("mmd2_increase_over_greedy_pct") is not None:
        quality.caption = f"private MMD^2 is {m['mmd2_increase_over_greedy_pct']:+.1f}% against the non-private greedy"

    parties = Table(title="parties", title_justify="left")
    for col in ("party", "pid", "status", "sent", "received", "KiB sent", "value"):
        parties.add_column(col, justify="right" if col not in ("party", "status") else "left")
    value = report.get("value") or {}
    for p in report["parties"]:
        bp = msgs["by_party"].get(p["id"], {})
        parties.add_row(p["id"], _fmt(p.get("pid")), p.get("status") or "-", _fmt(bp.get("sent", 0)), _fmt(bp.get("received", 0)),
                        f"{bp.get('bytes_sent', 0) / 1024:.1f}", _fmt(value.get(p["id"])))
    return [head, quality, parties]


def print_summary(console: Console, report: dict[str, Any], out_dir: str) -> None:
    for table in summary_tables(report):
        console.print(table)
    console.print(f"report: {out_dir}/report.json  (messages.csv, scenario.resolved.yaml, logs/)")


def _mean_sd(row: dict[str, Any], column: str, fmt: str) -> str:
    mean, sd = row.get(f"{column}_mean"), row.get(f"{column}_sd")
    if mean is None:
        return "-"
    return f"{mean:{fmt}}±{sd:{fmt}}" if sd else f"{mean:{fmt}}"


def sweep_table(summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
    """One row per sweep point: the protocol's MMD^2 (as % over greedy) and accuracy, mean±sd over
    repeats, next to the means of greedy and uniform (runs.csv / summary.csv have everything)."""
    table = Table(title=title, title_justify="left", caption="protocol: mean±sd over repeats; baselines: means; "
                  "% = MMD^2 increase over greedy", caption_justify="left")
    for key in keys:
        table.add_column(key.rsplit(".", 1)[-1], no_wrap=True)
    for name in ("ok", "%", "accuracy", "greedy acc", "uniform %", "uniform acc", "rho"):
        table.add_column(name, justify="right", no_wrap=True)
    for row in summary:
        mean = lambda column, fmt: "-" if row.get(f"{column}_mean") is None else f"{row[f'{column}_mean']:{fmt}}"  # noqa: E731
        table.add_row(*(_fmt(row.get(k)) for k in keys), f"{row['completed']}/{row['runs']}",
                      _mean_sd(row, "mmd2_increase_over_greedy_pct", ".0f"), _mean_sd(row, "accuracy", ".3f"),
                      mean("greedy_accuracy", ".3f"), mean("uniform_mmd2_increase_over_greedy_pct", ".0f"),
                      mean("uniform_accuracy", ".3f"), mean("rho", ".2f"))
    return table
