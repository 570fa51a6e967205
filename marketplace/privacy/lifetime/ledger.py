"""An owner's lifetime ledger: every release it ever charged, in one SQLite file of its own.

The file (WAL mode, ``synchronous=FULL``) holds the owner's budget, the neighbouring relation the
budget is stated under, the filter, and one row per request. A release goes through three steps:

1. :meth:`LifetimeLedger.reserve` checks the declared cost against the filter and, in the same
   write transaction, records a ``reserved`` row; it returns only once that row is on disk. A cost
   that does not fit raises :class:`BudgetDeclined` (the decline is recorded too).
2. the caller releases;
3. :meth:`LifetimeLedger.commit` marks the row ``committed``, or :meth:`LifetimeLedger.abort`
   marks it ``aborted`` when nothing left.

A ``reserved`` row counts as spent, exactly like a committed one: after a crash between reserve and
commit the release may have left. To tell, the owner records durably, with :meth:`LifetimeLedger.mark_left`,
the moment something of a release first leaves it (before its first protocol message is handed to the
transport): its "left" record, in the ``attempts`` row that also names the process holding the
reservation. :meth:`LifetimeLedger.reconcile`, run by a process that opens the ledger at its start,
settles what dead processes left reserved: rolled back when no "left" record exists (provably nothing
left), committed when one does (:mod:`.reconcile` keeps those records and settles them). Request ids are
unique: reserving an id again returns its reservation and charges nothing more. Every decision reads
only the declared cost and the rows of the ledger; the owner's data never reaches this module.

Several processes may share one file: each reserve runs in a ``BEGIN IMMEDIATE`` transaction, so
two reservations are serialised and the filter sees every earlier one.

The pieces around the class: :mod:`.opening` (the file opened, its metadata checked),
:mod:`.decision` (what a reservation decides, without I/O), :mod:`.relations` (the neighbouring
relations and restating a cost), :mod:`.errors`; their public names are importable from here too.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from marketplace.privacy.lifetime import sales as selling
from marketplace.privacy.lifetime.cost import BudgetDeclined, Charge, Cost, LedgerInputError, fail
from marketplace.privacy.lifetime.decision import Decision, Request, decide, declined, left_of
from marketplace.privacy.lifetime.errors import (
    ACCESS_ERRORS,
    AlreadyCharged,
    LedgerMismatch,
    LedgerUnavailable,
    ledger_error,
)
from marketplace.privacy.lifetime.filters import Limits, amount
from marketplace.privacy.lifetime.known import known, record_of, refuse_gone, remember_once, set_aside
from marketplace.privacy.lifetime.opening import (
    LEDGER_SUFFIX,
    Wanted,
    check_same,
    ledger_file,
    open_file,
    read_file,
    text_arg,
)
from marketplace.privacy.lifetime.pricing import price
from marketplace.privacy.lifetime.reconcile import hold, holder_of, record_left, settle_gone
from marketplace.privacy.lifetime.relations import RELATION_WORDS, relation_kind, restated
from marketplace.privacy.lifetime.sales import Sale
from marketplace.privacy.lifetime.storage import (
    COUNTED,
    SCHEMA_VERSION,
    Holder,
    Reservation,
    Transaction,
    now,
    reservation_of,
)
from marketplace.privacy.lifetime.terms import SaleTerms

__all__ = [
    "ACCESS_ERRORS",
    "LEDGER_SUFFIX",
    "RELATION_WORDS",
    "AlreadyCharged",
    "LedgerMismatch",
    "LedgerUnavailable",
    "LifetimeLedger",
    "ledger_error",
    "ledger_file",
    "relation_kind",
]


class LifetimeLedger:
    """An owner's durable lifetime ledger (see the module docstring). Make one with :meth:`open`
    (creates or reopens) or :meth:`read` (an existing file only)."""

    def __init__(self, path: Path, connection: sqlite3.Connection, meta: tuple) -> None:
        if meta[1] != SCHEMA_VERSION:
            connection.close()
            raise LedgerInputError(
                f"{path}: a lifetime ledger of schema version {meta[1]!r}; this marketplace "
                f"reads version {SCHEMA_VERSION}"
            )
        self.path = path
        self._db = connection
        _, _, self.owner, self.filter, eps, delta, self.relation, self.created = meta
        self.budget = (eps, delta)
        self.limits = Limits(self.filter, eps, delta)

    # --- opening

    @classmethod
    def open(
        cls,
        path: str | os.PathLike,
        *,
        owner: str,
        budget: tuple[float, float] | None = None,
        relation: Any = None,
        filter: str | None = None,
    ) -> LifetimeLedger:
        """Open the ledger at ``path``, creating it if it does not exist yet.

        Creating needs ``budget`` (eps, delta) and ``relation`` (text, or a
        :class:`~marketplace.privacy.neighbouring.Neighbouring`); ``filter`` is ``"basic"`` (the
        default) or ``"zcdp"``. Reopening checks whatever is given against what is stored and raises
        :class:`LedgerMismatch`, naming both, if it differs: a ledger keeps one owner, budget,
        relation and filter for life."""
        wanted = Wanted.checked(owner, budget, relation, filter)
        path = Path(path)
        db, meta = open_file(path, wanted)
        ledger = cls(path, db, meta)
        try:
            check_same(path, Wanted(ledger.owner, ledger.budget, ledger.relation, ledger.filter), wanted)
            remember_once(path, ledger.owner, ledger.created)
        except BaseException:
            db.close()
            raise
        return ledger

    @classmethod
    def init(
        cls,
        path: str | os.PathLike,
        *,
        owner: str,
        budget: tuple[float, float],
        relation: Any,
        filter: str | None = None,
        force: bool = False,
    ) -> tuple[LifetimeLedger, list[Path]]:
        """Create a fresh ledger at ``path`` on purpose (``marketplace ledger init``). Without ``force``
        a file there, or the record of a ledger that was there, is refused (:class:`.known.LedgerGone`,
        or :class:`LedgerInputError`); with it, the old file (and its ``-wal`` and ``-shm``) is renamed
        aside with a time suffix, never deleted, and the new ledger gets a new record. Returns the new
        ledger (open) and the paths the old files were moved to."""
        path = Path(path)
        record = known(path)
        if not force and path.exists():
            raise LedgerInputError(
                f"{path}: a file is there already; `marketplace ledger init --force` keeps it aside and starts a "
                "fresh ledger"
            )
        if not force and record is not None:
            raise refuse_gone(path, record, "missing")
        moved = set_aside(path) if force else []
        if force:
            record_of(path).unlink(missing_ok=True)
        ledger = cls.open(path, owner=owner, budget=budget, relation=relation, filter=filter)
        return ledger, moved

    @classmethod
    def read(cls, path: str | os.PathLike) -> LifetimeLedger:
        """Open an existing ledger as it is (for ``marketplace ledger show``); never creates one."""
        path = Path(path)
        db, meta = read_file(path)
        try:
            return cls(path, db, meta)
        except (TypeError, ValueError) as err:  # a table named ledger with other columns
            db.close()
            if isinstance(err, LedgerInputError):
                raise
            raise LedgerInputError(f"{path}: not a lifetime ledger (its ledger table holds {meta!r})") from None

    def close(self) -> None:
        """Close the file (everything is already on disk)."""
        self._db.close()

    def __enter__(self) -> LifetimeLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- charging

    def reserve(
        self,
        request_id: str,
        cost: Cost,
        *,
        consumer: str,
        what: str,
        relation: str | None = None,
        fresh: bool = False,
        quota: tuple[float, float] | None = None,
        points: int | None = None,
        terms: SaleTerms | None = None,
    ) -> Reservation:
        """Charge ``cost`` for request ``request_id`` before anything is released, and return the
        reservation once it is on disk. Idempotent: an id already reserved or committed returns its
        reservation unchanged (the same cost must be declared), or, with ``fresh=True``, raises
        :class:`AlreadyCharged` (a caller that would draw new noise must not release again); an id
        that was aborted or declined is checked again. ``relation`` is the neighbouring relation the
        cost is stated under (one of :data:`RELATION_WORDS`; None: the ledger's own), restated under
        the ledger's by :func:`.cost.restate`: an add/remove-one cost on a replace-one ledger is
        charged as :meth:`Cost.as_replace_one`, and a cost the ledger's relation cannot take (a
        replace-one cost on an add/remove-one ledger, a cost under the narrower distinct-points
        relation on either) is declined. ``quota`` (eps,
        delta) caps what this one consumer's requests may be charged together, under the same filter,
        on top of the global budget (which still bounds every consumer together). Raises
        :class:`BudgetDeclined` if the cost does not fit (nothing is charged; the decline is recorded).
        ``points`` and ``terms`` (both or neither): a request that sells up to ``points`` data points under
        the owner's sale ``terms`` reserves, in the same transaction, at most what they leave, or is
        declined with :class:`.sales.TermsDeclined` when they leave none (:mod:`.sales`). ``terms``
        alone (a protocol that sells no points) prices the request's privacy only. Under terms, the
        sale row also records, in the same transaction, the price of the privacy charged
        (``terms.price_per_eps`` per unit eps: :func:`.pricing.price`), earned once committed."""
        where = "LifetimeLedger.reserve"
        request_id = text_arg(request_id, "request_id", where)
        consumer, what = text_arg(consumer, "consumer", where), text_arg(what, "what", where)
        selling.check_sale(points, terms, where)
        if not isinstance(cost, Cost):
            raise fail("cost", where, "a Cost (Cost.pure, Cost.zcdp, Cost.gaussian, Cost.of)", cost)
        cost, charge = self._priced(request_id, cost, relation, consumer=consumer, what=what)
        request = Request(request_id, consumer, what, cost, charge, quota, points, terms)
        with self._write():
            row = self._row(request_id)
            if row is not None and row.state in COUNTED:
                return self._reserved_again(row, request, fresh=fresh)
            decision = self._decide(request)
            self._record(row, request, decision)
            declined = self._declined(request, decision)
        if declined is not None:
            raise declined
        return self._stored_row(request_id)

    def _priced(
        self, request_id: str, cost: Cost, relation: str | None, *, consumer: str, what: str
    ) -> tuple[Cost, Charge]:
        """``cost`` restated under the ledger's relation, and what the ledger's filter charges for
        it. A cost the ledger cannot take (a relation it cannot restate, a cost the filter cannot
        charge) is declined instead (:meth:`decline` records it and raises), before the write that
        would reserve it."""
        declared = cost
        problem = restated(cost, relation, self.owner, self.relation)
        if isinstance(problem, Cost):
            cost, problem = problem, None
        if problem is None:
            try:
                charge = cost.charge(self.filter)
            except LedgerInputError as err:
                problem = str(err)
        if problem is not None:
            self.decline(request_id, consumer=consumer, what=what, reason=problem, cost=declared)
        return cost, charge

    def _reserved_again(self, row: Reservation, request: Request, *, fresh: bool) -> Reservation:
        """Inside the write: a request id the ledger already counts, reserved again (a retry). Its
        reservation, unchanged, when the retry declares the same consumer and cost (a reservation
        still open is held by the retrying process from now on); refused when it declares others,
        or when the caller would draw fresh noise (``fresh``: :class:`AlreadyCharged`)."""
        if fresh:
            raise AlreadyCharged(
                f"{self.owner}: request {request.request_id!r} is already charged here ({row.state} at "
                f"{row.reserved_at}): an earlier attempt may have released, so this one releases nothing "
                "(a new noisy draw would not be charged)",
                row,
            )
        if row.cost != request.cost or row.consumer != request.consumer:
            raise LedgerInputError(
                f"{self.owner}: request {request.request_id!r} was reserved for {row.consumer!r} at "
                f"{'no declared cost' if row.cost is None else row.cost.describe()}; "
                f"a retry must declare the same, got {request.consumer!r} at {request.cost.describe()}"
            )
        if row.state == "reserved":
            hold(self._db, request.request_id, fresh=False)  # the retrying process holds it now
        return row

    def _decide(self, request: Request) -> Decision:
        """Inside the write: whether the request is reserved or declined (:func:`.decision.decide`),
        reading every row that counts, and the sale terms' cap only when it is asked for."""
        return decide(self.limits, request, self._counted(), lambda: self._sale_cap(request))

    def _sale_cap(self, request: Request) -> int:
        """Inside the write: the most points the sale terms let ``request`` reserve (:func:`.sales.cap`)."""
        terms = request.terms
        return 0 if terms is None else selling.cap(self._db, request.consumer, request.points or 0, terms)

    def _record(self, row: Reservation | None, request: Request, decision: Decision) -> None:
        """Inside the write: the request's row, reserved (and held by this process) or declined; a
        new row, or the row of an earlier attempt that was aborted or declined, rewritten; and its
        sale row when it buys points under terms."""
        cost, state = request.cost, decision.state
        values = (request.consumer, request.what, cost.eps, cost.delta, cost.rho, *request.charge, state, now())
        if state == "reserved":
            hold(self._db, request.request_id, fresh=True)
        if row is None:
            self._db.execute(
                "INSERT INTO charges (consumer, what, eps, delta, rho, charged_eps, charged_delta, "
                "charged_rho, state, reserved_at, request_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*values, request.request_id),
            )
        else:
            self._db.execute(
                "UPDATE charges SET consumer = ?, what = ?, eps = ?, delta = ?, rho = ?, charged_eps = ?, "
                "charged_delta = ?, charged_rho = ?, state = ?, reserved_at = ?, settled_at = NULL "
                "WHERE request_id = ?",
                (*values, request.request_id),
            )
        if request.terms is not None:  # priced: the charge, its price and the sale in this one transaction
            selling.record(
                self._db,
                request.request_id,
                request.consumer,
                request.terms,
                max(decision.cap, 0),
                state,
                privacy_price=price(request.charge, request.terms.price_per_eps),
            )

    def _declined(self, request: Request, decision: Decision) -> BudgetDeclined | None:
        """Inside the write: the error of a declined request, saying what declined it (the sale
        terms, the consumer's quota, or the budget: :func:`.decision.declined`) and what is left of
        it; None when it was reserved. Raised by :meth:`reserve` once the decline is on disk."""
        if decision.sold_out and request.terms is not None:
            return selling.terms_declined(
                self._db,
                self.owner,
                request.request_id,
                request.what,
                request.consumer,
                request.points or 0,
                request.terms,
                request.cost,
                left_of(self.limits, decision),
                self.filter,
            )
        return declined(self.owner, self.limits, self.budget, request, decision)

    def decline(self, request_id: str, *, consumer: str, what: str, reason: str, cost: Cost | None = None) -> None:
        """Record that request ``request_id`` was declined for ``reason`` without charging anything
        (a release with no finite declared cost, a relation the ledger cannot take), then raise
        :class:`BudgetDeclined` with that reason. An id the ledger already counts is left as it is."""
        where = "LifetimeLedger.decline"
        request_id = text_arg(request_id, "request_id", where)
        consumer, what, reason = (
            text_arg(consumer, "consumer", where),
            text_arg(what, "what", where),
            text_arg(reason, "reason", where),
        )
        with self._write():
            row = self._row(request_id)
            if row is None:
                self._db.execute(
                    "INSERT INTO charges (consumer, what, eps, delta, rho, charged_eps, charged_delta, "
                    "charged_rho, state, reserved_at, request_id) VALUES (?, ?, ?, ?, ?, NULL, NULL, NULL, "
                    "'declined', ?, ?)",
                    (
                        consumer,
                        what,
                        None if cost is None else cost.eps,
                        0.0 if cost is None else cost.delta,
                        None if cost is None else cost.rho,
                        now(),
                        request_id,
                    ),
                )
            elif row.state not in COUNTED:
                self._db.execute(
                    "UPDATE charges SET state = 'declined', reserved_at = ?, settled_at = NULL WHERE request_id = ?",
                    (now(), request_id),
                )
        left = self.remaining()
        raise BudgetDeclined(
            f"{self.owner}: declined request {request_id!r} ({what}, for {consumer}): {reason}",
            owner=self.owner,
            request_id=request_id,
            cost=cost,
            remaining=left,
            filter=self.filter,
        )

    def commit(self, request_id: str, sold: int | None = None) -> Reservation:
        """Mark a reservation committed: its release left. Committing twice is a no-op. A request that
        reserved points to sell needs ``sold`` (0 <= sold <= reserved): the points it sold, recorded
        with their earnings in the same transaction (:func:`.sales.settle`)."""
        return self._settle(request_id, "committed", "LifetimeLedger.commit", sold)

    def abort(self, request_id: str) -> Reservation:
        """Roll back a reservation whose release never left: its cost no longer counts. Aborting
        twice is a no-op; a committed release cannot be aborted."""
        return self._settle(request_id, "aborted", "LifetimeLedger.abort")

    def mark_left(self, request_id: str) -> Reservation:
        """Record, durably, that something of request ``request_id``'s release is leaving the owner: call it
        before the first protocol message is handed to the transport. From then on
        :meth:`reconcile` keeps the reservation as spent; before, it may roll it back (nothing left).
        Idempotent (the first time is kept). Raises :class:`LedgerInputError` when the request is not
        reserved or committed here: then nothing of it may leave (a reconcile rolled it back, say)."""
        where = "LifetimeLedger.mark_left"
        request_id = text_arg(request_id, "request_id", where)
        with self._write():
            row = self._row(request_id)
            if row is None or row.state not in COUNTED:
                state = "unknown to the ledger" if row is None else row.state
                raise LedgerInputError(
                    f"{self.owner}: {where}: request {request_id!r} is {state}, not reserved: nothing of its "
                    "release may leave"
                )
            record_left(self._db, request_id)
        return row

    def holder(self, request_id: str) -> Holder | None:
        """The process that holds request ``request_id``'s reservation, and its "left" record; None when
        the ledger has no such record (a ledger written before it kept them, or no such request)."""
        return holder_of(self._db, request_id)

    def reconcile(self) -> dict[str, list[str]]:
        """Settle what processes that are gone left ``reserved`` (a crash between reserve and settle):
        a reservation with no "left" record (:meth:`mark_left`) is rolled back (``aborted``: provably
        nothing of it left), one with a "left" record is committed (something may have left). Returns
        ``{"rolled_back": [...], "kept": [...], "untouched": [...]}`` (request ids).

        Only a reservation whose holder is provably gone is touched (a dead pid of this host, or another
        host's reservation made before this process started; :func:`.reconcile.settle_gone` says why);
        any other stays ``reserved`` and counts as spent, the safe side. Run by a process that opens the
        ledger at its start; ``marketplace ledger show`` never runs it."""
        with self._write():
            return settle_gone(self._db)

    def _settle(self, request_id: str, state: str, where: str, sold: int | None = None) -> Reservation:
        request_id = text_arg(request_id, "request_id", where)
        with self._write():
            row = self._row(request_id)
            if row is None:
                raise LedgerInputError(f"{self.owner}: {where}: no request {request_id!r} in the ledger")
            if row.state == state:
                return row
            if row.state != "reserved":
                raise LedgerInputError(f"{self.owner}: {where}: request {request_id!r} is {row.state}, not reserved")
            selling.settle(self._db, self.owner, request_id, state, sold, where)
            self._db.execute(
                "UPDATE charges SET state = ?, settled_at = ? WHERE request_id = ?", (state, now(), request_id)
            )
        return self._stored_row(request_id)

    # --- reading

    def history(self) -> list[Reservation]:
        """Every request, in the order it was first reserved (declined and aborted ones too)."""
        return self._rows()

    def sale(self, request_id: str) -> Sale | None:
        """Request ``request_id``'s sale (:mod:`.sales`), or None when it reserved no points to sell."""
        return selling.sale_of(self._db, request_id)

    def sales(self) -> list[Sale]:
        """Every sale, in the order it was first reserved."""
        return selling.all_sales(self._db)

    def sales_standing(self, consumer: str | None = None) -> dict[str, Any]:
        """Points sold, earnings, points reserved and what the terms leave (:func:`.sales.standing`)."""
        return selling.standing(self._db, consumer)

    def spent(self) -> Charge:
        """What the filter has charged so far: (eps, delta) under ``basic``, rho under ``zcdp``.
        Reserved releases count (they may have left)."""
        return self.limits.spent(c for _, c in self._counted())

    def remaining(self) -> Charge:
        """What a further release may still be charged, in the filter's terms."""
        return self.limits.remaining(self.spent())

    def guarantee(self) -> tuple[float, float]:
        """The (eps, delta)-DP guarantee everything charged so far has, under the ledger's relation."""
        return self.limits.guarantee(self.spent())

    def _counted(self) -> list[tuple[str, Charge]]:
        """(consumer, what was charged) of every row that counts as spent: only the columns the
        filter reads, so a reservation stays cheap on a ledger of many thousand requests."""
        return [
            (who, Charge(e, d, r))
            for who, e, d, r in self._db.execute(
                "SELECT consumer, charged_eps, charged_delta, charged_rho FROM charges "
                "WHERE state IN ('reserved', 'committed') ORDER BY seq"
            )
        ]

    def _rows(self) -> list[Reservation]:
        return [reservation_of(r) for r in self._db.execute("SELECT * FROM charges ORDER BY seq")]

    def _row(self, request_id: str) -> Reservation | None:
        found = self._db.execute("SELECT * FROM charges WHERE request_id = ?", (request_id,)).fetchone()
        return None if found is None else reservation_of(found)

    def _stored_row(self, request_id: str) -> Reservation:
        """The row of a request this ledger has just written."""
        row = self._row(request_id)
        if row is None:
            raise LedgerInputError(f"{self.owner}: request {request_id!r} is not in the ledger {self.path}")
        return row

    def _write(self) -> Transaction:
        return Transaction(self._db)

    def __repr__(self) -> str:
        spent = amount(self.spent())
        return f"LifetimeLedger({str(self.path)!r}, owner={self.owner!r}, filter={self.filter!r}, spent={spent})"
