"""``marketplace request --repeat N``: the same request sent N times, one after another, on one
connection to the marketplace (:func:`marketplace.service.api.connect`: one CURVE handshake, the
imports and the simulated world built once), each report in its own folder ``OUT/1`` ... ``OUT/N``,
one line per request with its latency, then the series' p50 and p95 latency and requests per minute.

The exit status tells the truth: 0 only when every request completed; otherwise the summary says how
many failed and how many were not sent (a refused request or a lost marketplace ends the series)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marketplace.cli.common import EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, read_limits

if TYPE_CHECKING:
    from marketplace.scenario import Scenario
    from marketplace.service.api import Client


@dataclass
class Series:
    """What the requests of a series did: each one's latency (seconds) and status, and why it stopped early."""

    total: int
    latencies: list[float] = field(default_factory=list)
    statuses: list[str] = field(default_factory=list)
    stopped: str | None = None
    refused_first: bool = False

    @property
    def failed(self) -> int:
        return sum(status != "completed" for status in self.statuses)

    @property
    def not_sent(self) -> int:
        return self.total - len(self.statuses)

    def summary(self, elapsed_s: float) -> str:
        """One line: how many completed, failed and were not sent; p50/p95 latency; requests per minute."""
        done = len(self.statuses) - self.failed
        line = f"{self.total} requests: {done} completed, {self.failed} failed"
        line += f", {self.not_sent} not sent" if self.not_sent else ""
        if self.latencies:
            line += (
                f"; latency p50 {percentile(self.latencies, 50):.2f} s, p95 {percentile(self.latencies, 95):.2f} s; "
                f"{60.0 * len(self.latencies) / max(elapsed_s, 1e-9):.1f} requests/min"
            )
        return line


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile of ``values`` (one of them: no interpolation)."""
    ranked = sorted(values)
    return ranked[max(0, math.ceil(q / 100.0 * len(ranked)) - 1)]


def repeat_request(args: argparse.Namespace, scenario: Scenario, out: Path, say: Callable[[str], None]) -> int:
    """Send ``scenario`` ``args.repeat`` times on one connection, report ``i`` in ``out/i``; the exit status."""
    from marketplace.runtime import RunFolderError, check_run_folder
    from marketplace.service.api import connect

    try:
        check_run_folder(out)
    except RunFolderError as err:
        print(f"marketplace request: --out: {err}", file=sys.stderr)
        return EXIT_USAGE
    series = Series(args.repeat)
    started = time.monotonic()
    with connect(args.market, args.keys) as client:
        for i in range(1, args.repeat + 1):
            if not _one(client, args, scenario, out, i, series, say):
                break
    elapsed = time.monotonic() - started
    print(series.summary(elapsed))
    if series.stopped:
        print(f"marketplace request: {series.stopped}", file=sys.stderr)
    elif series.failed:
        print(f"marketplace request: {series.failed} of {series.total} requests failed", file=sys.stderr)
    _draw_all(out, series, args.chown_like)
    if series.refused_first:
        return EXIT_USAGE
    return EXIT_OK if not series.failed and not series.not_sent else EXIT_RUN_FAILED


def _one(
    client: Client,
    args: argparse.Namespace,
    scenario: Scenario,
    out: Path,
    i: int,
    series: Series,
    say: Callable[[str], None],
) -> bool:
    """Request ``i`` of the series into ``out/i``, its line printed; False when the series must stop."""
    from marketplace.cli.shop import refusal
    from marketplace.data.own_files import OwnDataError
    from marketplace.service.client import RequestFailed, RequestRefused

    folder = out / str(i)
    began = time.monotonic()
    try:
        report = client.request(
            scenario,
            out=folder,
            wait_s=args.wait,
            check=False,
            on_event=say,
            data=args.data,
            test=args.test,
            schema=args.schema,
            limits=read_limits(args) if args.data else None,
            references=args.references,
            plots=False,
            max_price=args.max_price,
        ).raw
    except (RequestRefused, RequestFailed, OwnDataError, OSError, ValueError) as err:
        series.stopped = f"request {i}/{series.total}: {refusal(err)}; the series stops here"
        series.refused_first = i == 1 and isinstance(err, (RequestRefused, OwnDataError))
        return False
    latency = time.monotonic() - began
    status = str(report.get("status"))
    series.latencies.append(latency)
    series.statuses.append(status)
    name = "report" if "protocol" in report else "failure"
    print(f"request {i}/{series.total}: {status} in {latency:.2f} s ({folder}/{name}.json)", flush=True)
    for failure in report.get("failures") or []:
        print(f"marketplace request: request {i}: run failed: {failure}", file=sys.stderr)
    return True


def _draw_all(out: Path, series: Series, chown_like: str | None) -> None:
    """Each report's ``rounds.png``, drawn after the series (its latencies do not include matplotlib),
    and the folders given to the owner of ``--chown-like``."""
    import json

    if chown_like:
        from marketplace.provision import chown_like as give

        give(out, Path(chown_like))
    for i in range(1, len(series.statuses) + 1):
        path = out / str(i) / "report.json"
        if path.is_file():
            draw_after(json.loads(path.read_text()), out / str(i), chown_like)


def draw_after(report: dict[str, Any], out: Path, chown_like: str | None) -> None:
    """``rounds.png`` of a full run report, drawn once the report is on disk and shown (unless
    ``MARKETPLACE_ROUND_PLOTS`` is off), and given to the owner of ``--chown-like`` too."""
    if "messages" not in report or "history" not in report:
        return
    from marketplace.reporting.history import PLOT_FILE, write_round_plot

    if write_round_plot(report, out) and chown_like:
        from marketplace.provision import chown_like as give

        give(out / PLOT_FILE, Path(chown_like))
