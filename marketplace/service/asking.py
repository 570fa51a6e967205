"""A consumer asks before it buys (:func:`marketplace.catalogue`, :func:`marketplace.quote`): the
marketplace's catalogue, a request's quote, and the check of ``request --max-price``
(:mod:`.catalogue` and :mod:`.quote` say what the server answers).

Each question is one control message on the consumer's connection (its kit's key, as a request's),
answered with one message: nothing is queued, reserved, charged or recorded anywhere.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from typing import Any

from marketplace.scenario import Scenario
from marketplace.service import control
from marketplace.service.client import Connection, RequestFailed, RequestRefused

ASK_S = 60.0
"""How long a question waits for its answer (a quote builds the request's data on the server, as a
request's check does)."""


class MaxPriceExceeded(RequestRefused):
    """``request --max-price`` (``max_price=``): the request's quoted price (``quoted``) is above the
    limit (``limit``); nothing was sent, reserved or charged. ``str(err)`` names ``max_price``;
    :meth:`named` the command line's flag."""

    def __init__(self, limit: float, quoted: float, priced: str = "") -> None:
        self.limit, self.quoted, self.priced = limit, quoted, priced
        super().__init__(self.named("max_price"))

    def named(self, name: str) -> str:
        """The refusal, naming the limit as ``name`` (``--max-price`` on the command line)."""
        priced = f" ({self.priced})" if self.priced else ""
        return (
            f"{name}: expected a request quoted at most {self.limit:g}, got a quote of {self.quoted:g}{priced}; "
            "nothing was sent, reserved or charged"
        )


def ask(
    connection: Connection, message: control.CatalogueAsk | control.QuoteAsk, wait_s: float = ASK_S
) -> dict[str, Any]:
    """Send ``message`` on ``connection`` and return the server's answer (its JSON, read); raises
    :class:`~.client.RequestRefused` when the server refuses the question (the reason is the
    server's), :class:`~.client.RequestFailed` when no answer comes within ``wait_s``."""
    if connection.closed:
        raise ValueError(f"the connection to {connection.market} is closed: open another to ask")
    connection.link.begin(wait_s, resuming=False)
    connection.sock.send(control.encode(message))
    deadline = time.monotonic() + wait_s
    while True:
        reply = connection.link.next(deadline, "", None)
        if isinstance(reply, control.SessionRefused):
            raise RequestRefused(f"the marketplace refused: {reply.reason}")
        text = reply.catalogue if isinstance(reply, control.Catalogue) else getattr(reply, "quote", None)
        if isinstance(text, bytes):
            try:
                answer = json.loads(text)
            except ValueError as err:
                raise RequestFailed(f"the marketplace's answer is not JSON: {err}") from None
            if not isinstance(answer, dict):
                raise RequestFailed("the marketplace's answer is not a JSON object")
            return answer


def quote_on(connection: Connection, request: Scenario, wait_s: float = ASK_S) -> dict[str, Any]:
    """The quote of a loaded ``request`` on an open ``connection`` (:func:`marketplace.service.api.quote`)."""
    return ask(connection, control.QuoteAsk(scenario=request.dump_yaml()), wait_s)


def check_max_price(value: Any, name: str = "max_price") -> float:
    """``value`` as a price limit: a finite number >= 0; ValueError naming ``name`` otherwise."""
    try:
        price = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}") from None
    if not math.isfinite(price) or price < 0:
        raise ValueError(f"{name}: expected a finite number >= 0, got {value!r}")
    return price


def within_max_price(quoted: Mapping[str, Any], max_price: float) -> None:
    """Raise :class:`MaxPriceExceeded` when the quote's money (``money.at_most``,
    :func:`.quote.quote_money`) is above ``max_price``, or is not a price at all (NaN counts as above)."""
    money = quoted.get("money") or {}
    at_most = money.get("at_most")
    if not isinstance(at_most, int | float) or not math.isfinite(at_most):
        raise MaxPriceExceeded(max_price, math.nan, f"the marketplace's quote has no price to compare with: {money!r}")
    if at_most > max_price:
        raise MaxPriceExceeded(max_price, float(at_most), str(money.get("priced") or ""))
