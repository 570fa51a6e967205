"""Verify a ledger file without writing to it (``marketplace ledger check``): its schema and the
invariants every ledger keeps.

* the file is a SQLite database that passes ``PRAGMA integrity_check``, holds the ledger's tables and
  one budget row of this schema version (a positive eps, a delta in [0, 1), a known filter);
* no figure is negative (a declared or charged cost, a price, points, earnings), every state is known;
* no request id is charged twice, and every counted row (reserved or committed) carries a charge;
* what the filter counts as spent fits the budget;
* every sale belongs to a request of the ledger, sells no more than it reserved, and is counted only
  while its request is.

:func:`problems` returns what is wrong (empty: the ledger passes).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from marketplace.privacy.lifetime.cost import FILTERS, Charge, LedgerInputError
from marketplace.privacy.lifetime.filters import Limits
from marketplace.privacy.lifetime.sales import PRICING_COLUMNS
from marketplace.privacy.lifetime.storage import COUNTED, NEEDED_TABLES, OWN_TABLES, SCHEMA_VERSION, STATES

CHARGE_COLUMNS = ("eps", "delta", "rho", "charged_eps", "charged_delta", "charged_rho")
SALE_COLUMNS = ("price", "reserved", "sold", "earnings")
TOLERANCE = 1e-9
"""Slack on the budget comparison, for sums of floats."""


def problems(path: Path) -> list[str]:
    """What is wrong with the ledger at ``path`` (opened read-only); an empty list when nothing is."""
    if not path.is_file():
        return ["missing (no such file)"]
    if path.stat().st_size == 0:
        return ["empty (0 bytes)"]
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        return [f"cannot be opened: {err}"]
    try:
        return _problems(db)
    except sqlite3.Error as err:
        return [f"not a lifetime ledger ({err})"]
    finally:
        db.close()


def _problems(db: sqlite3.Connection) -> list[str]:
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not tables:
        return ["holds no table (a blank SQLite file)"]
    if tables - OWN_TABLES:
        return [f"not a lifetime ledger (tables of another schema: {', '.join(sorted(tables - OWN_TABLES))})"]
    if NEEDED_TABLES - tables:
        return [f"not a whole lifetime ledger (it lacks the tables {', '.join(sorted(NEEDED_TABLES - tables))})"]
    integrity = [row[0] for row in db.execute("PRAGMA integrity_check")]
    if integrity != ["ok"]:
        return [f"damaged: {'; '.join(integrity[:3])}"]
    found = _budget(db)
    if isinstance(found, str):
        return [found]
    found_problems = _charges(db, found)
    if "sales" in tables:
        found_problems += _sales(db)
    return found_problems


def _budget(db: sqlite3.Connection) -> Limits | str:
    rows = db.execute("SELECT schema_version, filter, budget_eps, budget_delta FROM ledger").fetchall()
    if len(rows) != 1:
        return f"holds {len(rows)} budget rows, not one"
    version, filter, eps, delta = rows[0]
    if version != SCHEMA_VERSION:
        return f"schema version {version!r}; this marketplace reads version {SCHEMA_VERSION}"
    if filter not in FILTERS:
        return f"an unknown filter {filter!r}"
    if not isinstance(eps, (int, float)) or not eps > 0 or not isinstance(delta, (int, float)) or not 0 <= delta < 1:
        return f"a budget that is not one (eps={eps!r}, delta={delta!r})"
    try:
        return Limits(filter, float(eps), float(delta))
    except (LedgerInputError, ValueError) as err:
        return f"a budget its filter cannot take: {err}"


def _charges(db: sqlite3.Connection, limits: Limits) -> list[str]:
    found: list[str] = []
    columns = ", ".join(CHARGE_COLUMNS)
    for request_id, state, *figures in db.execute(f"SELECT request_id, state, {columns} FROM charges ORDER BY seq"):
        negative = [n for n, v in zip(CHARGE_COLUMNS, figures) if v is not None and not v >= 0]
        if negative:
            found.append(f"request {request_id!r}: negative or not a number: {', '.join(negative)}")
        if state not in STATES:
            found.append(f"request {request_id!r}: unknown state {state!r}")
        if state in COUNTED and all(v is None for v in figures[3:]):
            found.append(f"request {request_id!r} is {state} but carries no charge")
    for request_id, count in db.execute(
        "SELECT request_id, count(*) FROM charges GROUP BY request_id HAVING count(*) > 1"
    ):
        found.append(f"request {request_id!r} is charged {count} times")
    if found:
        return found
    counted = [
        Charge(e, d, r)
        for e, d, r in db.execute(
            "SELECT charged_eps, charged_delta, charged_rho FROM charges WHERE state IN ('reserved', 'committed')"
        )
    ]
    needed = ("eps", "delta") if limits.filter == "basic" else ("rho",)
    if any(getattr(c, n) is None for c in counted for n in needed):
        return [f"a counted request carries no {' or '.join(needed)} charge, which its filter {limits.filter!r} counts"]
    spent = limits.spent(counted)
    bounds = {"eps": limits.eps, "delta": limits.delta} if limits.filter == "basic" else {"rho": limits.rho_budget()}
    over = [
        f"{n}={getattr(spent, n):g} of {bound:g}"
        for n, bound in bounds.items()
        if getattr(spent, n) > bound + TOLERANCE
    ]
    if over:
        found.append(f"spends more than its budget ({', '.join(over)})")
    return found


def _sales(db: sqlite3.Connection) -> list[str]:
    found: list[str] = []
    states = dict(db.execute("SELECT request_id, state FROM charges"))
    columns = ", ".join(SALE_COLUMNS)
    for request_id, state, price, reserved, sold, earnings in db.execute(
        f"SELECT request_id, state, {columns} FROM sales ORDER BY rowid"
    ):
        negative = [n for n, v in zip(SALE_COLUMNS, (price, reserved, sold, earnings)) if v is not None and not v >= 0]
        if negative:
            found.append(f"sale {request_id!r}: negative or not a number: {', '.join(negative)}")
        if request_id not in states:
            found.append(f"sale {request_id!r} belongs to no request of the ledger")
            continue
        if sold is not None and reserved is not None and sold > reserved:
            found.append(f"sale {request_id!r} sold {sold} points of the {reserved} it reserved")
        if state in ("reserved", "committed", "kept") and states[request_id] not in COUNTED:
            found.append(f"sale {request_id!r} is {state} but its request is {states[request_id]}")
    return found + _privacy_prices(db)


def _privacy_prices(db: sqlite3.Connection) -> list[str]:
    """A sale's privacy price (:mod:`.pricing`) and its price per eps are numbers >= 0 (a table from
    before privacy prices has neither column: nothing to check)."""
    have = {row[1] for row in db.execute("PRAGMA table_info(sales)")}
    if not set(PRICING_COLUMNS) <= have:
        return []
    return [
        f"sale {request_id!r}: negative or not a number: {', '.join(bad)}"
        for request_id, *values in db.execute(f"SELECT request_id, {', '.join(PRICING_COLUMNS)} FROM sales")
        if (bad := [n for n, v in zip(PRICING_COLUMNS, values) if not (v is not None and v >= 0)])
    ]
