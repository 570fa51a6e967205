"""What one request costs each owner, declared from public config only, in the owners' filter.

The scheduler reads the same declared cost the owners reserve on their lifetime ledgers, so a
request it admits is one the ledgers can charge; the ledgers still decide.
"""

from __future__ import annotations

from typing import Any

from marketplace.privacy.lifetime import Charge, Cost, LedgerInputError


class NoOwnerCost(ValueError):
    """A request no owner can be charged for: its protocol declares no finite per-owner cost, or
    its cost cannot be charged under the owners' filter (the message says which)."""


def owner_cost(config: Any, party: str) -> Cost | None:
    """The declared lifetime cost of ``party``'s releases in a run of ``config`` (None: it releases
    nothing). Raises :class:`NoOwnerCost` for a protocol without a finite DP cost per owner."""
    protocol = config.protocol
    if protocol == "sketch":
        s = config.sketch
        if s.epsilon is None:
            raise NoOwnerCost("sketch.epsilon is null: the owners release exact sums, which no lifetime budget can pay for")
        return Cost(eps=s.epsilon, delta=s.delta if s.mechanism == "gaussian" else 0.0)
    if protocol == "stc":
        p = config.stc.privacy
        return Cost.pure(p.epsilon) if p.notion == "dp" else Cost.zcdp(p.rho)
    if protocol == "pfds":
        owners = [f"owner-{i}" for i in range(1, config.parties.owners + 1)]
        n = len(owners) if config.pfds.sharers is None else min(config.pfds.sharers, len(owners))
        return Cost.pure(config.pfds.epsilon) if party in owners[len(owners) - n:] else None
    raise NoOwnerCost(f"protocol {protocol!r} declares no finite privacy cost per owner (summarize hands the "
                      "owners' points to the consumer in the clear), so every owner with a lifetime ledger would "
                      "decline it; a market request needs sketch, stc or pfds")


def declared_costs(config: Any, owners: list[str], filter: str) -> dict[str, tuple[Cost, Charge] | None]:
    """Each owner's declared cost in a run of ``config`` and what ``filter`` charges for it (None
    for an owner that releases nothing). Raises :class:`NoOwnerCost` when no owner releases, or a
    cost the filter cannot charge."""
    out: dict[str, tuple[Cost, Charge] | None] = {}
    for owner in owners:
        cost = owner_cost(config, owner)
        if cost is None:
            out[owner] = None
            continue
        try:
            out[owner] = (cost, cost.charge(filter))
        except LedgerInputError as err:
            raise NoOwnerCost(f"{owner}'s declared cost ({cost.describe()}) cannot be charged by a {filter!r} lifetime "
                              f"ledger: {err}") from None
    if all(v is None for v in out.values()):
        raise NoOwnerCost(f"no owner releases anything in this {config.protocol} request, so it costs nothing and "
                          "serves nothing")
    return out
