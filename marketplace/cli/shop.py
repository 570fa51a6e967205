"""``marketplace catalogue`` and ``marketplace quote``: what a served marketplace sells, and what a
request would cost, asked before buying (:func:`marketplace.service.api.catalogue`,
:func:`marketplace.service.api.quote`); and ``request --max-price``'s value (:func:`max_price`)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from marketplace.cli.common import EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE


def add_shop_parsers(sub: argparse._SubParsersAction) -> None:
    """``marketplace catalogue --market ... --keys ...`` and ``marketplace quote REQUEST --market ... --keys ...``."""
    cat = sub.add_parser(
        "catalogue",
        help="what a marketplace that stays up sells: its schema, protocols, owners present and their terms",
        description="Ask the marketplace at --market, with the consumer kit --keys, what it sells: its data schema, "
        "the protocols it serves with their settings and bounds, the owners present with their posted sale terms "
        "and public budget standing, and what it does not show and why. Nothing is queued or charged.",
    )
    _connection_flags(cat)
    cat.set_defaults(func=catalogue_command)
    quote = sub.add_parser(
        "quote",
        help="what a request would cost each owner in privacy and you in money, before sending it",
        description="Ask the marketplace at --market what REQUEST would cost: the privacy each owner's ledger would "
        "be charged (its declared cost), the most money you would pay at the owners' posted terms, and which "
        "owners would decline and why. Nothing is queued, reserved, charged or recorded.",
    )
    quote.add_argument("scenario", metavar="REQUEST", help="the request: a scenario file, as for marketplace request")
    quote.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    quote.add_argument(
        "--schema", metavar="MARKET.yaml", help="the marketplace's file (default: market.yaml in --keys)"
    )
    _connection_flags(quote)
    quote.set_defaults(func=quote_command)


def _connection_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--market", required=True, metavar="tcp://HOST:PORT")
    parser.add_argument("--keys", required=True, metavar="DIR", help="this consumer's kit")
    parser.add_argument("--wait", type=float, default=60.0, metavar="SECONDS", help="give up after this long")
    parser.add_argument("--json", action="store_true", help="print the answer as JSON")


def max_price(text: str) -> float:
    """``--max-price``'s value: a finite number >= 0 (argparse names the flag)."""
    from marketplace.service.asking import check_max_price

    try:
        return check_max_price(text, "--max-price")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}") from None


def refusal(err: BaseException) -> str:
    """A request's refusal as the command line says it: a price over ``--max-price`` names the flag."""
    from marketplace.service.asking import MaxPriceExceeded

    return err.named("--max-price") if isinstance(err, MaxPriceExceeded) else str(err)


def catalogue_command(args: argparse.Namespace) -> int:
    """``marketplace catalogue``: the catalogue, as text or ``--json``."""
    from marketplace.service.api import catalogue

    return _answer(args, lambda: catalogue(args.market, args.keys, wait_s=args.wait), catalogue_text)


def quote_command(args: argparse.Namespace) -> int:
    """``marketplace quote``: the quote, as text or ``--json``; a request that does not read exits 2."""
    from marketplace.scenario import ScenarioError
    from marketplace.service.api import load_request, quote

    try:
        loaded = load_request(args.scenario, sets=args.overrides, keys=args.keys, schema=args.schema)
    except (ScenarioError, OSError) as err:
        print(f"marketplace quote: bad request: {err}", file=sys.stderr)
        return EXIT_USAGE
    return _answer(args, lambda: quote(loaded, market=args.market, keys=args.keys, wait_s=args.wait), quote_text)


def _answer(args: argparse.Namespace, ask: Any, text: Any) -> int:
    from marketplace.service.client import RequestFailed, RequestRefused

    try:
        answer = ask()
    except RequestRefused as err:
        print(f"marketplace {args.command}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (RequestFailed, OSError, ValueError) as err:
        print(f"marketplace {args.command}: {err}", file=sys.stderr)
        return EXIT_RUN_FAILED
    print(json.dumps(answer, indent=1) if args.json else text(answer))
    return EXIT_OK


def catalogue_text(cat: dict[str, Any]) -> str:
    """The catalogue for a reader: the marketplace, its schema, protocols, owners and notes."""
    market = cat.get("market", {})
    lines = [
        f"marketplace {market.get('name')}: {market.get('owners_present')} of {market.get('owners')} owners present; "
        f"rule {market.get('rule')}; budgets under {market.get('relation')}, {market.get('filter')} filter",
        f"schema ({cat.get('schema', {}).get('kind')}): {json.dumps(cat.get('schema', {}).get('data'))}",
        "protocols:",
    ]
    for name, protocol in (cat.get("protocols") or {}).items():
        lines.append(f"  {name}: {protocol.get('summary')} ({len(protocol.get('bounds') or {})} bounded settings)")
    lines.append("owners present:")
    for owner in cat.get("owners") or []:
        terms = owner.get("terms")
        budget = owner.get("budget") or {}
        sale = "no sale terms" if terms is None else f"price {terms['price']:g} per point"
        if terms is not None:
            sale += f", points {terms['points']}, per consumer {terms['points_per_consumer']}"
        lines.append(
            f"  {owner['owner']}: {sale} (from its {owner.get('terms_from')}); budget eps={budget.get('epsilon')} "
            f"delta={budget.get('delta')}; admitted {owner.get('admitted') or 'nothing'}"
        )
    lines += [f"note: {note}" for note in (cat.get("notes") or {}).values()]
    return "\n".join(lines)


def quote_text(quoted: dict[str, Any]) -> str:
    """The quote for a reader: each owner's charge and whether it declines, then the money."""
    money = quoted.get("money") or {}
    lines = [f"quote of {quoted.get('name')} ({quoted.get('protocol')}) for {quoted.get('consumer')}:"]
    for owner, entry in (quoted.get("owners") or {}).items():
        privacy = entry.get("privacy")
        charge = "releases nothing" if privacy is None else f"charged {privacy['declared']}"
        declines = entry.get("declines")
        lines.append(f"  {owner}: {charge}" + (f"; declines: {declines}" if declines else ""))
    budget = money.get("spending_budget")
    lines.append(
        f"money: at most {money.get('at_most', 0):g} ({money.get('priced')})"
        + (f", within your spending budget {budget:g}" if budget is not None else "")
    )
    lines += [f"note: {note}" for note in (quoted.get("notes") or {}).values()]
    lines.append("nothing was reserved, charged or recorded")
    return "\n".join(lines)
