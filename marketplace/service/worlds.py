"""A served marketplace's parties, built per session from what the process keeps between sessions.

A session's parties are nodes built in the long-lived processes (the curator in ``serve``, owners
in their agents, the consumer in its client), never processes of their own. What does not change
from one session to the next is kept, so a request costs its protocol's work, not the set-up:

* **The world of a simulated marketplace** (every owner's rows generated from the data source and
  the seed) depends only on the marketplace's data and the request's protocol section, and is
  built once per such pair (:class:`WorldCache`). Each party still gets only its own share of it.
* **An owner's own rows** (a marketplace described by its public schema) are read and checked from
  its file once, and again only when the file changes (:class:`OwnRowsCache`).
* **A session's scenario**: sessions of one request differ only in their request id (the session
  id), so each distinct request is parsed and validated once, and every later session of it takes
  that scenario with its own request id (:class:`SessionScenarios`), and its YAML text, sent to
  every party of the session, is written once per request too (:class:`ScenarioTexts`), as is
  what it declares it costs each owner (:meth:`SessionScenarios.derived`).
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from marketplace.data.dataset import World
from marketplace.memo import IdentityMemo
from marketplace.parties import make_world
from marketplace.scenario import Scenario

if TYPE_CHECKING:
    from marketplace.plugins import Exchange

T = TypeVar("T")

NOT_THE_WORLD = ("name", "description", "lifetime", "noise", "transport", "sweep")
"""Scenario keys that do not change what the world holds."""


_KEYS: IdentityMemo[str] = IdentityMemo(16)
"""The world keys last written, by the plain values they were written from: the sessions of one request
share them (:func:`with_request_id`), and a session's world is looked up three times (its request
checked, its curator built, its report assembled)."""


def world_key(scenario: Scenario) -> str:
    """What the world of ``scenario`` depends on, as text: its data, seed, parties and protocol
    (with its section, which a protocol's own world may read); written once per set of values."""
    parts = {k: v for k, v in scenario.raw.items() if k not in NOT_THE_WORLD}
    return _KEYS.get((*parts, *parts.values()), lambda: json.dumps(parts, sort_keys=True, default=str))


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


def with_request_id(scenario: Scenario, request_id: str) -> Scenario:
    """``scenario`` with ``lifetime.request_id`` set to ``request_id``, and nothing else changed: its
    config and its plain form (the parts that do not change are shared, as both are read only)."""
    old = scenario.config.lifetime.request_id
    lifetime = dataclasses.replace(scenario.config.lifetime, request_id=request_id)
    raw = {**scenario.raw, "lifetime": {**scenario.raw["lifetime"], "request_id": request_id}}
    source = scenario.source.replace(old, request_id) if old else scenario.source
    return Scenario(config=dataclasses.replace(scenario.config, lifetime=lifetime), raw=raw, source=source)


class SessionScenarios:
    """The scenarios of the last ``size`` distinct requests, each parsed once (thread-safe).

    :meth:`get` takes a key that, with the session id, says everything the scenario depends on; a
    session whose request was parsed before gets that scenario with its own request id
    (:func:`with_request_id`), which is the only value the session id sets."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._scenarios: OrderedDict[str, Scenario] = OrderedDict()
        self._derived: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()
        self.parsed = 0
        """How many scenarios were parsed (a figure for the tests and benchmarks)."""

    def get(self, key: str, session: str, parse: Callable[[], Scenario]) -> Scenario:
        """The scenario of ``session``: ``parse()``'s, the first time ``key`` is asked for (kept when
        its request id is ``session``), else the kept one with ``session`` as its request id. ``key`` must
        not hold ``session`` (the session's own text with its id taken out: :func:`session_key`)."""
        with self._lock:
            kept = self._scenarios.get(key)
            if kept is not None:
                self._scenarios.move_to_end(key)
        if kept is not None:
            return with_request_id(kept, session)
        scenario = parse()
        self.parsed += 1
        if scenario.config.lifetime.request_id == session and isinstance(scenario.raw.get("lifetime"), dict):
            with self._lock:
                self._scenarios[key] = scenario
                while len(self._scenarios) > self.size:
                    self._scenarios.popitem(last=False)
        return scenario

    def derived(self, key: Hashable, compute: Callable[[], T]) -> T:
        """``compute()``, once per ``key`` among the last ``size`` keys asked for: what a request's
        scenario determines whatever its request id (``key`` holds everything it depends on)."""
        with self._lock:
            if key in self._derived:
                self._derived.move_to_end(key)
                kept: T = self._derived[key]
                return kept
        value = compute()
        with self._lock:
            self._derived[key] = value
            while len(self._derived) > self.size:
                self._derived.popitem(last=False)
        return value


def session_key(text: str, session: str) -> str | None:
    """What a session's scenario ``text`` (YAML, as the server sends it) says besides its session id: the
    text with the id, which it holds once (its request id), taken out; None when it holds the id other
    than once (then the session's scenario is parsed on its own)."""
    if not session or text.count(session) != 1:
        return None
    return text.replace(session, "\x00")


class ScenarioTexts:
    """Sessions' scenarios as YAML (:meth:`Scenario.dump_yaml`), each distinct one written once: the text
    of a later session that differs in its request id only is the kept text with its own id."""

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self._texts: OrderedDict[str, tuple[str, str]] = OrderedDict()
        self.written = 0
        """How many texts were written (a figure for the tests and benchmarks)."""

    def text(self, scenario: Scenario) -> str:
        """``scenario.dump_yaml()``, from a kept text when one differs from it in the request id only."""
        request_id = scenario.config.lifetime.request_id
        lifetime = scenario.raw.get("lifetime")
        if not request_id or not isinstance(lifetime, dict) or lifetime.get("request_id") != request_id:
            self.written += 1
            return scenario.dump_yaml()
        raw = {**scenario.raw, "lifetime": {**lifetime, "request_id": None}}
        key = json.dumps(raw, sort_keys=True, default=repr)  # the exact values, types included
        kept = self._texts.get(key)
        if kept is not None:
            self._texts.move_to_end(key)
            return kept[0].replace(kept[1], request_id)
        text = scenario.dump_yaml()
        self.written += 1
        if text.count(request_id) == 1:
            self._texts[key] = (text, request_id)
            while len(self._texts) > self.size:
                self._texts.popitem(last=False)
        return text
