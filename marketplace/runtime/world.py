"""A scenario's world, built and checked against the data before any party starts.

What ``marketplace run`` and ``validate`` do before they start anything, and what a served
marketplace and a market do for every scenario they open: the world every party's share is cut
from, with the exchange's checks that need the data's shape.
"""

from __future__ import annotations

from collections.abc import Callable

from marketplace.data.dataset import World
from marketplace.parties import make_world
from marketplace.plugins import Exchange
from marketplace.scenario import Scenario, ScenarioError


def prepare_world(
    scenario: Scenario, exchange: Exchange, *, build: Callable[[Scenario, Exchange], World] | None = None
) -> World:
    """Build the world of ``scenario`` and run the checks that need the data (what ``run`` does
    before it starts anything, and ``validate`` too). ``exchange`` is the scenario's exchange, resolved
    once where the run starts; ``build(scenario, exchange)`` gives the world instead of building it (a
    served marketplace keeps its worlds). Raises :class:`ScenarioError` naming the key when the data
    cannot be built or split as described."""
    config = scenario.config
    try:
        world = build(scenario, exchange) if build is not None else make_world(config, exchange)
    except (ValueError, OSError) as err:
        key, sep, text = str(err).partition(": ")
        if sep and _is_key_path(key):
            raise ScenarioError(scenario.source, key, text) from None
        raise ScenarioError(scenario.source, "data", str(err)) from None
    try:  # settings that can only be checked against the data's shape
        exchange.check_world(config, world)
    except ValueError as err:
        key, _, text = str(err).partition(": ")
        raise ScenarioError(scenario.source, key, text) from None
    return world


def _is_key_path(text: str) -> bool:
    """Whether ``text`` looks like a scenario key path (``data.consumer.validation_size``)."""
    return bool(text) and "." in text and all(part.isidentifier() for part in text.split("."))
