"""An owner's lifetime privacy budget: a durable ledger, charged before every release.

* :mod:`.cost`: what a release costs (:class:`Cost`: pure eps, (eps, delta), rho-zCDP, a Gaussian,
  or a mechanism of :mod:`marketplace.privacy.mechanisms`), and what each filter charges for it;
* :mod:`.filters`: the two privacy filters, ``basic`` and ``zcdp``, with their references;
* :mod:`.ledger`: :class:`LifetimeLedger`, one SQLite file per owner (reserve, mark_left, commit, abort,
  reconcile), around :mod:`.opening` (the file opened and its metadata checked), :mod:`.decision` (what a
  reservation decides, without I/O), :mod:`.relations` (the neighbouring relations a cost is restated
  under) and :mod:`.errors`;
* :mod:`.reconcile`: crash recovery: which process holds each reservation, its "left" record, and
  settling what dead processes left reserved;
* :mod:`.terms`: :class:`SaleTerms`, an owner's price per data point and how many points it sells;
* :mod:`.sales`: the points each request reserved, sold and earned under those terms, on the same file;
* :mod:`.storage`: that file's tables, rows (:class:`Reservation`), connection and transactions;
* :mod:`.known`: the record kept beside each ledger, so that one that is gone or emptied is refused;
* :mod:`.check`: a ledger's schema and invariants, verified read-only (``marketplace ledger check``);
* :mod:`.declared`: :class:`Declared`, what a run may release about one party's data (from its protocol);
* :mod:`.gate`: a party's admission to a run: charge the declared cost first, or decline.

>>> import tempfile, pathlib
>>> folder = pathlib.Path(tempfile.mkdtemp())
>>> ledger = LifetimeLedger.open(ledger_file(folder, "owner-1"), owner="owner-1", budget=(1.0, 0.0),
...                              relation="add/remove-one (a row of owner-1's data)")
>>> ledger.reserve("req-1", Cost.pure(0.75), consumer="consumer-a", what="sketch").state
'reserved'
>>> ledger.commit("req-1").state
'committed'
>>> ledger.reserve("req-2", Cost.pure(0.5), consumer="consumer-b", what="sketch")
Traceback (most recent call last):
  ...
marketplace.privacy.lifetime.cost.BudgetDeclined: owner-1: declined request 'req-2' (sketch, ...
>>> ledger.remaining()
Charge(eps=0.25, delta=0.0, rho=None)
>>> ledger.close()
"""

from marketplace.privacy.lifetime.cost import FILTERS, BudgetDeclined, Charge, Cost, LedgerInputError, restate
from marketplace.privacy.lifetime.declared import Declared
from marketplace.privacy.lifetime.filters import bun_steinke_eps, zcdp_budget
from marketplace.privacy.lifetime.ledger import (
    LEDGER_SUFFIX,
    RELATION_WORDS,
    AlreadyCharged,
    LedgerMismatch,
    LedgerUnavailable,
    LifetimeLedger,
    ledger_file,
    relation_kind,
)
from marketplace.privacy.lifetime.sales import SALE_STATES, Sale, TermsDeclined
from marketplace.privacy.lifetime.storage import COUNTED, STATES, Holder, Reservation
from marketplace.privacy.lifetime.terms import SaleTerms

__all__ = [
    "COUNTED",
    "FILTERS",
    "RELATION_WORDS",
    "AlreadyCharged",
    "LEDGER_SUFFIX",
    "STATES",
    "BudgetDeclined",
    "Charge",
    "Cost",
    "Declared",
    "Holder",
    "LedgerInputError",
    "LedgerMismatch",
    "LedgerUnavailable",
    "LifetimeLedger",
    "Reservation",
    "SALE_STATES",
    "Sale",
    "SaleTerms",
    "TermsDeclined",
    "bun_steinke_eps",
    "ledger_file",
    "relation_kind",
    "restate",
    "zcdp_budget",
]
