"""What a served marketplace sells, as a consumer may see it before it buys: ``marketplace catalogue``.

The server answers a :class:`~.control.CatalogueAsk` from what it already holds, never from an
owner's rows or ledger: the marketplace's file (public: every kit has it as ``market.yaml``), the
protocols installed, the owners whose agents are connected, and the terms each agent posted
(:class:`~.control.OwnerTerms`). Nothing here touches a socket or a file: the server hands it a
:class:`MarketView` and sends what comes back.

What is public, and what is not:

* **the schema** (``data``) and the lifetime settings (relation, filter, each owner's stated
  budget, the marketplace's sale terms): the marketplace's file;
* **the protocols**, each with its default settings and the bounds of every setting: code;
* **the owners present** and their **posted terms** (price per point, points sold in a lifetime and
  to one consumer), as their agents posted them: an owner's terms are a public offer;
* **what this server admitted** of each owner's budget since it started: the declared cost of every
  session it started (:mod:`.admission`). Each declared cost is a function of the request's public
  settings, and which requests started is decided by the scheduling rule on those costs and public
  budgets only: it depends on no owner's data.
* **not the ledgers' spent budget**, nor the points an owner has sold: a reservation is kept or
  rolled back by whether anything of the owner's release left, and points are sold when the
  curator selects them: in a protocol that selects (summarize), both depend on the owners' rows.
  The ledgers' own standing is therefore left out (:data:`NOT_PUBLIC` says so in the answer).
* **not any row count**, nor anything computed from an owner's rows.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from marketplace.privacy.lifetime.terms import SaleTerms
from marketplace.scenario import Scenario
from marketplace.service import control

NOT_PUBLIC = (
    "each owner's ledger standing (the budget it has spent, the points it has sold) is not shown: a "
    "reservation is kept or rolled back by whether anything of the owner's release left, and points are "
    "sold when the curator selects them, which in a protocol that selects (summarize) depends on the owners' "
    "rows; row counts and anything else computed from an owner's rows are never shown"
)
ADMITTED_NOTE = (
    "admitted: the declared cost of every session this server started for the owner since it started "
    "(public request costs, admitted by the scheduling rule on public figures): not the ledger's spent, "
    "which also holds sessions of earlier servers and has given back the reservations of sessions where "
    "nothing of the owner's left"
)
BUDGET_NOTE = "budget: as the marketplace's file states it; a ledger made earlier keeps the budget it was made with"
MAX_BOUNDS = 400
"""The most settings one protocol lists bounds for (a protocol's section is a few dozen)."""


@dataclass(frozen=True)
class MarketView:
    """What the server holds that a catalogue or a quote reads: the marketplace (its file), its
    owners, those whose agents are connected, the terms each agent posted (the fields it set; the
    others are the marketplace's), the declared costs admitted per owner (:attr:`.admission.Admission.spent`)
    and the scheduling rule."""

    market: Scenario
    owners: list[str]
    present: frozenset[str]
    posted: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    admitted: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    rule: str = "fcfs"


def posted_terms(message: control.OwnerTerms) -> dict[str, Any]:
    """The fields of an owner's sale terms its agent set (:class:`~.control.OwnerTerms`)."""
    given = {name: getattr(message, name) for name in message.__struct_fields__}
    return {name: value for name, value in given.items() if value is not None}


def owner_terms(view: MarketView, owner: str) -> SaleTerms | None:
    """``owner``'s sale terms as its ledger applies them: each field its agent posted replaces the
    marketplace's (as :func:`marketplace.service.agent.own_terms` does in the agent); None when
    neither sets any."""
    market = view.market.config.lifetime.terms_of(owner)
    fields = {f.name for f in dataclasses.fields(SaleTerms)}  # a posted field these terms do not have is left out
    given = {name: value for name, value in (view.posted.get(owner) or {}).items() if name in fields}
    if not given:
        return market
    return SaleTerms.from_dict({**(market.to_dict() if market is not None else {}), **given})


def catalogue(view: MarketView, protocols: Mapping[str, Any]) -> dict[str, Any]:
    """The catalogue (module docstring); ``protocols``: the installed protocols' specs by name
    (:func:`marketplace.plugins.protocols`)."""
    config = view.market.config
    life = config.lifetime
    data = view.market.raw.get("data") or {}
    return {
        "market": {
            "name": config.name,
            "owners": len(view.owners),
            "owners_present": len(view.present),
            "rule": view.rule,
            "relation": life.relation,
            "filter": life.filter,
            "consumer_quota": _budget(life.consumer_quota),
        },
        "schema": {"kind": "schema" if config.data.schema_only else "simulated", "data": data},
        "protocols": {name: protocol_entry(spec) for name, spec in sorted(protocols.items())},
        "owners": [owner_entry(view, owner) for owner in view.owners if owner in view.present],
        "notes": {"budget": BUDGET_NOTE, "admitted": ADMITTED_NOTE, "not_public": NOT_PUBLIC},
    }


def owner_entry(view: MarketView, owner: str) -> dict[str, Any]:
    """One present owner's posted terms and public budget standing."""
    life = view.market.config.lifetime
    terms = owner_terms(view, owner)
    return {
        "owner": owner,
        "terms": None if terms is None else terms.to_dict(),
        "terms_from": "agent" if view.posted.get(owner) else "market",
        "budget": _budget(life.budget_of(owner)),
        "admitted": dict(view.admitted.get(owner) or {}),
    }


def protocol_entry(spec: Any) -> dict[str, Any]:
    """A protocol's summary, default settings and the bounds of its settings (from its section's
    dataclass: :mod:`marketplace.schema` markers)."""
    from marketplace.schema import to_plain

    try:
        defaults = to_plain(spec.config())
    except Exception as err:  # noqa: BLE001 - a plug-in's section that cannot be built with no arguments
        defaults = {"unavailable": f"{type(err).__name__}: {err}"}
    return {"summary": spec.summary, "settings": defaults, "bounds": dict(bounds_of(spec.config))}


def bounds_of(cls: type, prefix: str = "") -> Iterable[tuple[str, str]]:
    """(dotted key, its bounds) for every numeric range and every closed choice in the dataclass
    ``cls`` and those nested in it (at most :data:`MAX_BOUNDS`)."""
    from marketplace.schema import Range

    out: list[tuple[str, str]] = []

    def walk(kind: type, path: str, depth: int) -> None:
        try:
            hints = typing.get_type_hints(kind, include_extras=True)
        except Exception:  # noqa: BLE001 - hints that do not resolve: no bounds listed for them
            return
        for f in dataclasses.fields(kind):
            key, hint = f"{path}{f.name}", hints.get(f.name)
            ranges = [m for m in getattr(hint, "__metadata__", ()) if isinstance(m, Range)]
            inner = _unwrap(hint)
            if ranges:
                out.append((key, ranges[0].describe()))
            elif typing.get_origin(inner) is typing.Literal:
                out.append((key, "one of " + ", ".join(repr(a) for a in typing.get_args(inner))))
            elif isinstance(inner, type) and dataclasses.is_dataclass(inner) and depth < 4:
                walk(inner, f"{key}.", depth + 1)

    if dataclasses.is_dataclass(cls):
        walk(cls, prefix, 0)
    return out[:MAX_BOUNDS]


def _unwrap(hint: Any) -> Any:
    """``hint`` without ``Annotated`` and without a ``None`` option."""
    if typing.get_origin(hint) is typing.Annotated:
        return _unwrap(typing.get_args(hint)[0])
    options = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(options) == 1:
        return _unwrap(options[0])
    return hint


def _budget(budget: Any) -> dict[str, float] | None:
    return None if budget is None else {"epsilon": budget.epsilon, "delta": budget.delta}
