"""One consumer request, one session, one run: the session's scenario and its folder.

The marketplace's scenario (the file ``marketplace serve`` was given) says who the owners are, what
data they hold, the transport and the owners' lifetime budgets. A request is a scenario too; it
brings the protocol, its settings and the consumer's own target (``data.consumer``). The session
runs the request's protocol on the marketplace's owners:

* from the marketplace: ``seed``, ``parties``, ``data`` (but ``data.consumer``), ``transport``,
  ``lifetime`` (the request id becomes the session id, the consumer the key's name; lifetime ledgers
  are always kept: each owner's where its agent keeps it);
* from the request: ``name``, ``description``, ``protocol`` and its section, ``data.consumer``;
* in a marketplace described by its public schema (``data.schema``), the protocol's public bounds
  the request leaves out (a sketch's box) come from the schema (as for any such scenario:
  :func:`marketplace.scenario.load.parse_scenario`);
* ``noise.source: keys`` with no key folder: every party of every session draws a fresh noise key
  that nobody else holds, so two sessions never share noise.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from marketplace.scenario import Scenario, ScenarioError
from marketplace.scenario.load import parse_scenario, read_scenario_text
from marketplace.service.worlds import SessionScenarios

FROM_MARKET = ("seed", "parties", "transport")


def new_session_id(number: int) -> str:
    """``s0007-1a2b3c4d``: the session's number on this server, and a random tail (unique across restarts)."""
    return f"s{number:04d}-{secrets.token_hex(4)}"


def session_scenario(
    market: Scenario, request_text: str, *, session: str, consumer: str, source: str = "the request"
) -> Scenario:
    """The scenario a session runs (module docstring). Raises :class:`ScenarioError` naming the key
    when the request cannot run on this marketplace."""
    request = read_scenario_text(request_text, source)
    if not isinstance(request, dict):
        raise ScenarioError(source, "", "expected a scenario (a mapping with name:, protocol: and its section)")
    raw: dict[str, Any] = copy.deepcopy(request)
    base = copy.deepcopy(market.raw)
    for key in FROM_MARKET:
        if key in base:
            raw[key] = base[key]
        else:
            raw.pop(key, None)
    data = base.get("data") or {}
    consumer_part = (request.get("data") or {}).get("consumer") if isinstance(request.get("data"), dict) else None
    raw["data"] = {**data, **({"consumer": consumer_part} if consumer_part is not None else {})}
    life = dict(base.get("lifetime") or {})
    life.update({"request_id": session, "consumer": consumer})
    life["ledgers"] = life.get("ledgers") or "ledgers"  # every owner keeps one (where its agent says: --ledgers)
    raw["lifetime"] = life
    raw["noise"] = {"source": "keys", "keys": None}
    transport = raw.get("transport")
    if isinstance(transport, dict):
        transport.pop("curve_keys", None)
        transport["security"] = "curve"
    raw.pop("sweep", None)
    return parse_scenario(raw, source=source, base_dir=Path.cwd())


def prepare_request(
    market: Scenario,
    request_text: str,
    session: str,
    consumer: str,
    owners: list[str],
    build: Callable[[Scenario, Any], Any],
    parsed: SessionScenarios | None = None,
) -> tuple[Scenario, dict[str, Any]] | str:
    """A request checked as it arrives: the session's scenario (:func:`session_scenario`; with ``parsed``,
    each distinct request of a consumer parsed once), its world built (``build(scenario, exchange)``,
    the server's world cache: what needs the data is refused now, not mid-session)
    and what it declares it costs each owner; or, when it cannot run on this marketplace, the
    refusal to send the consumer (nothing is queued, nothing charged)."""
    from marketplace import plugins
    from marketplace.messages.errors import cut
    from marketplace.runtime import prepare_world
    from marketplace.service.admission import owner_charges

    try:

        def parse() -> Scenario:
            return session_scenario(
                market, request_text, session=session, consumer=consumer, source=f"{consumer}'s request"
            )

        # the session id sets the request id only: the same text of the same consumer is the same scenario
        scenario = parse() if parsed is None else parsed.get(f"{consumer}\x00{request_text}", session, parse)
        exchange = plugins.exchange(scenario.config.protocol)  # the session starts: resolved once here
        prepare_world(scenario, exchange, build=build)
        life = market.config.lifetime

        def charges() -> dict[str, Any]:
            return owner_charges(scenario.config, owners, life.relation, life.filter, exchange)

        if parsed is None:
            return scenario, charges()
        # as its scenario, what a request declares it costs each owner depends on its text, not its session
        kept = parsed.derived((consumer, request_text, tuple(owners), life.relation, life.filter), charges)
        return scenario, {owner: dict(charge) for owner, charge in kept.items()}
    except ScenarioError as err:
        return cut(str(err), 1900)
    except (ValueError, OSError, ArithmeticError) as err:  # the data could not be built for it, say
        return cut(f"{consumer}'s request: {err}", 1900)


def session_folder(root: Path, session: str) -> Path:
    """``root/sessions/<session>``, made."""
    folder = root / "sessions" / session
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder
