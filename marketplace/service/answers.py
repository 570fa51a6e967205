"""The server's answers to a consumer that asks before it buys: the catalogue (:mod:`.catalogue`) and a
request's quote (:mod:`.quote`), each as JSON text in one control message, bounded by
:data:`~.control.MAX_ANSWER`. Nothing here queues, reserves or charges anything."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from marketplace.scenario import Scenario
from marketplace.service import control
from marketplace.service.catalogue import MarketView, catalogue
from marketplace.service.quote import quote

log = logging.getLogger("marketplace.serve")


def answer(
    view: MarketView,
    message: control.CatalogueAsk | control.QuoteAsk,
    consumer: str,
    build: Callable[[Scenario, Any], Any],
) -> control.Catalogue | control.Quote | control.SessionRefused:
    """The server's answer to a consumer's :class:`~.control.CatalogueAsk` or :class:`~.control.QuoteAsk`
    (:mod:`.quote`): the JSON text, or a refusal saying why (a request that cannot run here, an answer
    over :data:`~.control.MAX_ANSWER`, an error of its own: named by its kind, its text in the server's log).
    ``build``: the server's world cache, as a request's check uses it."""
    from marketplace import plugins
    from marketplace.messages.errors import cut

    try:
        if isinstance(message, control.CatalogueAsk):
            body: dict[str, Any] | str = catalogue(view, plugins.protocols())
        else:
            body = quote(view, message.scenario, consumer, build)
    except Exception as err:  # noqa: BLE001 - a question that breaks is refused; the marketplace serves on
        log.exception("%s's %s broke", consumer, type(message).__name__)
        return control.SessionRefused(reason=cut(f"the marketplace could not answer: {type(err).__name__}", 1900))
    if isinstance(body, str):
        return control.SessionRefused(reason=cut(f"no quote: {body}", 1900))
    text = json.dumps(body, default=str).encode()
    if len(text) > control.MAX_ANSWER:
        return control.SessionRefused(reason=f"the answer is {len(text)} bytes, over {control.MAX_ANSWER}")
    return control.Catalogue(catalogue=text) if isinstance(message, control.CatalogueAsk) else control.Quote(quote=text)
