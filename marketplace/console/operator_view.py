"""The operator's console: what a served marketplace is doing, from the files it already writes.

It reads ``STATE/server.json`` (:mod:`marketplace.service.status`), the marketplace's file
``STATE/market.yaml`` and the server's copy of each listed session's report
(``STATE/sessions/<session>/report.json``), never a socket of the server and never an owner's ledger.

What it shows of each owner is what the catalogue shows (:mod:`marketplace.service.catalogue`):
whether its agent is connected, the terms it posted, its lifetime budget as the marketplace's file
states it, and ``admitted``: the declared cost of every session this server started for it. Those
follow from public figures only. Not its ledger's standing (spent, points sold), which depends on its
rows, and never a row count. Which sessions an owner declined is shown (the server sees every
decline), without the ledger's reason, which names the budget it has left.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from marketplace.service.status import STATUS_FILE

QUANTILES = (0.5, 0.9, 0.99)
"""The latency percentiles shown, and exported as the summaries' quantiles."""
ENDED = ("completed", "failed", "refused", "dropped")
"""The statuses an ended session has (the server's :class:`~marketplace.service.session_book.SessionBook`)."""
NOT_SHOWN = (
    "Not shown: each owner's ledger standing (the budget it has spent, the points it has sold) and why it "
    "declined (the ledger's reason names what it has left): a reservation is kept or rolled back by whether "
    "anything of the owner's release left, and points are sold when the curator selects them, both of which "
    "can depend on the owners' rows. No row count, nor anything else computed from an owner's rows, is shown."
)


def read_status(state: Path) -> dict[str, Any] | None:
    """``state/server.json`` as the server last wrote it, or None before it wrote one (or if it does not read)."""
    try:
        status = json.loads((state / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return None
    return status if isinstance(status, dict) else None


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile of ``values`` (linear between the closest ranks), None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    at = q * (len(ordered) - 1)
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def latency(sessions: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The wait (queued to started) and wall (started to ended) times of the completed sessions listed:
    count, sum and :data:`QUANTILES`, in seconds."""
    done = [s for s in sessions if s.get("status") == "completed"]
    out: dict[str, dict[str, Any]] = {}
    for key in ("wait_s", "wall_s"):
        values = [float(s[key]) for s in done if isinstance(s.get(key), (int, float))]
        out[key] = {
            "count": len(values),
            "sum": math.fsum(values),
            "quantiles": {q: quantile(values, q) for q in QUANTILES},
        }
    return out


def market_terms(state: Path) -> dict[str, Any]:
    """The ``lifetime`` section of the marketplace's file (``state/market.yaml``), {} if it does not read."""
    try:
        market = yaml.safe_load((state / "market.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return {}
    life = market.get("lifetime") if isinstance(market, dict) else None
    return life if isinstance(life, dict) else {}


def owner_names(count: int) -> list[str]:
    """The marketplace's owners: ``owner-1`` ... ``owner-<count>``."""
    return [f"owner-{i + 1}" for i in range(count)]


def owner_standing(status: Mapping[str, Any], life: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each owner's public standing: present or not, its terms (those its agent posted over the
    marketplace's), its budget as the marketplace's file states it, and what this server admitted."""
    present = set(status.get("present") or [])
    posted = status.get("posted") or {}
    admitted = status.get("admitted") or {}
    rows = []
    for owner in owner_names(int(status.get("owners") or 0)):
        terms = dict((life.get("owner_terms") or {}).get(owner) or life.get("terms") or {})
        terms.update(posted.get(owner) or {})
        rows.append(
            {
                "owner": owner,
                "present": owner in present,
                "terms": terms,
                "terms_from": "agent" if posted.get(owner) else "market",
                "budget": (life.get("owner_budgets") or {}).get(owner) or life.get("budget"),
                "admitted": dict(admitted.get(owner) or {}),
            }
        )
    return rows


def declines(state: Path, sessions: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """(session, consumer, owner) of every owner that declined a listed session, from the server's copy
    of its report: which owner declined, not the ledger's reason."""
    out = []
    for s in sessions:
        name = str(s.get("session") or "")
        if not name or "/" in name or name.startswith("."):
            continue
        owners = _report_owners(state / "sessions" / name / "report.json")
        out += [
            {"session": name, "consumer": str(s.get("consumer") or ""), "owner": owner}
            for owner, row in sorted(owners.items())
            if isinstance(row, Mapping) and row.get("state") == "declined"
        ]
    return out


_REPORTS: dict[Path, tuple[float, dict[str, Any]]] = {}
"""A session's report's ``lifetime.owners``, by its path, with the file's mtime (a report is written once)."""


def _report_owners(path: Path) -> dict[str, Any]:
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return {}
    cached = _REPORTS.get(path)
    if cached is not None and cached[0] == mtime:
        return cached[1]
    try:
        owners = (json.loads(path.read_text()).get("lifetime") or {}).get("owners") or {}
    except (OSError, ValueError, AttributeError):
        owners = {}
    _REPORTS[path] = (mtime, owners if isinstance(owners, dict) else {})
    return _REPORTS[path][1]


def operator_page(state: Path) -> dict[str, Any]:
    """Everything the operator's page shows (module docstring); ``status`` None before the server wrote
    its status file."""
    status = read_status(state)
    if status is None:
        return {"state": str(state), "status": None, "not_shown": NOT_SHOWN}
    sessions = list(status.get("sessions") or [])
    try:
        age = time.time() - (state / STATUS_FILE).stat().st_mtime
    except OSError:
        age = None
    return {
        "state": str(state),
        "status": status,
        "updated_s_ago": age,
        "running": list(status.get("running") or []),
        "queued": list(status.get("queued") or []),
        "ended": list(reversed(sessions)),
        "ended_counts": ended_counts(status),
        "latency": latency(sessions),
        "owners": owner_standing(status, market_terms(state)),
        "declines": declines(state, sessions),
        "not_shown": NOT_SHOWN,
    }


def ended_counts(status: Mapping[str, Any]) -> dict[str, int]:
    """Ended sessions by status since the server started (``ended``; a status file of a server that did
    not count them: those it lists)."""
    counted = status.get("ended")
    if isinstance(counted, Mapping):
        counts = {str(k): int(v) for k, v in counted.items()}
    else:
        counts = {}
        for s in status.get("sessions") or []:
            counts[str(s.get("status"))] = counts.get(str(s.get("status")), 0) + 1
    return {**dict.fromkeys(ENDED, 0), **counts}
