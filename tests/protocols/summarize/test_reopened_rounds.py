"""A round whose asked owners deliver nothing is not a free draw: the private auction never draws more
rounds than each owner's lifetime ledger was charged for (R eps_auc), so a run where an asked owner
crashes ends with fewer points instead of running an uncharged extra selection."""

from __future__ import annotations

import copy

import pytest

from marketplace import plugins
from marketplace.parties import build_role, make_world, party_ids
from marketplace.protocols.summarize.messages import Request
from marketplace.protocols.summarize.private_curator import AUCTION, SUMMARY
from marketplace.roles.lifetime import admit_party, settle
from marketplace.roles.party import Party
from marketplace.scenario import parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node

ROUNDS = 6


def scenario(tiny_scenario, tmp_path, seed: int) -> dict:
    raw = copy.deepcopy(tiny_scenario)
    raw["seed"] = seed
    raw["summarize"].update(
        rounds=ROUNDS, privacy={"enabled": True, "t_init": 100, "t_sub": 3, "eps_auction": 2.0, "tau": 3}
    )
    raw["lifetime"] = {
        "ledgers": str(tmp_path / f"ledgers-{seed}"),
        "relation": "replace-one-distinct",
        "budget": {"epsilon": 1000.0, "delta": 0.5},
    }
    return raw


def crash_when_first_asked(roles: list) -> dict:
    """The first owner asked for a point dies instead of answering (no point, no bye)."""
    crashed: dict = {}

    def wrap(role):
        honest = role.handle

        def handle(message):
            if isinstance(message.body, Request) and not crashed:
                crashed["owner"], crashed["round"] = role.party_id, message.body.round
                role.done, role.failure = True, "crashed"
                return []
            return honest(message)

        role.handle = handle

    for role in roles:
        if role.party_id.startswith("owner-"):
            wrap(role)
    return crashed


def run(raw, tmp_path):
    config = parse_scenario(raw, source="reopen", base_dir=tmp_path).config
    exchange = plugins.exchange(config.protocol)
    world = make_world(config, exchange)
    parties = [
        admit_party(config, Party(build_role(config, p, world=world, exchange=exchange)), exchange)
        for p in party_ids(config)
    ]
    roles = [party.role for party in parties]
    crashed = crash_when_first_asked(roles)
    run_inprocess([Node(party, run_id="t", max_message_bytes=1 << 24) for party in parties])
    charged = {party.party_id: settle(party) for party in parties if party.party_id.startswith("owner-")}
    return roles[0], crashed, charged


@pytest.mark.parametrize("seed", range(12))
def test_an_asked_owner_that_crashes_costs_no_uncharged_auction_draw(tiny_scenario, tmp_path, seed):
    curator, crashed, charged = run(scenario(tiny_scenario, tmp_path, seed), tmp_path)
    assert crashed["owner"] in curator.dropouts
    assert curator.auction.round <= ROUNDS  # every draw of the auction is one of the rounds charged
    auction, summary = curator.account_ledgers[AUCTION].total(), curator.account_ledgers[SUMMARY].total()
    assert auction.eps <= ROUNDS * curator.schedule.eps_auction * (1 + 1e-12)
    for owner, record in charged.items():  # each owner's lifetime charge covers what the run's ledgers record
        assert record["state"] == "committed", owner
        assert record["cost"]["eps"] >= auction.eps + summary.eps - 1e-12, owner
    if crashed["round"] == 1:  # nothing was in the pool: the round added no point, and the run ends one short
        assert len(curator.selection) == ROUNDS - 1 and curator.empty_rounds == 1
        assert curator.end_reason.startswith(f"all rounds done (1 of {ROUNDS} added no point")
