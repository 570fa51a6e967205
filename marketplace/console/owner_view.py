"""An owner's console: its own ledger over time, read from its ledger files, opened read-only.

For each owner an agent hosts it reads ``LEDGERS/<owner>.ledger.sqlite``
(:meth:`~marketplace.privacy.lifetime.LifetimeLedger.read`: never created, never written) and shows
the budget spent after each request (in the reservation order, the requests that count as the ledger
counts them now: reserved or committed), what is left, the sales (points sold, earnings, and the part
of them paid for privacy loss: each sale's ``privacy_price``), and the requests it declined, with
plots of the spent budget and the earnings over time. This is the owner's own record, shown to the
owner: the console is for the one who runs the agent (the token rule of :mod:`.access` keeps it so
off loopback).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from marketplace.privacy.lifetime import Charge, LedgerInputError, LifetimeLedger, Reservation, Sale, ledger_file

MAX_ROWS = 2000
"""The most requests one owner's page lists and plots (the newest)."""


def _dimension(ledger: LifetimeLedger) -> str:
    """The figure the ledger's filter spends: ``rho`` under ``zcdp``, ``eps`` under ``basic``."""
    return "rho" if ledger.filter == "zcdp" else "eps"


def _figure(charge: Charge, dim: str) -> float:
    value = getattr(charge, dim)
    return float(value) if value is not None else 0.0


def spent_over_time(ledger: LifetimeLedger, rows: Sequence[Reservation]) -> list[dict[str, Any]]:
    """(time, request, spent after it) for every request that counts as spent, in reservation order:
    the filter's figure (eps, or rho under zcdp) of everything counted up to and including it."""
    dim, total, out = _dimension(ledger), 0.0, []
    for row in rows:
        if row.state not in ("reserved", "committed"):
            continue
        total += _figure(ledger.limits.spent([row.charged]), dim)  # both filters sum what each charge counts
        out.append({"time": row.reserved_at, "request": row.request_id, "spent": total})
    return out


def earnings_over_time(sales: Iterable[Sale]) -> list[dict[str, Any]]:
    """(time, request, earnings so far, of which privacy) after each committed sale, in settling order."""
    committed = sorted((s for s in sales if s.state == "committed"), key=lambda s: s.settled_at or s.reserved_at)
    total = privacy = 0.0
    out = []
    for s in committed:
        total += float(s.earnings or 0.0)
        privacy += float(s.privacy_price)
        out.append(
            {"time": s.settled_at or s.reserved_at, "request": s.request_id, "earnings": total, "privacy": privacy}
        )
    return out


def owner_ledger(path: Path) -> dict[str, Any]:
    """One owner's ledger, as its page shows it; ``problem`` (and nothing else) when it does not read."""
    try:
        ledger = LifetimeLedger.read(path)
    except (LedgerInputError, OSError) as err:
        return {"path": str(path), "problem": str(err)}
    except Exception as err:  # noqa: BLE001 - a file that is no SQLite database: the page says so
        return {"path": str(path), "problem": f"{type(err).__name__}: {err}"}
    try:
        rows = ledger.history()[-MAX_ROWS:]
        sales = ledger.sales()[-MAX_ROWS:]
        standing = ledger.sales_standing()
        dim = _dimension(ledger)
        spent, remaining = ledger.spent(), ledger.remaining()
    finally:
        ledger.close()
    budget_eps, budget_delta = ledger.budget
    return {
        "owner": ledger.owner,
        "path": str(path),
        "filter": ledger.filter,
        "relation": ledger.relation,
        "dimension": dim,
        "budget": {"eps": budget_eps, "delta": budget_delta},
        "budget_line": ledger.limits.rho_budget() if dim == "rho" else budget_eps,
        "spent": spent._asdict(),
        "remaining": remaining._asdict(),
        "counts": {
            state: sum(r.state == state for r in rows) for state in ("committed", "reserved", "aborted", "declined")
        },
        "standing": standing,
        "privacy_earnings": math.fsum(s.privacy_price for s in sales if s.state == "committed"),
        "requests": [r.to_dict() for r in reversed(rows)],
        "sales": [s.to_dict() for s in reversed(sales)],
        "declines": [r.to_dict() for r in reversed(rows) if r.state == "declined"],
        "spent_series": spent_over_time(ledger, rows),
        "earnings_series": earnings_over_time(sales),
        "problem": None,
    }


def owner_page(ledgers: Path, owners: Sequence[str]) -> dict[str, Any]:
    """The owners' page: each hosted owner's ledger (:func:`owner_ledger`), or that it has none yet."""
    shown = []
    for owner in owners:
        path = ledger_file(ledgers, owner)
        if not path.exists():
            shown.append(
                {"owner": owner, "path": str(path), "problem": "no ledger yet (it is made at its first session)"}
            )
        else:
            shown.append({**owner_ledger(path), "owner": owner})
    return {"ledgers": str(ledgers), "owners": shown}


def plot_svg(
    series: Sequence[dict[str, Any]], keys: Sequence[str], title: str, ylabel: str, limit: float | None
) -> bytes:
    """A line plot of ``keys`` of ``series`` against the request's position, as SVG (matplotlib, Agg);
    ``limit``: a dashed line at the budget."""
    from matplotlib.figure import Figure  # no pyplot: no global backend, safe in the web server's thread
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(5.2, 2.6), layout="constrained")
    ax = fig.add_subplot()
    x = list(range(1, len(series) + 1))
    for key in keys:
        ax.plot(x, [point[key] for point in series], marker="o", markersize=3, label=key)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if limit is not None and math.isfinite(limit):
        ax.axhline(limit, linestyle="--", color="grey", label="budget")
    ax.set_ylim(bottom=0)  # after the budget's line, which the axis then shows
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("request (in order)")
    ax.set_ylabel(ylabel)
    if not series:
        ax.text(0.5, 0.5, "nothing yet", ha="center", va="center", transform=ax.transAxes)
    ax.legend(loc="upper left", fontsize=8)
    out = io.BytesIO()
    fig.savefig(out, format="svg")
    return out.getvalue()
