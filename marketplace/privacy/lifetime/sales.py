"""Data points sold under an owner's sale terms, kept on its lifetime ledger beside its privacy charges.

A protocol that sells data points (summarize) reserves, with the request's privacy cost, the most points the
request can take from the owner (a figure of its public settings alone), under the owner's
:class:`~.terms.SaleTerms`. The ledger caps that reservation, in the same ``BEGIN IMMEDIATE`` transaction
as the privacy charge, at what the terms leave::

    cap = min(points asked, terms.points - counted (every consumer), terms.points_per_consumer - counted (this one))

and declines the request (nothing charged, a ``declined`` row and :class:`TermsDeclined`) when the cap is 0.
A request counts, towards those limits, its ``reserved`` points while it is reserved or ``kept`` (a
reconcile kept a dead process's reservation as spent: what it sold is unknown), what it ``sold`` once
committed, and nothing once aborted or declined.

Every request charged under terms, whatever its protocol, is also priced for the privacy it costs the
owner: ``privacy_price``, the terms' ``price_per_eps`` times the eps the ledger charged
(:func:`.pricing.price`), fixed in the transaction that charges it. A request that sells no points
(sketch, stc, pfds) has a sale row with 0 points reserved, so that its privacy price is on the same
record. Once committed, a sale earns ``sold * price + privacy_price``; aborted or declined, nothing.

A ``kept`` sale's ``sold`` and ``earnings`` stay unknown (None): the process that knew them is gone, and
the only record of them is the consumer's report. What the ledger does know is a bound: the sale sold at
most its reserved points, earning at most their price and its privacy price. :attr:`Sale.sold_at_most` and
:attr:`Sale.earnings_at_most` say so for every sale (equal to ``sold`` and ``earnings`` once they are
known), and :func:`standing` totals the kept sales' bounds apart (``kept``), so that a ledger whose
agent was killed mid-sale shows what it may have earned instead of nothing.

Counting a committed request at what it sold, rather than at what it reserved, makes a later decline depend
on earlier sales, and so on the data they were chosen from. That is acceptable only because how many points
an owner was asked for is an output of the protocol's composed auction, already charged on the owner's
privacy ledger: the decision is post-processing of charged releases and public settings, and costs no
further privacy.

The ``sales`` table lives in the ledger's SQLite file. Like ``attempts``, writers create it in their own
transaction, so a ledger written before it existed gains it on its first sale; readers of such a file see
no sales. Every function here runs on the ledger's connection, the writing ones inside a write transaction
the caller holds (:class:`.storage.Transaction`).
"""

from __future__ import annotations

import json
import numbers
import sqlite3
from dataclasses import dataclass
from typing import Any

from marketplace.privacy.lifetime.cost import BudgetDeclined, Charge, Cost, LedgerInputError, fail
from marketplace.privacy.lifetime.storage import now
from marketplace.privacy.lifetime.terms import SaleTerms

SALE_STATES = ("reserved", "committed", "aborted", "declined", "kept")
"""A sale's states: ``kept`` is a reservation a reconcile kept as spent (sold and earnings unknown, at
most its reserved points and their price)."""

SALES = """CREATE TABLE IF NOT EXISTS sales (
    request_id TEXT PRIMARY KEY,
    consumer TEXT NOT NULL,
    price REAL NOT NULL,
    reserved INTEGER NOT NULL,
    sold INTEGER,
    earnings REAL,
    state TEXT NOT NULL CHECK (state IN ('reserved', 'committed', 'aborted', 'declined', 'kept')),
    terms TEXT NOT NULL,
    reserved_at TEXT NOT NULL,
    settled_at TEXT,
    price_per_eps REAL NOT NULL DEFAULT 0.0,
    privacy_price REAL NOT NULL DEFAULT 0.0
)"""

PRICING_COLUMNS = ("price_per_eps", "privacy_price")
"""The columns a ledger whose ``sales`` table predates privacy prices lacks: a writer adds them (as 0,
what such a sale earned for its privacy), a reader reads 0 for them."""

COUNTS = "CASE state WHEN 'committed' THEN sold WHEN 'reserved' THEN reserved WHEN 'kept' THEN reserved ELSE 0 END"
"""What one sale row counts towards the terms' limits (module docstring)."""


@dataclass(frozen=True)
class Sale:
    """One request's sale row: who bought, at which ``price`` per point, the points ``reserved`` (the most
    the request may take), ``sold`` and ``earnings`` (None until committed, and for a ``kept`` sale), its
    state (one of :data:`SALE_STATES`), the terms it was reserved under, and when (UTC, ISO 8601)."""

    request_id: str
    consumer: str
    price: float
    reserved: int
    sold: int | None
    earnings: float | None
    state: str
    terms: SaleTerms
    reserved_at: str
    settled_at: str | None
    price_per_eps: float = 0.0
    """The owner's price per unit eps of privacy loss under its terms (:mod:`.pricing`)."""
    privacy_price: float = 0.0
    """What the privacy this request was charged costs at that price, earned once committed."""

    @property
    def sold_at_most(self) -> int:
        """The most points this sale can have sold: ``sold`` once known (committed, aborted), else its
        reserved points (a reservation still open, or one a reconcile kept: what it sold is unknown;
        a declined sale reserved none)."""
        return self.sold if self.sold is not None else self.reserved

    @property
    def earnings_at_most(self) -> float:
        """The most this sale can have earned: ``earnings`` once known, else :attr:`sold_at_most`
        times the price, plus the privacy price."""
        return self.earnings if self.earnings is not None else self.sold_at_most * self.price + self.privacy_price

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for ``marketplace ledger show --json``). ``sold`` and ``earnings`` are None
        while unknown (a reserved or kept sale); ``sold_at_most`` and ``earnings_at_most`` bound them."""
        return {
            "request_id": self.request_id,
            "consumer": self.consumer,
            "price": self.price,
            "reserved": self.reserved,
            "sold": self.sold,
            "earnings": self.earnings,
            "sold_at_most": self.sold_at_most,
            "earnings_at_most": float(self.earnings_at_most),
            "state": self.state,
            "price_per_eps": self.price_per_eps,
            "privacy_price": self.privacy_price,
            "terms": self.terms.to_dict(),
            "time": self.reserved_at,
            "settled": self.settled_at,
        }


class TermsDeclined(BudgetDeclined):
    """A request declined by the owner's sale terms: it may buy no more of the owner's points. A
    :class:`~.cost.BudgetDeclined` (what catches one catches both); ``reason`` names the owner, the
    request, the consumer, the terms and what is left. ``points`` is what the request asked for."""

    def __init__(
        self, reason: str, *, consumer: str, terms: SaleTerms, points: int, cost: Cost, remaining: Charge, **rest: Any
    ) -> None:
        super().__init__(reason, cost=cost, remaining=remaining, **rest)
        self.consumer, self.terms, self.points = consumer, terms, points


def check_sale(points: Any, terms: Any, where: str) -> None:
    """``points`` (an integer >= 0) only with ``terms`` (a :class:`SaleTerms`); ``terms`` alone prices a
    request that sells no points (its privacy only)."""
    if points is not None and terms is None:
        raise LedgerInputError(f"The 'terms' parameter of {where} must be given with 'points', or neither.")
    if points is not None and (isinstance(points, bool) or not isinstance(points, numbers.Integral) or points < 0):
        raise fail("points", where, "an integer >= 0", points)
    if terms is not None and not isinstance(terms, SaleTerms):
        raise fail("terms", where, "a SaleTerms", terms)


def has_sales(db: sqlite3.Connection) -> bool:
    """Whether the ledger has its ``sales`` table yet (one that never sold has not)."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'sales'").fetchone() is not None


def counted(db: sqlite3.Connection, consumer: str | None = None) -> int:
    """The points the terms' limits count (module docstring): every consumer's, or ``consumer``'s."""
    if not has_sales(db):
        return 0
    if consumer is None:
        return db.execute(f"SELECT COALESCE(SUM({COUNTS}), 0) FROM sales").fetchone()[0]
    return db.execute(f"SELECT COALESCE(SUM({COUNTS}), 0) FROM sales WHERE consumer = ?", (consumer,)).fetchone()[0]


def create(db: sqlite3.Connection) -> None:
    """Inside a write: the ``sales`` table, created, or given the :data:`PRICING_COLUMNS` it lacks."""
    db.execute(SALES)
    have = {row[1] for row in db.execute("PRAGMA table_info(sales)")}
    for column in PRICING_COLUMNS:
        if column not in have:
            db.execute(f"ALTER TABLE sales ADD COLUMN {column} REAL NOT NULL DEFAULT 0.0")


def cap(db: sqlite3.Connection, consumer: str, points: int, terms: SaleTerms) -> int:
    """Inside a write: the most points a request of ``consumer`` asking for ``points`` may reserve under
    ``terms`` (it may be <= 0: nothing left)."""
    create(db)
    return terms.cap(
        points,
        counted(db) if terms.points is not None else 0,
        counted(db, consumer) if terms.points_per_consumer is not None else 0,
    )


def record(
    db: sqlite3.Connection,
    request_id: str,
    consumer: str,
    terms: SaleTerms,
    reserved: int,
    state: str,
    privacy_price: float = 0.0,
) -> None:
    """Inside a write: request ``request_id``'s sale row, ``reserved`` (its cap) or ``declined`` (it
    reserves nothing), replacing an earlier aborted or declined one, with the ``privacy_price`` of what
    it is charged (:func:`.pricing.price`; 0 once declined: nothing is charged)."""
    create(db)
    db.execute(
        "INSERT INTO sales (request_id, consumer, price, reserved, sold, earnings, state, terms, reserved_at, "
        "settled_at, price_per_eps, privacy_price) VALUES (?, ?, ?, ?, NULL, NULL, ?, ?, ?, NULL, ?, ?) "
        "ON CONFLICT (request_id) DO UPDATE SET "
        "consumer = excluded.consumer, price = excluded.price, reserved = excluded.reserved, sold = NULL, "
        "earnings = NULL, state = excluded.state, terms = excluded.terms, reserved_at = excluded.reserved_at, "
        "settled_at = NULL, price_per_eps = excluded.price_per_eps, privacy_price = excluded.privacy_price",
        (
            request_id,
            consumer,
            terms.price,
            reserved if state == "reserved" else 0,
            state,
            json.dumps(terms.to_dict()),
            now(),
            terms.price_per_eps,
            privacy_price if state == "reserved" else 0.0,
        ),
    )


def terms_declined(
    db: sqlite3.Connection,
    owner: str,
    request_id: str,
    what: str,
    consumer: str,
    points: int,
    terms: SaleTerms,
    cost: Cost,
    remaining: Charge,
    filter: str,
) -> TermsDeclined:
    """The :class:`TermsDeclined` for a request the terms leave no point to, saying which limit is reached."""
    reached = []
    if terms.points is not None and terms.points - counted(db) <= 0:
        reached.append(f"{terms.points} in its lifetime, {counted(db)} counted")
    if terms.points_per_consumer is not None and terms.points_per_consumer - counted(db, consumer) <= 0:
        reached.append(f"{terms.points_per_consumer} per consumer, {counted(db, consumer)} counted for {consumer}")
    reason = (
        f"{owner}: declined request {request_id!r} ({what}, for {consumer}): consumer {consumer} may buy 0 more "
        f"of {owner}'s points ({'; '.join(reached)}), and the request asks for {points}; the terms: "
        f"{terms.describe()}"
    )
    return TermsDeclined(
        reason,
        owner=owner,
        request_id=request_id,
        consumer=consumer,
        terms=terms,
        points=points,
        cost=cost,
        remaining=remaining,
        filter=filter,
    )


def settle(db: sqlite3.Connection, owner: str, request_id: str, state: str, sold: Any, where: str) -> None:
    """Inside the write that commits or aborts request ``request_id``: its sale row, if it has one,
    ``committed`` with ``sold`` points (0 <= sold <= reserved; None counts as 0 for a sale that reserved
    none, one of a protocol that sells no points) earning ``sold * price + privacy_price``, or
    ``aborted`` (0 sold, 0 earned). :class:`LedgerInputError` for a ``sold`` that is missing, out of
    range, or given for a request that reserved no points."""
    found = sale_of(db, request_id)
    if found is None:
        if sold is not None:
            raise fail("sold", where, f"None: {owner}'s request {request_id!r} reserved no points to sell", sold)
        return
    if state == "aborted":
        db.execute(
            "UPDATE sales SET state = 'aborted', sold = 0, earnings = 0.0, settled_at = ? WHERE request_id = ?",
            (now(), request_id),
        )
        return
    if sold is None and found.reserved == 0:
        sold = 0
    whole = not isinstance(sold, bool) and isinstance(sold, numbers.Integral)
    if not whole or not 0 <= int(sold) <= found.reserved:
        raise fail(
            "sold",
            where,
            f"an integer from 0 to reserved={found.reserved} ({owner}'s request {request_id!r} reserved "
            f"{found.reserved} points)",
            sold,
        )
    db.execute(
        "UPDATE sales SET state = 'committed', sold = ?, earnings = ?, settled_at = ? WHERE request_id = ?",
        (int(sold), int(sold) * found.price + found.privacy_price, now(), request_id),
    )


def settle_gone(db: sqlite3.Connection, request_id: str, *, kept: bool) -> None:
    """Inside a reconcile's write: the sale of a dead process's reservation, ``kept`` (what it sold is
    unknown, it keeps counting its reserved points) or ``aborted`` with it (nothing left)."""
    if not has_sales(db):
        return
    sold, earnings, state = (None, None, "kept") if kept else (0, 0.0, "aborted")
    db.execute(
        "UPDATE sales SET state = ?, sold = ?, earnings = ?, settled_at = ? "
        "WHERE request_id = ? AND state = 'reserved'",
        (state, sold, earnings, now(), request_id),
    )


def _sale(row: tuple) -> Sale:
    request_id, consumer, price, reserved, sold, earnings, state, terms, reserved_at, settled_at, per_eps, privacy = row
    return Sale(
        request_id,
        consumer,
        price,
        reserved,
        sold,
        earnings,
        state,
        SaleTerms.from_dict(json.loads(terms)),
        reserved_at,
        settled_at,
        per_eps,
        privacy,
    )


COLUMNS = "request_id, consumer, price, reserved, sold, earnings, state, terms, reserved_at, settled_at"


def _columns(db: sqlite3.Connection) -> str:
    """What a reader selects: :data:`COLUMNS`, then the :data:`PRICING_COLUMNS` (0.0 for a table that
    predates them)."""
    have = {row[1] for row in db.execute("PRAGMA table_info(sales)")}
    return ", ".join([COLUMNS, *(c if c in have else "0.0" for c in PRICING_COLUMNS)])


def sale_of(db: sqlite3.Connection, request_id: str) -> Sale | None:
    """Request ``request_id``'s sale, or None (no such request, or one that reserved no points)."""
    if not has_sales(db):
        return None
    found = db.execute(f"SELECT {_columns(db)} FROM sales WHERE request_id = ?", (request_id,)).fetchone()
    return None if found is None else _sale(found)


def all_sales(db: sqlite3.Connection) -> list[Sale]:
    """Every sale, in the order it was first reserved."""
    if not has_sales(db):
        return []
    return [_sale(row) for row in db.execute(f"SELECT {_columns(db)} FROM sales ORDER BY rowid")]


def standing(db: sqlite3.Connection, consumer: str | None = None) -> dict[str, Any]:
    """Where the owner's sales stand, as a JSON-ready dict::

        {"sold": points sold (committed), "earnings": what they earned (points and privacy),
         "privacy_earnings": the part of it paid for privacy loss,
         "reserved": points reserved and not settled (reserved and kept sales),
         "counted": what the terms' lifetime limit counts (sold + reserved),
         "kept": {"sales": sales a reconcile kept (what they sold unknown),
                  "sold_at_most": their reserved points, "earnings_at_most": those points' price},
         "terms": the terms of the latest sale (a SaleTerms dict) or None when nothing was reserved,
         "points_left": what those terms leave to sell in the owner's lifetime, None for no limit,
         "per_consumer_left": {consumer: what those terms leave to sell to it, None for no limit},
         "per_consumer": {consumer: {"sold", "earnings", "reserved", "counted", "kept"}},
         "requests": {state: number of sales in it}}

    ``consumer`` restricts the two per-consumer entries to that consumer (present even with no sale)."""
    sales = all_sales(db)
    terms = sales[-1].terms if sales else None
    names = sorted({s.consumer for s in sales}) if consumer is None else [consumer]
    per_consumer = {name: _totals([s for s in sales if s.consumer == name]) for name in names}
    total = _totals(sales)
    limit = None if terms is None else terms.points_per_consumer
    return {
        **total,
        "terms": None if terms is None else terms.to_dict(),
        "points_left": None if terms is None or terms.points is None else max(terms.points - total["counted"], 0),
        "per_consumer_left": {
            name: None if limit is None else max(limit - mine["counted"], 0) for name, mine in per_consumer.items()
        },
        "per_consumer": per_consumer,
        "requests": {state: sum(s.state == state for s in sales) for state in SALE_STATES},
    }


def _totals(sales: list[Sale]) -> dict[str, Any]:
    sold = sum(s.sold or 0 for s in sales if s.state == "committed")
    reserved = sum(s.reserved for s in sales if s.state in ("reserved", "kept"))
    kept = [s for s in sales if s.state == "kept"]
    return {
        "sold": sold,
        "earnings": float(sum(s.earnings or 0.0 for s in sales if s.state == "committed")),
        "privacy_earnings": float(sum(s.privacy_price for s in sales if s.state == "committed")),
        "reserved": reserved,
        "counted": sold + reserved,
        "kept": {
            "sales": len(kept),
            "sold_at_most": sum(s.sold_at_most for s in kept),
            "earnings_at_most": float(sum(s.earnings_at_most for s in kept)),
        },
    }
