"""A party's node as every launcher builds it: its role from the scenario, wrapped in the
transport's :class:`~marketplace.transport.node.Node` under the run's id.

One function for the in-process driver, a party in a process of its own and an owner host, so a
party is the same whichever way it is started.
"""

from __future__ import annotations

from pathlib import Path

from marketplace.data.dataset import Dataset, World
from marketplace.parties import build_role, party_identity, party_ids
from marketplace.plugins import Exchange
from marketplace.privacy import noise as noise_keys
from marketplace.roles.lifetime import settle, start_party
from marketplace.scenario import Scenario, ScenarioConfig
from marketplace.transport.node import Node


def default_run_id(scenario: Scenario) -> str:
    """The run id parties agree on when none is given: ``<scenario name>-seed<seed>``."""
    return f"{scenario.config.name}-seed{scenario.config.seed}"


def noise_origin(config: ScenarioConfig, party: str) -> noise_keys.NoiseOrigin:
    """Where ``party``'s noise comes from under ``config.noise``, for a party started alone or by
    the runner (which has resolved ``auto``): its key file in ``noise.keys`` or its CURVE key folder,
    else a fresh key."""
    folders: list[str | Path | None] = [config.noise.keys, config.transport.curve_keys]
    return noise_keys.resolve(config.noise.source, party, folders, started_alone=True)


def build_node(
    config: ScenarioConfig,
    party: str,
    *,
    world: World,
    run_id: str,
    exchange: Exchange,
    owner_data: Dataset | None = None,
    parties: frozenset[str] | None = None,
) -> Node:
    """``party`` started in a node of run ``run_id``: admitted under its lifetime ledger, if it keeps
    one, then its role built from ``world`` (its share, or the whole world) with its noise origin
    (:func:`marketplace.roles.lifetime.start_party`: reserved and built, or declined and not built).
    ``owner_data`` replaces an owner's generated share (its own rows); ``parties`` is the run's party
    ids, when the caller builds many nodes and computed them once."""
    noise = noise_origin(config, party)
    started = start_party(
        config,
        party,
        exchange,
        party_identity(config, party, exchange, noise),
        lambda: build_role(config, party, world=world, owner_data=owner_data, noise=noise, exchange=exchange),
    )
    try:
        return Node(
            started,
            run_id=run_id,
            max_message_bytes=config.transport.max_message_bytes,
            parties=parties if parties is not None else frozenset(party_ids(config)),
        )
    except BaseException:
        settle(started)  # nothing of the protocol left a party that never ran: rolled back
        raise
