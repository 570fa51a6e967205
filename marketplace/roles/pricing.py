"""What a request will pay its owners for their privacy, quoted before anything is reserved.

Each owner with sale terms is paid :func:`marketplace.privacy.lifetime.pricing.price` of what its
ledger charges: its ``price_per_eps`` times the charged eps. The quote reads the same declaration the
owners reserve (their protocol's ``owner_cost``), restated under the scenario's relation and charged
under its filter as a ledger created by the scenario does, so a request can be refused for its price
(``lifetime.spending_budget``) before any owner reserves anything. The ledgers still decide: an owner
whose ledger declines the request is paid nothing, and the sale each owner's ledger records is what
it earned.
"""

from __future__ import annotations

import math
from typing import Any

from marketplace.plugins import Exchange
from marketplace.privacy.lifetime import LedgerInputError, restate
from marketplace.privacy.lifetime.pricing import price
from marketplace.roles import owner_id
from marketplace.roles.lifetime import declared_release

SLACK = 1e-9
"""Relative slack on the budget comparison, so that prices summing to the budget exactly (in decimal)
are not refused for a rounding error of the floats."""


def quote(config: Any, exchange: Exchange, owners: list[str] | None = None) -> dict[str, float]:
    """Owner -> what a run of ``config`` would pay it for its privacy loss, for every owner with a
    price per unit eps (``lifetime.terms``, ``lifetime.owner_terms``) that the run releases something
    of. An owner whose declared cost its ledger could not take (it would decline) is left out."""
    life = config.lifetime
    out: dict[str, float] = {}
    for owner in [owner_id(i) for i in range(config.parties.owners)] if owners is None else owners:
        terms = life.terms_of(owner)
        declared = declared_release(config, owner, exchange)
        if terms is None or not terms.price_per_eps or declared is None or declared.cost is None:
            continue
        try:
            charge = restate(declared.cost, declared.relation, life.relation).charge(life.filter)
        except LedgerInputError:  # its ledger declines it: nothing is paid
            continue
        out[owner] = price(charge, terms.price_per_eps)
    return out


def refusal(config: Any, exchange: Exchange, owners: list[str] | None = None) -> str | None:
    """Why a run of ``config`` is refused for its price: the owners' privacy prices (:func:`quote`)
    add up to more than the consumer's ``lifetime.spending_budget``; None when they fit, or when the
    consumer set no spending budget."""
    budget = config.lifetime.spending_budget
    if budget is None:
        return None
    prices = quote(config, exchange, owners)
    total = math.fsum(prices.values())
    if total <= budget * (1 + SLACK) + SLACK:
        return None
    dearest = ", ".join(f"{o} {p:g}" for o, p in sorted(prices.items(), key=lambda item: -item[1])[:3])
    return (
        f"refused before anything was reserved: consumer {config.lifetime.consumer}'s request ({config.protocol}) "
        f"costs {total:g} in privacy prices ({len(prices)} owners at their price_per_eps; the dearest: {dearest}), "
        f"more than its spending budget lifetime.spending_budget={budget:g}"
    )
