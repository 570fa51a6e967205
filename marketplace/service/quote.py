"""What a request would cost, before it is sent: ``marketplace quote``.

The server answers a :class:`~.control.QuoteAsk` as it checks a request that arrives
(:func:`.sessions.prepare_request`: the session's scenario, its data built), and then, instead of
queueing it, says:

* **privacy**: what each owner's ledger would be charged, the declared cost of the request's
  protocol (:func:`marketplace.scheduling.costs.declared_costs`, the one place the admission and the
  ledgers read it), restated under the ledgers' relation and charged as their filter charges it;
* **money**: what the consumer would pay at most, from the owners' posted terms: points at their
  price per point, and the privacy each ledger would be charged at its price per unit eps, by the
  ledgers' own price function (:func:`quote_money`, the one place a quote prices a request);
* **declines**: which owners would not take part, and why, as far as public figures decide it. An
  owner that is not connected is not invited. An owner whose ledger would decline the request even
  if it had spent nothing (the charge alone is over its budget or the consumer quota; its terms sell
  no points) is run through the ledger's own decision (:func:`marketplace.privacy.lifetime.decision.decide`)
  on an empty ledger. Whether any other owner declines is decided by its ledger when the request
  runs, from what it has spent, which only its agent holds (:data:`LEDGER_DECIDES`).

Nothing is queued, reserved, charged or recorded: no ledger is opened, and the server's admission
does not see the quote. Nothing here touches a socket or a file but the world the server's cache builds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from marketplace.privacy.lifetime.decision import Request, decide
from marketplace.privacy.lifetime.filters import Limits
from marketplace.privacy.lifetime.terms import SaleTerms
from marketplace.scenario import Scenario, ScenarioError
from marketplace.service.catalogue import MarketView, owner_terms

LEDGER_DECIDES = (
    "an owner not listed as declining may still decline: its ledger decides when the request runs, from what it "
    "has spent (which only its agent holds); the catalogue's admitted figures say what this server has started"
)
NOT_PRICED = (
    "this protocol sells no points and no owner taking part posted a price per unit eps (price_per_eps): "
    "it costs the owners privacy, the consumer no money"
)
QUOTE_SESSION = "quote"
"""The request id a quoted scenario is read under (no ledger ever sees it)."""


def quote(
    view: MarketView, request_text: str, consumer: str, build: Callable[[Scenario, Any], Any]
) -> dict[str, Any] | str:
    """The quote of ``consumer``'s request ``request_text`` on the marketplace ``view`` (module
    docstring), or why it cannot run here (the words a request's refusal would have)."""
    from marketplace import plugins
    from marketplace.runtime import prepare_world
    from marketplace.scheduling.costs import NoOwnerCost, declared_costs
    from marketplace.service.sessions import session_scenario

    life = view.market.config.lifetime
    try:
        scenario = session_scenario(
            view.market, request_text, session=QUOTE_SESSION, consumer=consumer, source=f"{consumer}'s request"
        )
        exchange = plugins.exchange(scenario.config.protocol)
        prepare_world(scenario, exchange, build=build)
        costs = declared_costs(scenario.config, view.owners, life.relation, life.filter, exchange)
    except ScenarioError as err:
        return str(err)
    except NoOwnerCost as err:
        return f"{consumer}'s request: {err}"
    except (ValueError, OSError, ArithmeticError, plugins.PluginError) as err:
        return f"{consumer}'s request: {type(err).__name__}: {err}"
    config = scenario.config
    points = {o: exchange.points_for_sale(config, o) for o in view.owners}
    terms = {o: owner_terms(view, o) for o in view.owners}
    owners = {}
    for owner in view.owners:
        cost = costs.get(owner)
        owners[owner] = {
            "present": owner in view.present,
            "privacy": None
            if cost is None
            else {
                "declared": cost[0].describe(),
                "charge": {k: v for k, v in cost[1]._asdict().items() if v is not None},
            },
            "declines": declines(view, owner, consumer, cost, points[owner], terms[owner]),
        }
    return {
        "protocol": config.protocol,
        "name": config.name,
        "consumer": consumer,
        "relation": life.relation,
        "filter": life.filter,
        "owners": owners,
        "money": quote_money(
            points,
            terms,
            spending_budget(config),
            taking_part=[o for o in view.owners if not owners[o]["declines"]],
            privacy_prices=privacy_prices(costs, terms),
        ),
        "notes": {"declines": LEDGER_DECIDES},
        "reserved": False,
    }


def declines(
    view: MarketView, owner: str, consumer: str, cost: Any, points: int | None, terms: SaleTerms | None
) -> str | None:
    """Why ``owner`` would not take part in the request whatever its ledger has spent, or None
    (module docstring). ``cost``: its declared (cost, charge), None when nothing of its data is released."""
    if owner not in view.present:
        return "not connected: a session invites only the owners present when it starts"
    if cost is None:
        return None  # nothing of its data is released: nothing to decline
    life = view.market.config.lifetime
    budget, quota = life.budget_of(owner), life.consumer_quota
    sale_terms = None if points is None else terms or SaleTerms()
    request = Request(
        QUOTE_SESSION,
        consumer,
        "quote",
        cost[0],
        cost[1],
        None if quota is None else (quota.epsilon, quota.delta),
        points,
        sale_terms,
    )
    limits = Limits(life.filter, budget.epsilon, budget.delta)
    decision = decide(limits, request, [], lambda: sale_terms.cap(points or 0) if sale_terms is not None else 0)
    if decision.state != "declined":
        return None
    if decision.over_quota:
        return "its ledger declines it on any record: the charge alone is over the per-consumer quota"
    if decision.sold_out:
        return f"its sale terms ({sale_terms.describe() if sale_terms else 'none'}) sell no points"
    return "its ledger declines it on any record: the charge alone is over the owner's lifetime budget"


def spending_budget(config: Any) -> float | None:
    """The most the consumer said it pays (a protocol section's ``spending_budget``; None: no limit)."""
    section = getattr(config, config.protocol, None)
    value = getattr(section, "spending_budget", None)
    return None if value is None else float(value)


def privacy_prices(costs: Mapping[str, Any], terms: Mapping[str, SaleTerms | None]) -> dict[str, float]:
    """Owner -> what its ledger would price the charge of its declared cost (``costs``: owner ->
    (declared cost, charge)) at its posted ``price_per_eps``: the ledger's own price function
    (:func:`marketplace.privacy.lifetime.pricing.price`), so the quote and the sale agree."""
    from marketplace.privacy.lifetime.pricing import price

    out: dict[str, float] = {}
    for owner, cost in costs.items():
        owner_terms_ = terms.get(owner)
        if cost is not None and owner_terms_ is not None and owner_terms_.price_per_eps:
            out[owner] = price(cost[1], owner_terms_.price_per_eps)
    return out


def quote_money(
    points: Mapping[str, int | None],
    terms: Mapping[str, SaleTerms | None],
    budget: float | None = None,
    *,
    taking_part: Iterable[str] | None = None,
    privacy_prices: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """What the request costs the consumer in money, at most: for each owner taking part (``taking_part``;
    None: every owner in ``points``), its posted price per point times the most points the request may
    buy of it (``points``: the protocol's ``points_for_sale``, None when it sells none), within what the
    owner's terms sell on an empty record, plus the price of the privacy its ledger would be charged
    (``privacy_prices``, :func:`privacy_prices`); in all, their sum, the points' part within the
    consumer's own ``budget`` when it set one (a protocol's ``spending_budget`` bounds what it pays for
    points). The one place a quote prices a request, and what ``request --max-price`` compares with."""
    part = set(points) if taking_part is None else set(taking_part)
    for_points: dict[str, float] = {}
    for owner, most in points.items():
        owner_terms_ = terms.get(owner)
        if most is None or owner_terms_ is None or owner not in part:
            continue
        for_points[owner] = owner_terms_.price * max(0, owner_terms_.cap(most))
    for_privacy = {o: p for o, p in (privacy_prices or {}).items() if o in part and p > 0}
    points_total, privacy_total = math.fsum(for_points.values()), math.fsum(for_privacy.values())
    kinds = [
        name
        for name, priced in (
            ("per point", any(most is not None for most in points.values())),
            ("per unit eps of privacy loss", bool(for_privacy)),
        )
        if priced
    ]
    return {
        "priced": " and ".join(kinds) if kinds else NOT_PRICED,
        "per_owner": {
            o: math.fsum((for_points.get(o, 0.0), for_privacy.get(o, 0.0))) for o in sorted({*for_points, *for_privacy})
        },
        "privacy": for_privacy,
        "at_most": (points_total if budget is None else min(points_total, budget)) + privacy_total,
        "spending_budget": budget,
    }
