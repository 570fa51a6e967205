"""A served marketplace's parties, built per session from what the process keeps between sessions.

A session's parties are nodes built in the long-lived processes (the curator in ``serve``, owners
in their agents, the consumer in its client), never processes of their own. What does not change
from one session to the next is kept, so a request costs its protocol's work, not the set-up:

* **The world of a simulated marketplace** (every owner's rows generated from the data source and
  the seed) depends only on the marketplace's data and the request's protocol section, and is
  built once per such pair (:class:`WorldCache`). Each party still gets only its own share of it.
* **An owner's own rows** (a marketplace described by its public schema) are read and checked from
  its file once, and again only when the file changes (:class:`OwnRowsCache`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marketplace.data.dataset import World
from marketplace.parties import make_world
from marketplace.scenario import Scenario

if TYPE_CHECKING:
    from marketplace.plugins import Exchange

NOT_THE_WORLD = ("name", "description", "lifetime", "noise", "transport", "sweep")
"""Scenario keys that do not change what the world holds."""


def world_key(scenario: Scenario) -> str:
    """What the world of ``scenario`` depends on, as text: its data, seed, parties and protocol
    (with its section, which a protocol's own world may read)."""
    raw = {k: v for k, v in scenario.raw.items() if k not in NOT_THE_WORLD}
    return json.dumps(raw, sort_keys=True, default=str)


class WorldCache:
    """The last ``size`` worlds built, by :func:`world_key` (thread-safe)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._worlds: OrderedDict[str, World] = OrderedDict()
        self._lock = threading.Lock()
        self.built = 0
        """How many worlds were built (a figure for the benchmarks)."""

    def get(self, scenario: Scenario, exchange: Exchange) -> World:
        """The world of ``scenario``, built (by its ``exchange``) unless kept."""
        key = world_key(scenario)
        with self._lock:
            world = self._worlds.get(key)
            if world is not None:
                self._worlds.move_to_end(key)
                return world
        world = make_world(scenario.config, exchange)
        with self._lock:
            self._worlds[key] = world
            self.built += 1
            while len(self._worlds) > self.size:
                self._worlds.popitem(last=False)
        return world


class OwnRowsCache:
    """Each owner's own rows as read from its file, kept until the file changes."""

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], tuple[tuple[int, int], dict[str, Any]]] = {}

    def get(self, scenario: Scenario, party: str, path: Path, limits: Any) -> dict[str, Any]:
        """``party``'s rows from ``path`` (:func:`marketplace.parties.own_rows`), read again only
        when the file's size or modification time changed."""
        from marketplace.parties import own_rows

        stat = Path(path).stat()
        mark = (stat.st_mtime_ns, stat.st_size)
        key = (party, str(path))
        kept = self._rows.get(key)
        if kept is not None and kept[0] == mark:
            return kept[1]
        rows = own_rows(scenario.config, party, data=path, limits=limits)
        self._rows[key] = (mark, rows)
        return rows
