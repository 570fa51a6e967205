"""What one request costs each owner, declared from public config only, in the owners' filter.

The scheduler reads the declaration the owners themselves reserve on their lifetime ledgers (the
``owner_cost`` of the request's protocol, :mod:`marketplace.privacy.lifetime.declared`), restated
under the ledgers' neighbouring relation as a ledger restates it, and charged as the ledgers' filter
charges it. So a request the scheduler admits is one the ledgers can charge; the ledgers still decide.
"""

from __future__ import annotations

from typing import Any

from marketplace.privacy.lifetime import Charge, Cost, LedgerInputError, restate
from marketplace.privacy.neighbouring import BUDGET_RELATIONS as MARKET_RELATIONS
from marketplace.privacy.neighbouring import budget_relation_name
from marketplace.roles.lifetime import declared_release


class NoOwnerCost(ValueError):
    """A request no owner can be charged for: its protocol declares no finite per-owner cost, or
    its cost cannot be charged under the owners' relation and filter (the message says which)."""


def owner_cost(config: Any, party: str, relation: str, exchange: Any) -> Cost | None:
    """``party``'s declared cost for a run of ``config``, stated under ``relation`` (the ledgers'),
    or None when the run releases nothing of its data. Raises :class:`NoOwnerCost` when the
    protocol declares no finite cost, or one that cannot be restated under ``relation``. ``exchange`` is
    the request's protocol's (:func:`marketplace.plugins.exchange`), resolved by the caller."""
    declared = declared_release(config, party, exchange)
    if declared is None:
        return None
    if declared.cost is None:
        raise NoOwnerCost(
            f"{config.protocol!r} has no finite privacy cost per owner ({declared.unbounded}), so every "
            "owner with a lifetime ledger would decline it; a market request needs a protocol whose owners "
            "release under differential privacy (sketch, stc, pfds, and summarize in its private form with the "
            "composed auction)"
        )
    try:
        return restate(declared.cost, declared.relation, relation)  # as the owners' ledgers restate it
    except LedgerInputError as err:
        if declared.relation == "add/remove-one":
            raise NoOwnerCost(f"{party}'s declared cost cannot be stated under replace-one: {err}") from None
        name = budget_relation_name(declared.relation)  # replace-one-distinct: the summarize auction's
        if name not in MARKET_RELATIONS:  # a relation no budget is stated under
            raise NoOwnerCost(
                f"{party}'s cost is declared under {declared.relation!r}, which no market ledger "
                f"relation ({', '.join(MARKET_RELATIONS)}) can take: {err}"
            ) from None
        raise NoOwnerCost(
            f"{party}'s cost is declared under {declared.relation!r}, which the owners' ledgers (stated "
            f"under {relation!r}) cannot take: set market.relation to {name!r}"
        ) from None


def declared_costs(
    config: Any, owners: list[str], relation: str, filter: str, exchange: Any
) -> dict[str, tuple[Cost, Charge] | None]:
    """Each owner's declared cost in a run of ``config`` under ``relation``, and what ``filter``
    charges for it (None for an owner that releases nothing). Raises :class:`NoOwnerCost` when no
    owner releases, or for a cost the relation or the filter cannot take."""
    out: dict[str, tuple[Cost, Charge] | None] = {}
    for owner in owners:
        cost = owner_cost(config, owner, relation, exchange)
        if cost is None:
            out[owner] = None
            continue
        try:
            out[owner] = (cost, cost.charge(filter))
        except LedgerInputError as err:
            raise NoOwnerCost(
                f"{owner}'s declared cost ({cost.describe()}) cannot be charged by a {filter!r} lifetime ledger: {err}"
            ) from None
    if all(v is None for v in out.values()):
        raise NoOwnerCost(
            f"no owner releases anything in this {config.protocol} request, so it costs nothing and serves nothing"
        )
    return out
