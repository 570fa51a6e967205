"""The human side of a run: live round progress and the summary table at the end."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from marketplace.reporting.absent import absent_line
from marketplace.reporting.format import fmt, shorten
from marketplace.reporting.per_owner import per_owner_table

QUIET_NOTE_S = 15.0
"""Without a terminal, a long phase (the baselines) prints a line this often, so it never looks stuck."""


class RunProgress:
    """What a person sees while a run goes on: call it with ``(done, total)`` for each round, and
    ``phase(text)`` when the run moves on to work without rounds (the evaluation and baselines).

    On a terminal: a live bar, then a spinner with the phase and the elapsed time. Otherwise (a
    pipe, a file): plain lines on stderr, about every tenth of the rounds, and for a phase a line
    when it starts and one every ``QUIET_NOTE_S`` seconds until the run ends.
    """

    def __init__(self, console: Console, label: str, progress: Progress | None) -> None:
        self.label = label
        self._progress = progress
        self._task = progress.add_task(label, total=None) if progress is not None else None
        self._next_round = 0
        self._phase_started: float | None = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def __call__(self, done: int, total: int) -> None:
        if self._progress is not None and self._task is not None:  # both set, or neither
            self._progress.update(self._task, completed=done, total=total)
        elif done >= self._next_round or done == total:
            print(f"{self.label}: round {done}/{total}", file=sys.stderr, flush=True)
            self._next_round = done + max(1, total // 10)

    def phase(self, text: str) -> None:
        self._phase_started = time.monotonic()
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=f"{self.label}: {text}", total=None, completed=0)
            return
        print(f"{self.label}: {text}...", file=sys.stderr, flush=True)
        self._ticker = threading.Thread(target=self._tick, args=(text,), name="progress-note", daemon=True)
        self._ticker.start()

    def _tick(self, text: str) -> None:
        while not self._stop.wait(QUIET_NOTE_S):
            elapsed = time.monotonic() - (self._phase_started or time.monotonic())
            print(f"{self.label}: still {text} ({elapsed:.0f} s)", file=sys.stderr, flush=True)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=1.0)
        if self._phase_started is not None and self._progress is None:
            print(f"{self.label}: done ({time.monotonic() - self._phase_started:.0f} s)", file=sys.stderr, flush=True)


@contextmanager
def round_progress(console: Console, label: str) -> Iterator[RunProgress]:
    """A :class:`RunProgress` for one run: a live display on a terminal, plain lines otherwise."""
    if console.is_terminal:
        with Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as progress:
            shown = RunProgress(console, label, progress)
            try:
                yield shown
            finally:
                shown.close()
        return
    shown = RunProgress(console, label, None)
    try:
        yield shown
    finally:
        shown.close()


def summary_tables(report: dict[str, Any]) -> list[Table]:
    """Run overview, the protocol's own tables, and traffic per party."""
    from marketplace import plugins

    exchange = plugins.exchange(report["protocol"])
    status = report["status"]
    head = Table(
        title=f"{report['scenario']} ({report['protocol']}, seed {report['seed']}, driver {report['driver']})",
        show_header=False,
        title_justify="left",
    )
    head.add_column(style="bold")
    head.add_column()
    head.add_row("status", f"[green]{status}[/]" if status == "completed" else f"[red]{status}[/]")
    for failure in report.get("failures", []):
        head.add_row("failure", shorten(failure))
    lost = report.get("owners_lost") or {}
    if lost.get("count"):
        head.add_row("[bold red]owners lost[/]", f"[red]{escape(shorten(lost['summary'], 600))}[/]")
    life = report.get("lifetime") or {}
    if life.get("summary"):
        head.add_row("lifetime budgets", escape(shorten(_lifetime_line(life), 600)))
    rows = exchange.head_rows(report)
    first = 2  # the protocol's first two rows come before the run's traffic, with the charges that follow them
    while first < len(rows) and rows[first][0] == "charged":
        first += 1
    for name, text in rows[:first]:
        head.add_row(name, text)
    msgs = report["messages"]
    head.add_row(
        "messages",
        f"{msgs['total']} ({msgs['bytes'] / 1024:.1f} KiB), heartbeats {msgs['heartbeats']['sent']}, "
        f"sent/received agree: {msgs['consistency']['agree']}",
    )
    t = report["timing"]
    connect = f"; {t['connected']} parties connected in {t['connect_s']:.2f} s" if "connect_s" in t else ""
    head.add_row(
        "time",
        f"wall {t['wall_s']:.2f} s; compute {t['compute_s']:.2f} s, transport {t['transport_s']:.3f} s "
        f"(summed over parties){connect}",
    )
    for name, text in rows[first:]:
        head.add_row(name, text)
    missing = absent_line(report)
    if missing:  # a marketplace described by its schema: the references that need everyone's rows
        head.add_row("[bold yellow]not computed[/]", escape(missing))
    if (report.get("noise") or {}).get("summary"):
        head.add_row("noise", report["noise"]["summary"])
    if report.get("dropouts") and not lost:  # a report written before owners_lost existed
        head.add_row(
            "dropouts", shorten(", ".join(f"{k} (round {v.get('round', '-')})" for k, v in report["dropouts"].items()))
        )

    parties = Table(title="parties", title_justify="left")
    for col in ("party", "pid", "status", "sent", "received", "KiB sent", "value"):
        parties.add_column(col, justify="right" if col not in ("party", "status") else "left")
    value = report.get("value") or {}
    shown, hidden = _party_rows(report["parties"])
    for p in shown:
        if p is None:  # where the owners left out are counted
            states = Counter(q.get("status") or "-" for q in hidden)
            parties.add_row(
                f"{len(hidden)} more owners",
                "",
                ", ".join(f"{n} {state}" for state, n in states.most_common()),
                "",
                "",
                "",
                "in report.json",
            )
            continue
        bp = msgs["by_party"].get(p["id"], {})
        parties.add_row(
            p["id"],
            fmt(p.get("pid")),
            p.get("status") or "-",
            fmt(bp.get("sent", 0)),
            fmt(bp.get("received", 0)),
            f"{bp.get('bytes_sent', 0) / 1024:.1f}",
            fmt(value.get(p["id"])),
        )
    per_owner = [per_owner_table(report["privacy_per_owner"])] if "privacy_per_owner" in report else []
    return [head, *exchange.tables(report), *per_owner, parties]


PARTY_ROWS = 24
"""Parties listed one by one in the terminal's table; with more, the owners that did not complete
come first and the rest are counted in one row (every party is in report.json)."""


def _party_rows(parties: list[dict[str, Any]]) -> tuple[Sequence[dict[str, Any] | None], list[dict[str, Any]]]:
    """(rows to show, owners left out): all parties when they fit in :data:`PARTY_ROWS`; else the
    curator, every owner that did not complete (as many as fit), the first owners, None where the
    rest are counted, and the consumer."""
    if len(parties) <= PARTY_ROWS:
        return parties, []
    owners = [p for p in parties if p.get("role") == "owner"]
    others = [p for p in parties if p.get("role") != "owner"]
    room = max(1, PARTY_ROWS - len(others))
    trouble = [p for p in owners if p.get("status") != "completed"][:room]
    shown_owners = trouble + [p for p in owners if p.get("status") == "completed"][: room - len(trouble)]
    picked = {id(p) for p in shown_owners}
    hidden = [p for p in owners if id(p) not in picked]
    head = [p for p in others if p.get("role") != "consumer"]
    tail = [p for p in others if p.get("role") == "consumer"]
    return [*head, *shown_owners, None, *tail], hidden


def _lifetime_line(life: dict[str, Any]) -> str:
    """The run's request id, who declined, and the least any owner has left after the run."""
    left = [r.get("remaining", {}).get("eps") for r in (life.get("owners") or {}).values()]
    left = [v for v in left if isinstance(v, (int, float))]
    least = f"; least eps left: {min(left):g}" if left else ""
    return f"request {life.get('request_id')}: {life['summary']}{least}"


def print_summary(console: Console, report: dict[str, Any], out_dir: str | Path) -> None:
    for table in summary_tables(report):
        console.print(table)
    console.print(
        f"report: {out_dir}/report.json  (messages.csv, rounds.csv, rounds.png, scenario.resolved.yaml, logs/)"
    )


@contextmanager
def sweep_progress(console: Console, total: int) -> Iterator[Callable[[Any, dict[str, Any]], None]]:
    """A sweep's live account, as ``on_run(point, row)``: one line per finished run (place, swept
    values, status, headline figures, eps spent; :func:`marketplace.runner.sweep.result_line`) and,
    on a terminal, a progress bar over the runs below the lines. Lines only on a pipe or file."""
    from marketplace.runner.sweep import result_line

    def line(point: Any, row: dict[str, Any]) -> None:
        console.print(result_line(point, row, total), markup=False, highlight=False, soft_wrap=True)

    if not console.is_terminal:
        yield line
        return
    with Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("sweep", total=total)

        def show(point: Any, row: dict[str, Any]) -> None:
            line(point, row)
            progress.advance(task)

        yield show
