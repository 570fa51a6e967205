"""What a party's lifetime ledger was charged for a run, next to the eps a report row states: the one
wording every protocol's terminal rows use, so that the two figures never drift apart unexplained.

A report row states a mechanism's eps under the relation the mechanism holds under (sketch: eps = 0.4
under add/remove-one), as the run's ledgers spent it. The party's lifetime ledger charges something
else when (a) its relation is another one: a cost declared under add/remove-one is restated under a
replace-one relation (:meth:`~marketplace.privacy.lifetime.cost.Cost.as_replace_one`: a replacement is
a removal and an addition, so eps doubles, delta becomes 2 e^eps delta, rho 4 rho); (b) the cost was
declared before the run for its whole plan and charged in full, while the run's releases spent less
(summarize's auction when the run ends before its last round); (c) its filter is ``zcdp``, which
charges rho. :func:`lifetime_charge` reads the figures from the report's ``lifetime`` record (the
ledger's own ``charged``, never a recomputation) and says which of these apply.

>>> record = {"state": "committed", "cost": {"eps": 0.4, "delta": 0.0, "rho": None},
...           "relation": "add/remove-one", "charged": {"eps": 0.8, "delta": 0.0},
...           "ledger_relation": "replace-one (a row of owner-1's data)", "filter": "basic"}
>>> lifetime_charge(record, 0.4).text  # doctest: +ELLIPSIS
"charged eps = 0.8, delta = 0 to its lifetime ledger under replace-one (the ledger's relation), not eps = 0.4: the eps \
above holds under add/remove-one, and a replace-one neighbour is a removal and an addition, so the ledger charges \
it as two add/remove-one steps (group privacy: eps doubles)"
>>> same = dict(record, charged={"eps": 0.4, "delta": 0.0}, ledger_relation="add/remove-one (a row)")
>>> lifetime_charge(same, 0.4).text
"charged the same to its lifetime ledger (add/remove-one, the ledger's relation)"
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from marketplace.privacy.lifetime.relations import relation_kind
from marketplace.privacy.neighbouring import ADD_REMOVE_ONE
from marketplace.reporting.format import fmt

__all__ = ["CHARGED_STATES", "LifetimeCharge", "charge_rows", "lifetime_charge", "lifetime_record"]

CHARGED_STATES = ("committed", "reserved")
"""The states of a lifetime record whose charge counts on the ledger (an aborted one was rolled back)."""

SHOWN = 5
"""Parties named in one :func:`charge_rows` row; the rest are counted."""

DIGITS = 6
"""Significant digits of the figures in the text (report.json holds them exactly)."""

RESTATED = (
    "the eps above holds under add/remove-one, and a replace-one neighbour is a removal and an addition, "
    "so the ledger charges it as two add/remove-one steps (group privacy: eps doubles{more})"
)
DECLARED = (
    "the charge is the cost declared before the run{plan}, kept in full: the run's guarantee is that worst case "
    "over every way it could go (how long it runs, which releases it makes), and the figure above is only what "
    "the releases that ran spent"
)
ZCDP = "the ledger's zcdp filter charges rho (a pure eps release eps^2/2)"


@dataclass(frozen=True)
class LifetimeCharge:
    """One party's lifetime charge for a run beside the eps a row states: the charged figures
    (``eps`` and ``delta`` under the ``basic`` filter, ``rho`` under ``zcdp``), the ledger's relation,
    whether they equal the stated eps (``same``), why not (``reasons``), and the ``text`` a row shows."""

    charged: Mapping[str, float]
    relation: str
    stated: float | None
    same: bool
    reasons: tuple[str, ...]
    text: str

    def fields(self) -> dict[str, Any]:
        """The figures as JSON-ready fields."""
        return {
            "charged": dict(self.charged),
            "ledger_relation": self.relation,
            "stated_eps": self.stated,
            "same": self.same,
            "reasons": list(self.reasons),
        }


def lifetime_charge(
    record: Mapping[str, Any] | None,
    stated: float | None = None,
    *,
    stated_rho: float | None = None,
    whose: str = "its",
    stated_as: str = "",
    plan: str = "",
) -> LifetimeCharge | None:
    """The charge of the lifetime ``record`` (a party's entry of the report's ``lifetime`` section) beside
    ``stated``, the eps the row states (None: the row states none to compare with), and ``stated_rho``, its
    rho when it states one (compared with a ``zcdp`` ledger's charge). ``whose`` names the ledger's holder
    in the text ("its", "each owner's"); ``stated_as`` says what ``stated`` is when it is not the row's own
    figure (e.g. two rows added up); ``plan`` what the declared cost is made of (", the auction over 20
    rounds ..."). None when the record charged nothing that counts (no ledger, declined, rolled back, or
    nothing to charge)."""
    if not record or record.get("state") not in CHARGED_STATES or not record.get("charged"):
        return None
    charged: Mapping[str, float] = record["charged"]
    relation = relation_kind(str(record.get("ledger_relation") or "")) or str(record.get("ledger_relation"))
    key, compare = ("rho", stated_rho) if "rho" in charged else ("eps", stated)
    same = compare is not None and _close(charged[key], compare)
    reasons = []
    cost = record.get("cost") or {}
    if record.get("relation") == ADD_REMOVE_ONE and relation != ADD_REMOVE_ONE:
        more = (", delta becomes 2 e^eps delta" if cost.get("delta") else "") + (
            ", rho 4 rho" if cost.get("rho") else ""
        )
        reasons.append(RESTATED.format(more=more))
    declared = cost.get("eps")
    if stated is not None and declared is not None and not _close(declared, stated):
        reasons.append(DECLARED.format(plan=plan))
    if key == "rho" and not same:
        reasons.append(ZCDP)
    figures = ", ".join(f"{k} = {fmt(float(v), DIGITS)}" for k, v in charged.items())
    ledger = f"{whose} lifetime ledger"
    if same:
        text = f"charged {stated_as} ({figures})" if stated_as else "charged the same"
        text += f" to {ledger} ({relation}, the ledger's relation)"
    else:
        text = f"charged {figures} to {ledger} under {relation} (the ledger's relation)"
        if compare is not None:
            text += f", not {key} = {fmt(float(compare), DIGITS)}" + (f" ({stated_as})" if stated_as else "")
        text += (": " + "; ".join(reasons)) if reasons else ""
    return LifetimeCharge(charged, relation, stated, same, tuple(reasons), text)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def lifetime_record(report: Mapping[str, Any], party: str) -> Mapping[str, Any] | None:
    """``party``'s record in the report's ``lifetime`` section (an owner's, or the consumer's own ledger
    for ``consumer``); None when the run kept no lifetime ledger for it."""
    life = report.get("lifetime") or {}
    if party == "consumer":
        return life.get("consumer_ledger") or None
    return (life.get("owners") or {}).get(party)


def charge_rows(
    report: Mapping[str, Any],
    stated: Mapping[str, float | None],
    rhos: Mapping[str, float | None] | None = None,
    **wording: Any,
) -> list[tuple[str, str]]:
    """``("charged", "owner-1, owner-2: charged ...")`` rows for the parties of ``stated`` (party -> the
    eps its row states; ``rhos``: the rho it states, when it does), one per distinct wording (a run of
    many owners charged alike shows one row); none when the run charged no lifetime ledger of theirs."""
    groups: dict[str, list[str]] = {}
    for party, eps in stated.items():
        rho = None if rhos is None else rhos.get(party)
        charge = lifetime_charge(lifetime_record(report, party), eps, stated_rho=rho, **wording)
        if charge is not None:
            groups.setdefault(charge.text, []).append(party)
    rows = []
    for text, parties in groups.items():
        named = ", ".join(parties[:SHOWN]) + (f" and {len(parties) - SHOWN} more" if len(parties) > SHOWN else "")
        rows.append(("charged", f"{named}: {text}"))
    return rows
