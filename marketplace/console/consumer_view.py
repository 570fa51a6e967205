"""A consumer's console: its purchases, their bills and each report's figures, from its own output
folders.

``marketplace console --reports DIR`` reads every ``report.json`` under ``DIR`` (the output folders of
``marketplace request``: ``--out OUT`` writes ``OUT/report.json``, ``--repeat`` writes ``OUT/1/``,
``OUT/2/``, ...), at most :data:`MAX_DEPTH` folders down. Each is the consumer's own copy of a
session's report, with every figure it computed on its own target. The page lists the purchases
(session, protocol, status, the owners that took part or declined) and what each cost
(:func:`marketplace.market.sales.request_sale`: points bought, paid, of which for privacy); a report's
page shows the figures its protocol's summary shows (the rows of ``marketplace request``'s table),
its bill per owner, the owners' charges, and its ``rounds.png`` when the folder has one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from marketplace.market.sales import request_sale

REPORT = "report.json"
MAX_DEPTH = 4
MAX_REPORTS = 1000
ROUNDS_PLOT = "rounds.png"


def find_reports(root: Path) -> list[Path]:
    """Every ``report.json`` under ``root`` (at most :data:`MAX_DEPTH` folders down, :data:`MAX_REPORTS`
    of them), newest first; a ``parties/`` folder (the parties' own reports) is not looked into."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        depth = len(Path(folder).relative_to(root).parts)
        dirs[:] = sorted(d for d in dirs if d != "parties" and not d.startswith(".") and depth < MAX_DEPTH)
        if REPORT in files:
            found.append(Path(folder) / REPORT)
        if len(found) >= MAX_REPORTS:
            break
    return sorted(found, key=_mtime, reverse=True)


def _key(root: Path, folder: Path) -> str:
    """How the pages name an output folder: its path under ``root``, ``~`` for ``root`` itself."""
    return "~" if folder == root else folder.relative_to(root).as_posix()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def read_report(path: Path) -> dict[str, Any] | None:
    """A report as JSON, or None when it does not read (a half-written or foreign file)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) and "protocol" in report else None


def owners_of(report: Mapping[str, Any]) -> dict[str, list[str]]:
    """Which owners took part (their ledger committed or kept the charge) and which declined."""
    owners = ((report.get("lifetime") or {}).get("owners")) or {}
    states: dict[str, list[str]] = {"charged": [], "declined": [], "other": []}
    for owner, row in sorted(owners.items()):
        state = row.get("state") if isinstance(row, Mapping) else None
        key = "charged" if state in ("committed", "reserved") else "declined" if state == "declined" else "other"
        states[key].append(owner)
    return states


def purchase(root: Path, path: Path, report: Mapping[str, Any]) -> dict[str, Any]:
    """One purchase's line: where its report is, what it asked and how it ended, and its bill."""
    folder = path.parent
    return {
        "folder": _key(root, folder),
        "session": report.get("run_id") or (report.get("lifetime") or {}).get("request_id"),
        "scenario": report.get("scenario"),
        "protocol": report.get("protocol"),
        "status": report.get("status"),
        "wall_s": (report.get("timing") or {}).get("wall_s"),
        "owners": owners_of(report),
        "bill": request_sale(report),
        "written": _mtime(path),
    }


def consumer_page(root: Path) -> dict[str, Any]:
    """The purchases page: every report found under ``root`` (:func:`find_reports`), newest first, and the totals."""
    rows = []
    for path in find_reports(root):
        report = read_report(path)
        if report is not None:
            rows.append(purchase(root, path, report))
    return {
        "root": str(root),
        "purchases": rows,
        "totals": {
            "purchases": len(rows),
            "completed": sum(r["status"] == "completed" for r in rows),
            "paid": sum(r["bill"]["paid"] for r in rows),
            "privacy_paid": sum(r["bill"]["privacy_paid"] for r in rows),
            "points_bought": sum(r["bill"]["points_bought"] for r in rows),
        },
    }


def figures(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The rows of the protocol's summary table (:meth:`marketplace.plugins.Exchange.head_rows`), as text."""
    from marketplace import plugins

    try:
        rows = plugins.exchange(str(report["protocol"])).head_rows(dict(report))
    except Exception as err:  # noqa: BLE001 - a protocol not installed here, or a report it cannot read
        return [("figures", f"not available: {type(err).__name__}: {err}")]
    return [(str(name), _plain(str(text))) for name, text in rows]


def _plain(text: str) -> str:
    """``text`` without rich's markup (the summary table's colours)."""
    from rich.text import Text

    try:
        return Text.from_markup(text).plain
    except Exception:  # noqa: BLE001 - text that is not valid markup is shown as it is
        return text


def _found(root: Path, folder: str) -> Path | None:
    """The report of the output folder ``folder`` (relative to ``root``, as the purchases page names it),
    looked up among those :func:`find_reports` found, so no path from a request is ever opened."""
    for path in find_reports(root):
        if _key(root, path.parent) == folder:
            return path
    return None


def report_page(root: Path, folder: str) -> dict[str, Any] | None:
    """The page of the report in ``folder`` (:func:`_found`; None: no such report)."""
    path = _found(root, folder)
    report = None if path is None else read_report(path)
    if path is None or report is None:
        return None
    owners = ((report.get("lifetime") or {}).get("owners")) or {}
    return {
        **purchase(root, path, report),
        "figures": figures(report),
        "charges": [
            {
                "owner": owner,
                "state": row.get("state"),
                "cost": row.get("cost"),
                "charged": row.get("charged"),
                "reason": row.get("reason"),
                "sale": row.get("sale"),
            }
            for owner, row in sorted(owners.items())
            if isinstance(row, Mapping)
        ],
        "failures": list(report.get("failures") or []),
        "rounds_plot": (path.parent / ROUNDS_PLOT).is_file(),
    }


def rounds_plot(root: Path, folder: str) -> Path | None:
    """The ``rounds.png`` beside the report in ``folder``, if there is one."""
    path = _found(root, folder)
    plot = None if path is None else path.parent / ROUNDS_PLOT
    return plot if plot is not None and plot.is_file() else None
