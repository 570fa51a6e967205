"""The auction does not leak its winner through the wire (issue: owners learn only whether they
were asked). Two worlds differ only in which of two owners holds which dataset, so the winners
swap; every owner's received message kinds, counts and byte lengths, apart from the requests it
gets (the designed, DP-bounded signal), must be the same in both. A curator that tells the
winner it won must be caught by the same comparison."""

from __future__ import annotations

import copy

import pytest

from marketplace import plugins
from marketplace.messages import decode
from marketplace.messages.kinds import Error
from marketplace.parties import build_role, make_world, party_ids
from marketplace.protocols.summarize.curator import SummarizeCurator
from marketplace.roles import Send
from marketplace.scenario import parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node


class NotifyingCurator(SummarizeCurator):
    """A broken curator: after accepting a point it tells the winner so."""

    def _accept(self, owner, point):
        super()._accept(owner, point)
        self.pending_notice = owner

    def _open_round(self):
        sends = super()._open_round()
        owner = getattr(self, "pending_notice", None)
        self.pending_notice = None
        notice = [Send(owner, Error(code="refused", detail="your point won"))] if owner else []
        return notice + sends


def views(config, swap: bool, curator_class=None) -> dict[str, list[tuple[str, int]]]:
    """Each owner's received (kind, byte length) sequence, with owners 1 and 2's data swapped if asked."""
    world = make_world(config, plugins.exchange(config.protocol))
    if swap:
        owners = list(world.owners)
        owners[0], owners[1] = owners[1], owners[0]
        world = type(world)(owners=tuple(owners), validation=world.validation, test=world.test, seed_set=world.seed_set)
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    if curator_class is not None:
        honest = roles[0]
        roles[0] = curator_class(
            scenario_name=config.name,
            owners=honest.owners,
            features=honest.features,
            seed_set=world.seed_set.X,
            dim=honest.dim,
            rounds=honest.rounds,
            verify_tolerance=honest.tolerance,
        )
    nodes = [Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles]
    seen: dict[str, list[tuple[str, int]]] = {n.party_id: [] for n in nodes}
    for node in nodes:
        original = node.receive

        def receive(frame, peer, decoded=None, original=original, party=node.party_id):
            seen[party].append((decode(frame, max_bytes=1 << 24, peer=peer).kind, len(frame)))
            return original(frame, peer, decoded)

        node.receive = receive
    run_inprocess(nodes)
    winners = [owner for owner, *_ in roles[0].selection]
    return {p: v for p, v in seen.items() if p.startswith("owner-")} | {"winners": winners}


def without_requests(view):
    return [entry for entry in view if entry[0] != "request"]


def leaks(config, curator_class=None) -> list[str]:
    """Owners whose view (requests aside) differs between the two worlds."""
    a, b = views(config, False, curator_class), views(config, True, curator_class)
    assert a["winners"] != b["winners"], "the two worlds must have different winners for the test to mean anything"
    return [p for p in a if p != "winners" and without_requests(a[p]) != without_requests(b[p])]


@pytest.fixture
def config(tiny_scenario, tmp_path):
    raw = copy.deepcopy(tiny_scenario)
    raw["summarize"]["rounds"] = 8
    return parse_scenario(raw, source="t", base_dir=tmp_path).config


def test_no_owner_sees_who_won_in_the_non_private_auction(config):
    assert leaks(config) == []


def test_no_owner_sees_who_won_in_the_private_auction(tiny_scenario, tmp_path):
    raw = copy.deepcopy(tiny_scenario)
    raw["summarize"].update(
        rounds=8, privacy={"enabled": True, "t_init": 100, "t_sub": 3, "eps_auction": 0.3, "tau": 3}
    )
    config = parse_scenario(raw, source="t", base_dir=tmp_path).config
    assert leaks(config) == []


def test_a_curator_that_notifies_the_winner_is_caught(config):
    assert leaks(config, NotifyingCurator) != []


def test_message_ids_count_per_receiver_so_they_reveal_nothing_about_other_owners(config):
    """Every owner's ids run 1, 2, 3, ... over what it received, whatever the curator sent others."""
    world = make_world(config, plugins.exchange(config.protocol))
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    nodes = [Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles]
    ids: dict[str, list[int]] = {}
    for node in nodes[1:-1]:
        original = node.receive

        def receive(frame, peer, decoded=None, original=original, party=node.party_id):
            message = decode(frame, max_bytes=1 << 24, peer=peer)
            if message.kind != "heartbeat":
                ids.setdefault(party, []).append(message.msg_id)
            return original(frame, peer, decoded)

        node.receive = receive
    run_inprocess(nodes)
    for party, seq in ids.items():
        assert seq == list(range(1, len(seq) + 1)), party
