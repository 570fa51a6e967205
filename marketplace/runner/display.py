"""The human side of a run: live round progress and the summary table at the end."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from marketplace.runner.format import fmt


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


def summary_tables(report: dict[str, Any]) -> list[Table]:
    """Run overview, the protocol's own tables, and traffic per party."""
    from marketplace.exchanges import exchange

    protocol = exchange(report["protocol"])
    status = report["status"]
    head = Table(title=f"{report['scenario']} ({report['protocol']}, seed {report['seed']}, driver {report['driver']})",
                 show_header=False, title_justify="left")
    head.add_column(style="bold")
    head.add_column()
    head.add_row("status", f"[green]{status}[/]" if status == "completed" else f"[red]{status}[/]")
    for failure in report.get("failures", []):
        head.add_row("failure", failure)
    rows = protocol.head_rows(report)
    for name, text in rows[:2]:
        head.add_row(name, text)
    msgs = report["messages"]
    head.add_row("messages", f"{msgs['total']} ({msgs['bytes'] / 1024:.1f} KiB), heartbeats {msgs['heartbeats']['sent']}, "
                 f"sent/received agree: {msgs['consistency']['agree']}")
    t = report["timing"]
    head.add_row("time", f"wall {t['wall_s']:.2f} s; compute {t['compute_s']:.2f} s, transport {t['transport_s']:.3f} s (summed over parties)")
    for name, text in rows[2:]:
        head.add_row(name, text)
    if report.get("dropouts"):
        head.add_row("dropouts", ", ".join(f"{k} (round {v.get('round', '-')})" for k, v in report["dropouts"].items()))

    parties = Table(title="parties", title_justify="left")
    for col in ("party", "pid", "status", "sent", "received", "KiB sent", "value"):
        parties.add_column(col, justify="right" if col not in ("party", "status") else "left")
    value = report.get("value") or {}
    for p in report["parties"]:
        bp = msgs["by_party"].get(p["id"], {})
        parties.add_row(p["id"], fmt(p.get("pid")), p.get("status") or "-", fmt(bp.get("sent", 0)), fmt(bp.get("received", 0)),
                        f"{bp.get('bytes_sent', 0) / 1024:.1f}", fmt(value.get(p["id"])))
    return [head, *protocol.tables(report), parties]


def print_summary(console: Console, report: dict[str, Any], out_dir: str) -> None:
    for table in summary_tables(report):
        console.print(table)
    console.print(f"report: {out_dir}/report.json  (messages.csv, scenario.resolved.yaml, logs/)")
