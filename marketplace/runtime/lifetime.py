"""The run's side of lifetime ledgers: one request id for every party, and the report's ``lifetime``
section (each owner's charge, its standing after the run, and who declined)."""

from __future__ import annotations

import copy
import dataclasses
import functools
from pathlib import Path
from typing import Any

from marketplace.messages.errors import cut
from marketplace.roles.lifetime import new_request_id
from marketplace.scenario import Scenario

SHOWN = 10
"""Declining owners named one by one in the summary line."""


def with_request_id(scenario: Scenario) -> Scenario:
    """A scenario with lifetime ledgers and no ``lifetime.request_id`` gets a fresh one, written into
    the resolved scenario every party reads, so that all of them charge the run under one id."""
    life = scenario.config.lifetime
    if life.ledgers is None or life.request_id is not None:
        return scenario
    request_id = new_request_id()
    raw = copy.deepcopy(scenario.raw)
    raw.setdefault("lifetime", {})["request_id"] = request_id
    config = dataclasses.replace(scenario.config, lifetime=dataclasses.replace(life, request_id=request_id))
    return Scenario(config=config, raw=raw, source=scenario.source)


def lifetime_section(config: Any, parties: list[dict[str, Any]], declined: dict[str, str]) -> dict[str, Any] | None:
    """The report's ``lifetime`` section, or None when the run kept no lifetime ledgers."""
    life = config.lifetime
    if life.ledgers is None:
        return None
    records = {p["id"]: p["lifetime"] for p in parties if isinstance(p.get("lifetime"), dict)}
    owners = {party: record for party, record in records.items() if party.startswith("owner-")}
    declined_ids = sorted(
        {*declined, *(o for o, r in owners.items() if r.get("state") == "declined")}, key=_owner_order
    )
    if declined_ids:
        named = ", ".join(declined_ids[:SHOWN]) + (
            f", and {len(declined_ids) - SHOWN} more" if len(declined_ids) > SHOWN else ""
        )
        summary = f"{len(declined_ids)} of {config.parties.owners} owners declined (lifetime budget): {named}"
    else:
        summary = f"no owner declined; {sum(1 for r in owners.values() if r.get('state') == 'committed')} charged"
    first: dict[str, Any] = next(iter(records.values()), {})
    return {
        "request_id": first.get("request_id", life.request_id),
        "consumer": life.consumer,
        "ledgers": _ledgers_folder(owners, life.ledgers),
        "owners": dict(sorted(owners.items(), key=lambda item: _owner_order(item[0]))),
        "consumer_ledger": records.get("consumer"),
        "declined": declined_ids,
        "summary": cut(summary, 2000),
    }


def _ledgers_folder(owners: dict[str, dict[str, Any]], configured: Any) -> str:
    """Where the owners' ledgers are, from the owners' own records: in a served marketplace each
    agent keeps its owners' ledgers in its own folder, whatever the scenario's ``lifetime.ledgers``
    says (the scenario's folder only when no owner said)."""
    folders = sorted({_parent(r["ledger"]) for r in owners.values() if isinstance(r.get("ledger"), str)})
    if not folders:
        return str(configured)
    if len(folders) == 1:
        return folders[0]
    return f"each owner's own ({len(folders)} folders: see each owner's ledger)"


@functools.lru_cache(maxsize=4096)
def _parent(path: str) -> str:
    """``str(Path(path).parent)``, kept: each owner's ledger is the same file from session to session."""
    return str(Path(path).parent)


def _owner_order(party: str) -> tuple[int, str]:
    tail = party.rpartition("-")[2]
    return (int(tail), party) if tail.isdigit() else (1 << 30, party)
