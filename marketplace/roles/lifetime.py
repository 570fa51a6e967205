"""A party's admission to a run under its lifetime ledger: charge the run's declared cost first,
or decline and stay out of the run.

When the scenario names a ledger folder (``lifetime.ledgers``), every owner is started only after
:func:`admit` has reserved, on the owner's own ledger, what the run's protocol declares the run may
release about the owner's data (``owner_cost`` of its exchange, from the scenario alone). Building
its role reserves nothing: reserving is a step of starting the party (:func:`admit_party`, done
where parties are started, :func:`marketplace.runtime.nodes.build_node`), so the reservation is on
disk before the party runs, and so before anything can leave. If it does not fit (or the release
has no finite cost, or this request was already charged), the party runs a :class:`DeclinedParty`
instead of its role: it says hello, tells the curator why it declines, and releases nothing;
the curator takes it out of the run and goes on. A ledger that cannot be used (a folder or file
that cannot be written, a file that is not a lifetime ledger) declines the same way, its reason
naming the party, the ledger and what is wrong: the party ends cleanly and the run goes on.

Just before the first message of the protocol leaves the party, :meth:`Admission.mark_left` records
so on the ledger (its party calls it as the node encodes that message:
:meth:`~marketplace.roles.party.Party.sent`). When the party ends, :meth:`Admission.settle`
commits the reservation if any message of the protocol left the party, and rolls it back if
nothing did. A party that dies in between leaves it reserved, which counts as spent until the next
process to open the ledger reconciles it (:meth:`LifetimeLedger.reconcile`: rolled back if nothing
was marked as left, kept if something was); :func:`admit` reconciles each ledger the first time
this process opens it.

A ledger that fails after the admission (a full disk, an SQLite error) fails that party only, never
the process that hosts it: :meth:`Admission.mark_left` raises :class:`LedgerFault` (nothing leaves,
and the party's record says why), and :meth:`Admission.settle` never raises (a reservation it
cannot settle stays reserved, counted as spent, for a later settle or the reconcile). A party that
cannot be started after its reservation rolls the reservation back (:func:`admitted`).

A consumer that keeps a ledger (``lifetime.consumer_budget``) is admitted the same way for what the
run releases about its target data (``consumer_cost``); a declining consumer ends the run as failed
before anything of its data is released.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.errors import cut
from marketplace.messages.kinds import Bye, Error, Shutdown
from marketplace.plugins import Exchange
from marketplace.privacy.lifetime import (
    AlreadyCharged,
    BudgetDeclined,
    Declared,
    LedgerInputError,
    LifetimeLedger,
    ledger_file,
)
from marketplace.privacy.lifetime.known import LedgerGone
from marketplace.privacy.lifetime.ledger import LedgerMismatch, ledger_error
from marketplace.privacy.lifetime.storage import is_blank
from marketplace.privacy.lifetime.terms import SaleTerms
from marketplace.privacy.neighbouring import budget_relation_text
from marketplace.roles import CONSUMER, CURATOR, PeerRole, Role, Send
from marketplace.roles.identity import Identity
from marketplace.roles.open_ledgers import ledger_at
from marketplace.roles.party import Party

log = logging.getLogger(__name__)

DECLINED = "lifetime"
"""``about_kind`` of the ``error`` a declining party sends the curator after its hello."""


@dataclass
class Admission:
    """One party's standing under its lifetime ledger for this run (see the module docstring)."""

    party: str
    path: Path
    request_id: str
    consumer: str
    declared: Declared | None
    state: str
    """``reserved`` (admitted), ``declined``, or ``nothing`` (the run releases nothing of its data);
    after :meth:`settle`: ``committed`` or ``aborted``."""
    reason: str | None = None
    after: dict[str, Any] = field(default_factory=dict)
    left: bool = False
    """Whether :meth:`mark_left` recorded on the ledger that something of the release left."""
    points: int | None = None
    """A protocol that sells points: how many this run may take, as the ledger reserved them under the
    owner's sale terms; None when it sells none."""
    price: float = 0.0
    """The owner's posted price per point for this run (its terms)."""
    priced: bool = False
    """Whether the ledger recorded a sale for this run: the owner has sale terms (a price per point, a
    price per unit eps of privacy loss), whatever the protocol."""
    price_per_eps: float = 0.0
    """The owner's posted price per unit eps of privacy loss (its terms)."""
    privacy_price: float = 0.0
    """What this run's charge costs at that price (:func:`marketplace.privacy.lifetime.pricing.price`)."""
    sale: Any = None
    """After :meth:`settle`: the ledger's record of this run's sale (:class:`~marketplace.privacy.lifetime.sales.Sale`:
    the points sold, the privacy price, and what they earned), when it was priced."""
    ledger_relation: str | None = None
    """The relation the party's ledger keeps its budget under (its text, as the ledger stores it), once opened."""
    charged: dict[str, float] | None = None
    """What the ledger's filter charged for this run, as it recorded it (eps and delta under ``basic``, rho
    under ``zcdp``), after restating the declared cost under the ledger's relation; None when nothing was
    reserved."""

    @property
    def admitted(self) -> bool:
        return self.state != "declined"

    def mark_left(self) -> None:
        """Record on the ledger, durably, that a message of the protocol is about to leave the party
        (once; a no-op unless the run is reserved). The caller hands the message to the transport only
        after this returns; when the ledger no longer reserves the request or cannot be written, it raises
        :class:`LedgerFault` (naming the party and the ledger), and then nothing may leave."""
        if self.state != "reserved" or self.left:
            return
        try:
            with ledger_at(self.path, lambda: _open_existing(self.path)) as ledger:
                ledger.mark_left(self.request_id)
        except (OSError, sqlite3.Error, LedgerInputError) as err:
            text = str(err).removeprefix(f"{self.path}: ") or type(err).__name__
            fault = f"{self.party}: cannot mark its release as left on {self.path}: {text}"
            self.reason = f"{fault}; nothing of its release left it"  # the report's record says why
            log.error("%s", self.reason)
            raise LedgerFault(fault) from None
        self.left = True

    def settle(self, released: bool, sold: int | None = None) -> dict[str, Any]:
        """Commit the reservation if ``released`` (a message of the protocol left the party), with the
        points ``sold`` when the run sold some, roll it back otherwise; returns the report's record.
        Idempotent. A ledger that cannot be written now never raises: the reservation stays ``reserved``
        (counted as spent until the ledger is reconciled) and the record's reason says why."""
        if self.state == "reserved":
            try:
                self._settle(released, sold)
            except (OSError, sqlite3.Error, LedgerInputError) as err:
                text = str(err).removeprefix(f"{self.path}: ") or type(err).__name__
                if self.state == "reserved":
                    # it stays reserved (counted as spent); the next process to open the ledger reconciles it
                    why = (
                        f"{self.party}: could not settle its reservation on the ledger {self.path}: {text}; it "
                        "stays reserved, counted as spent, until the ledger is reconciled (`marketplace ledger "
                        "reconcile`)"
                    )
                else:  # settled on disk; only reading its standing afterwards failed
                    why = (
                        f"{self.party}: its reservation is {self.state} on the ledger {self.path}, but its "
                        f"standing could not be read: {text}"
                    )
                if not self.reason:
                    self.reason = why
                elif why not in self.reason:  # once, however often it is tried again
                    self.reason = f"{self.reason}; {why}"
                log.error("%s", why)
        return self.record()

    def _settle(self, released: bool, sold: int | None) -> None:
        with ledger_at(self.path, lambda: _open_existing(self.path)) as ledger:
            if not released:
                row = ledger.abort(self.request_id)
            elif self.points is not None:
                row = ledger.commit(self.request_id, sold=min(sold or 0, self.points))
            else:
                row = ledger.commit(self.request_id)
            self.state = row.state
            self.after = _standing(ledger)
            if self.priced:
                self.sale = ledger.sale(self.request_id)

    def record(self) -> dict[str, Any]:
        """What the report says of this party's lifetime ledger for the run."""
        cost = (
            None
            if self.declared is None or self.declared.cost is None
            else {"eps": self.declared.cost.eps, "delta": self.declared.cost.delta, "rho": self.declared.cost.rho}
        )
        return {
            "state": self.state,
            "request_id": self.request_id,
            "consumer": self.consumer,
            "what": None if self.declared is None else self.declared.what,
            "cost": cost,
            "relation": None if self.declared is None else self.declared.relation,
            "ledger_relation": self.ledger_relation,
            "charged": self.charged,
            "reason": self.reason,
            "ledger": str(self.path),
            **self.after,
            **({"sale": self._sale()} if self.priced else {}),
        }

    def _sale(self) -> dict[str, Any]:
        """The report's record of this run's sale: price, points reserved, the privacy price (per unit
        eps, and for this run's charge), and, once settled, sold and earned (points and privacy) as the
        ledger recorded them."""
        sale = self.sale
        return {
            "price": self.price,
            "reserved": self.points,
            "sold": None if sale is None else sale.sold,
            "earnings": None if sale is None else sale.earnings,
            "price_per_eps": self.price_per_eps,
            "privacy_price": self.privacy_price,
            "privacy_earnings": None if sale is None else (sale.privacy_price if sale.state == "committed" else 0.0),
        }


def new_request_id() -> str:
    """A fresh request id, unique in every ledger it will be charged to."""
    return f"req-{uuid.uuid4().hex[:16]}"


def request_id_of(config: Any) -> str:
    """The run's request id: ``lifetime.request_id``, or (a party started alone with none) a fresh one."""
    return config.lifetime.request_id or new_request_id()


LEDGERS_ENV = "MARKETPLACE_LEDGERS"
"""Environment variable naming where this party keeps its lifetime ledger, instead of the scenario's
folder (a pod whose kit is read-only keeps it on a volume of its own)."""


def ledger_folder(config: Any) -> Path | None:
    """Where this party's lifetime ledger is: ``$MARKETPLACE_LEDGERS`` when set, else
    ``lifetime.ledgers``; None when the scenario keeps no lifetime ledgers."""
    folder = config.lifetime.ledgers
    if folder is None:
        return None
    return Path(os.environ.get(LEDGERS_ENV) or folder)


def admit(config: Any, party: str, exchange: Exchange, *, request_id: str | None = None) -> Admission | None:
    """Reserve ``party``'s declared cost for this run on its ledger, or decline (module docstring).
    None when the scenario keeps no lifetime ledgers for ``party``."""
    folder = ledger_folder(config)
    life = config.lifetime
    if folder is None or party == CURATOR or (party == CONSUMER and life.consumer_budget is None):
        return None
    request_id = request_id or request_id_of(config)
    name = life.consumer if party == CONSUMER else party
    declared = declared_release(config, party, exchange)
    budget = life.consumer_budget if party == CONSUMER else life.budget_of(party)
    path = ledger_file(folder, name)
    record = f"a row of {name}'s data" if party != CONSUMER else f"a row of {name}'s target data"
    admission = Admission(party, path, request_id, life.consumer, declared, "nothing")
    opened = False
    try:
        folder.mkdir(parents=True, exist_ok=True)

        def opener() -> LifetimeLedger:
            # an existing ledger keeps the budget, relation and filter it was created with; a blank file
            # is one whose creator was killed before its first transaction, created again
            settings = (
                {}
                if path.exists() and not is_blank(path)
                else {
                    "budget": (budget.epsilon, budget.delta),
                    "filter": life.filter,
                    "relation": f"{budget_relation_text(life.relation)} ({record})",
                }
            )
            return LifetimeLedger.open(path, owner=name, **settings)

        with ledger_at(path, opener) as ledger:  # kept open between sessions by an agent (.open_ledgers)
            opened = True
            _reconcile_once(ledger, party)
            return _reserve(ledger, admission, config, party, exchange)
    except (OSError, sqlite3.Error, LedgerInputError, LedgerMismatch) as err:
        # once open, a LedgerInputError is a request id it holds otherwise (another consumer, another cost)
        refused = opened and isinstance(err, LedgerInputError)
        return _unusable(admission, err, problem="refuses the reservation" if refused else None)


def _reserve(ledger: LifetimeLedger, admission: Admission, config: Any, party: str, exchange: Exchange) -> Admission:
    """Reserve ``admission``'s declared cost on ``ledger`` (open), priced under the owner's sale terms
    (when it has some, or its protocol sells points), with the points the run may take when its protocol
    sells points, or record why it declines."""
    life, declared, request_id = config.lifetime, admission.declared, admission.request_id
    most = exchange.points_for_sale(config, party) if party != CONSUMER else None
    terms = None if party == CONSUMER else life.terms_of(party)
    if terms is None and most is not None:
        terms = SaleTerms()
    admission.ledger_relation = ledger.relation
    if declared is None:
        admission.after = _standing(ledger)
        return admission
    try:
        cost = declared.cost
        if cost is None:  # recorded as declined; decline raises BudgetDeclined
            ledger.decline(request_id, consumer=life.consumer, what=declared.what, reason=declared.unbounded)
        else:
            quota = life.consumer_quota if party != CONSUMER else None
            row = ledger.reserve(
                request_id,
                cost,
                consumer=life.consumer,
                what=declared.what,
                relation=declared.relation,
                fresh=True,
                quota=None if quota is None else (quota.epsilon, quota.delta),
                points=most,
                terms=terms,
            )
            admission.state = "reserved"
            admission.charged = {k: v for k, v in row.charged._asdict().items() if v is not None}
            sale = ledger.sale(request_id) if terms is not None else None
            if sale is not None:
                admission.priced, admission.price = True, sale.price
                admission.price_per_eps, admission.privacy_price = sale.price_per_eps, sale.privacy_price
                admission.points = sale.reserved if most is not None else None
    except BudgetDeclined as err:
        admission.state, admission.reason = "declined", err.reason
    except AlreadyCharged as err:
        admission.state, admission.reason = "declined", err.reason
    admission.after = _standing(ledger)
    return admission


def _unusable(admission: Admission, err: BaseException, problem: str | None = None) -> Admission:
    """``admission`` declined because its ledger cannot be used: the reason names the party, the
    ledger and what is wrong with it (the party ends cleanly; the run goes on without it)."""
    if isinstance(err, sqlite3.Error):
        err = ledger_error(admission.path, err)
    text = str(err).removeprefix(f"{admission.path}: ") or type(err).__name__
    admission.state = "declined"
    admission.reason = f"{admission.party}: the ledger {admission.path} {problem or _problem(err)}: {text}"
    log.error("%s", admission.reason)
    return admission


def _problem(err: BaseException) -> str:
    """What is wrong with a ledger that raised ``err`` when opened or written, in a few words."""
    if isinstance(err, LedgerGone):
        return "is refused"
    if isinstance(err, LedgerMismatch):
        return "is not this party's"
    if isinstance(err, LedgerInputError):
        return "is not a privacy ledger"
    return "is not writable"


_RECONCILED: set[Path] = set()
"""The ledgers this process has reconciled: once, the first time it opens each."""


def _reconcile_once(ledger: LifetimeLedger, party: str) -> None:
    """Reconcile ``ledger`` if this process has not yet (see :meth:`LifetimeLedger.reconcile`). An
    absolute path as given is looked up first: an agent admits each owner every session, and resolving
    the path costs a system call per folder of it."""
    given = ledger.path if ledger.path.is_absolute() else None
    if given is not None and given in _RECONCILED:
        return
    key = ledger.path.resolve()
    if key not in _RECONCILED:
        done = ledger.reconcile()
        _RECONCILED.add(key)
        _log_reconciled(done, ledger, party)
    if given is not None:
        _RECONCILED.add(given)


def _log_reconciled(done: dict[str, list[str]], ledger: LifetimeLedger, party: str) -> None:
    """Say what a reconcile settled, when it settled something."""
    if done["rolled_back"] or done["kept"]:
        log.info(
            "%s: reconciled its ledger %s: %d reservation(s) left by a process that is gone rolled back (nothing "
            "had left), %d kept as spent (something had)",
            party,
            ledger.path,
            len(done["rolled_back"]),
            len(done["kept"]),
        )


def declared_release(config: Any, party: str, exchange: Exchange) -> Declared | None:
    """What ``exchange`` declares a run of ``config`` may release about ``party``'s data (its
    ``owner_cost`` or ``consumer_cost``; a protocol that declares nothing has the default, an
    unbounded release). None: nothing of the party's data is released."""
    return exchange.consumer_cost(config) if party == CONSUMER else exchange.owner_cost(config, party)


def _standing(ledger: LifetimeLedger) -> dict[str, Any]:
    spent = ledger.spent()
    left = ledger.limits.remaining(spent)  # from the same read: remaining() would read every row again
    return {
        "filter": ledger.filter,
        "budget": {"eps": ledger.budget[0], "delta": ledger.budget[1]},
        "spent": {k: v for k, v in spent._asdict().items() if v is not None},
        "remaining": {k: v for k, v in left._asdict().items() if v is not None},
    }


class LedgerFault(RuntimeError):
    """A party's ledger failed after its admission (a disk or SQLite error): it names the party and the
    ledger. Raised by :meth:`Admission.mark_left`, so that nothing of the release leaves unrecorded."""


def _open_existing(path: Path) -> LifetimeLedger:
    try:
        return LifetimeLedger.read(path)
    except sqlite3.Error as err:
        raise ledger_error(path, err) from None


class DeclinedParty(Role):
    """The role of a party whose lifetime ledger declined the run: it tells the curator why (an
    ``error`` about ``lifetime``), then says hello, answers anything else with a refusal, and leaves when the
    curator shuts it down. It holds no data and releases nothing."""

    def __init__(self, *, party_id: str, role_name: PeerRole, scenario_name: str, protocol: str, reason: str) -> None:
        super().__init__()
        self.party_id, self.role_name, self.scenario_name = party_id, role_name, scenario_name
        self.protocol, self.reason = protocol, reason
        self.end_status = ""

    def start(self) -> list[Send]:
        # The decline goes first: a party's frames arrive in order, so the curator has excluded this
        # party before its hello can complete the set it starts the protocol on. Hello first, a
        # driver that reads the two frames in separate batches could start with this party.
        return [
            Send(CURATOR, Error(code="refused", detail=cut(f"declined: {self.reason}", 2000), about_kind=DECLINED)),
            self.hello(self.protocol),
        ]

    def handle(self, message: Envelope) -> list[Send]:
        match message.body:
            case Shutdown(status=status):
                self.end_status = status
                self.done = True
                return [Send(message.sender, Bye(), reply_to=message.msg_id)]
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason=f"this party declined the run: {cut(self.reason, 300)}"
        )

    def result(self) -> dict[str, Any]:
        return {"declined": self.reason, "released": False}


def admit_party(config: Any, party: Party, exchange: Exchange) -> Party:
    """The step that starts ``party`` under its lifetime ledger: reserve its declared cost for this
    run (:func:`admit`) before anything can leave it. Returns the party to run: ``party`` itself when
    it keeps no ledger, ``party`` holding its admission when the ledger admits the run (its role is
    told the points reserved, :meth:`Role.reserved`), or a party of the same identity whose role is
    a :class:`DeclinedParty` when the ledger declines it. :func:`settle` reads the admission when the
    party ends; :func:`admitted` also rolls it back when starting the party fails."""
    admission = admit(config, party.party_id, exchange)
    if admission is None:
        return party
    if not admission.admitted:
        return _declined(config, party.identity, admission)
    return _holding(party, admission)


def _declined(config: Any, identity: Identity, admission: Admission) -> Party:
    """A party of ``identity`` whose ledger declined the run: it runs a :class:`DeclinedParty`."""
    declined = DeclinedParty(
        party_id=identity.party_id,
        role_name="consumer" if identity.party_id == CONSUMER else "owner",
        scenario_name=config.name,
        protocol=config.protocol,
        reason=admission.reason or "",
    )
    declined.join(identity)
    return Party(declined, admission=admission)


def _holding(party: Party, admission: Admission) -> Party:
    """``party`` holding the reservation its ledger made (its role told the points reserved)."""
    party.admission = admission
    party.role.reserved(admission.points)
    return party


def start_party(config: Any, party_id: str, exchange: Exchange, identity: Identity, build: Callable[[], Role]) -> Party:
    """Start ``party_id`` under its lifetime ledger: reserve first (:func:`admit`), then ``build()``
    its role only when the ledger admits the run. A declined party builds nothing: it runs a
    :class:`DeclinedParty` of ``identity`` at once, so its hello and its decline reach the curator
    together, before the curator can start the protocol with it (a role built first, as long as an
    admitted one takes, could say hello last, and the curator would start on that hello). When
    ``build()`` raises, the reservation rolls back (nothing can have left a party without a role)."""
    admission = admit(config, party_id, exchange)
    if admission is not None and not admission.admitted:
        return _declined(config, identity, admission)
    try:
        role = build()
    except BaseException:
        if admission is not None:
            admission.settle(False)
        raise
    return Party(role) if admission is None else _holding(Party(role), admission)


@contextmanager
def admitted(config: Any, party: Party, exchange: Exchange) -> Iterator[Party]:
    """:func:`admit_party`, for the block that starts the party: when the block raises, the
    reservation is settled at once (rolled back, since nothing of the protocol can have left a party
    that never started; committed if something did) and the error goes on to the caller."""
    started = admit_party(config, party, exchange)
    try:
        yield started
    except BaseException:
        settle(started)
        raise


def settle(party: Party) -> dict[str, Any] | None:
    """Settle ``party``'s lifetime reservation once it ended (commit if anything of the protocol left
    it, roll back otherwise) and return the report's record; None when it keeps no ledger."""
    admission = party.admission
    if admission is None:
        return None
    return admission.settle(party.traffic.protocol_messages_sent > 0, sold=party.role.points_sold)


__all__ = [
    "DECLINED",
    "Admission",
    "DeclinedParty",
    "LedgerFault",
    "admit",
    "admit_party",
    "admitted",
    "declared_release",
    "ledger_folder",
    "new_request_id",
    "request_id_of",
    "settle",
    "start_party",
]
