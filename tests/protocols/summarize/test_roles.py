"""The summarize roles on their own: bids, verification, flags, dropouts, and refusals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, ProtocolError
from marketplace.messages.kinds import Hello
from marketplace.parties import build_role, make_world, party_ids
from marketplace.protocols.summarize.messages import Bid, Point, Request, RoundOpen, TargetEmbedding
from marketplace.protocols.summarize.owner import SummarizeOwner
from marketplace.roles import Role, Send
from marketplace.scenario import parse_scenario
from marketplace.scenario.fingerprint import fingerprint
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node


class CheatingOwner(SummarizeOwner):
    """Bids honestly, then hands over a different row than the one it bid for."""

    def _send_point(self, message):
        sends = super()._send_point(message)
        point = sends[0].body
        other = (self.sent_rows[-1] + 1) % len(self.data)
        return [
            Send(
                sends[0].to,
                Point(round=point.round, x=self.data.X[other], y=int(self.data.y[other]), row=point.row),
                reply_to=sends[0].reply_to,
            )
        ]


@pytest.fixture
def config(tiny_scenario, tmp_path):
    tiny_scenario["summarize"]["rounds"] = 10
    return parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config


def run_with(config, replace: dict[str, type] | None = None):
    world = make_world(config, plugins.exchange(config.protocol))
    roles = []
    for party in party_ids(config):
        role = build_role(config, party, world=world, exchange=plugins.exchange(config.protocol))
        if replace and party in replace:
            honest = role
            role = replace[party](
                party_id=party,
                scenario_name=config.name,
                data=honest.data,
                features=build_role(
                    config, "curator", world=world, exchange=plugins.exchange(config.protocol)
                ).features,
            )
            role.join(honest.identity)
        roles.append(role)
    nodes = [Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles]
    run_inprocess(nodes)
    return {r.party_id: r for r in roles}


def envelope(body, sender="owner-1", receiver="curator", msg_id=1):
    return Envelope(PROTOCOL_VERSION, "t", msg_id, sender, receiver, type(body).KIND, None, body)


def test_an_owner_whose_point_does_not_match_its_bid_is_flagged_and_excluded(config):
    honest = run_with(config)["curator"]
    cheat_target = honest.selection[0][0]  # the owner that wins round 1 honestly
    roles = run_with(config, {cheat_target: CheatingOwner})
    curator = roles["curator"]
    assert cheat_target in curator.flagged and "does not match the claimed bid" in curator.flagged[cheat_target]
    assert all(owner != cheat_target for owner, *_ in curator.selection)
    assert len(curator.selection) == 10  # the run went on with the others
    assert curator.ledger.points_seen == 10 + curator.validation_size + 1  # the rejected point was seen too
    assert curator.result()["parsimony"]["rho"] > 1.0


def test_the_curator_asks_only_the_best_bidder(config):
    roles = run_with(config)
    requests = {p: roles[p].result()["points_sent"] for p in roles if p.startswith("owner-")}
    assert sum(requests.values()) == len(roles["curator"].selection) == 10


def test_an_owner_bids_its_best_unsent_point_and_never_offers_it_again(config):
    world = make_world(config, plugins.exchange(config.protocol))
    owner = build_role(config, "owner-1", world=world, exchange=plugins.exchange(config.protocol))
    d = owner.phi.shape[1]
    owner.handle(envelope(TargetEmbedding(mean=np.full(d, 0.05)), sender="curator", receiver="owner-1"))
    seen = []
    for round_no in range(1, 6):
        (bid,) = owner.handle(
            envelope(
                RoundOpen(round=round_no, summary_mean=np.zeros(d), q=0),
                sender="curator",
                receiver="owner-1",
                msg_id=2 * round_no,
            )
        )
        expected = owner.phi[owner.available] @ np.full(d, 0.05)
        assert bid.body.value == pytest.approx(expected.max(), rel=1e-12)
        (point,) = owner.handle(
            envelope(Request(round=round_no), sender="curator", receiver="owner-1", msg_id=2 * round_no + 1)
        )
        assert point.body.row == len(seen)  # the point's serial in this run, not its row
        seen.append(owner.sent_rows[point.body.row])
    assert len(set(seen)) == 5 and not owner.available[seen].any()


def test_an_owner_refuses_a_request_for_a_round_it_did_not_bid_in(config):
    owner = build_role(
        config,
        "owner-1",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    with pytest.raises(ProtocolError, match="no offer is open for round 3"):
        owner.handle(envelope(Request(round=3), sender="curator", receiver="owner-1"))


def test_the_curator_refuses_a_stranger_a_duplicate_bid_and_an_unrequested_point(config):
    curator = build_role(
        config,
        "curator",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    with pytest.raises(ProtocolError, match="not a party of this run"):
        curator.handle(envelope(Hello(role="owner", protocol="summarize", scenario="tiny"), sender="owner-9"))
    with pytest.raises(ProtocolError, match="no bid expected"):
        curator.handle(envelope(Bid(round=1, value=0.1, available=True)))
    with pytest.raises(ProtocolError, match="no point was requested"):
        curator.handle(envelope(Point(round=1, x=np.zeros(3), y=0, row=0)))


def test_a_party_of_the_run_whose_hello_is_wrong_is_refused_and_dropped_at_once(config):
    curator = build_role(
        config,
        "curator",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    (refusal, *_) = curator.handle(
        envelope(
            Hello(role="consumer", protocol="summarize", scenario="tiny", config=fingerprint(config)), sender="owner-1"
        )
    )
    assert refusal.body.code == "refused" and "expected role 'owner'" in refusal.body.detail
    assert "owner-1" in curator.dropouts and "refused at hello" in curator.dropouts["owner-1"]["reason"]
    other_seed = fingerprint(dataclasses.replace(config, seed=config.seed + 1))
    (refusal, *_) = curator.handle(
        envelope(Hello(role="owner", protocol="summarize", scenario="tiny", config=other_seed), sender="owner-2")
    )
    assert "seed (curator: 11, this party: 12)" in refusal.body.detail
    assert "owner-2" not in curator.active


def test_an_owner_lost_while_bidding_is_dropped_and_the_round_goes_on(config):
    world = make_world(config, plugins.exchange(config.protocol))
    curator = build_role(config, "curator", world=world, exchange=plugins.exchange(config.protocol))
    for party in party_ids(config)[1:]:
        role = "consumer" if party == "consumer" else "owner"
        curator.handle(
            envelope(Hello(role=role, protocol="summarize", scenario="tiny", config=fingerprint(config)), sender=party)
        )
    from marketplace.protocols.summarize.messages import ValidationSet

    sends = curator.handle(envelope(ValidationSet(X=world.validation.X), sender="consumer"))
    assert {s.to for s in sends if isinstance(s.body, RoundOpen)} == {"owner-1", "owner-2", "owner-3"}
    curator.handle(envelope(Bid(round=1, value=0.2, available=True), sender="owner-1", msg_id=2))
    curator.handle(envelope(Bid(round=1, value=0.3, available=True), sender="owner-2", msg_id=2))
    (request,) = curator.peer_lost("owner-3")
    assert request.to == "owner-2" and isinstance(request.body, Request)
    assert curator.dropouts["owner-3"] == {"round": 1, "phase": "bidding", "reason": "lost"}


def test_a_party_whose_hello_is_refused_stops_with_the_reason(config):
    from marketplace.messages.kinds import Error

    owner = build_role(
        config,
        "owner-1",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    refusal = Error(code="protocol", detail="expected scenario 'tiny', got 'other'", about_kind="hello", about_msg_id=1)
    owner.on_error(envelope(refusal, sender="curator", receiver="owner-1"))
    assert owner.done and "refused our hello" in owner.failure and "'other'" in owner.failure


def test_a_party_with_another_scenario_is_refused_end_to_end(config, tiny_scenario, tmp_path):
    """Over the in-process driver: the curator refuses owner-2's hello and owner-2 stops; the
    driver's liveness emulation then tells the curator owner-2 is lost (as heartbeats would over
    ZeroMQ), and the run completes without it."""
    world = make_world(config, plugins.exchange(config.protocol))
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    roles[2].scenario_name = "another-scenario"
    nodes = [Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles]
    stats = run_inprocess(nodes)
    assert roles[2].done and "refused our hello" in roles[2].failure
    assert stats.lost_peers == ["curator: owner-2"]
    assert "owner-2" in roles[0].dropouts and roles[0].failure is None
    assert all(r.done for r in roles)


def test_parties_that_never_say_hello_are_dropped_when_nothing_is_left_to_deliver(config):
    """In process, the progress deadline has no clock: a connected party the curator still waits for
    when nothing is left to deliver would never deliver, and is dropped, as over ZeroMQ."""
    world = make_world(config, plugins.exchange(config.protocol))
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    nodes = [Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles]
    for node in nodes[1:]:  # the owners and the consumer never start (no hello): all stay alive
        node.start = lambda: []
    run_inprocess(nodes)
    curator = roles[0]
    assert curator.failure and "the consumer was lost" in curator.failure and "no hello" in curator.failure
    assert all("no hello" in curator.dropouts[o]["reason"] for o in ("owner-1", "owner-2", "owner-3"))


def test_the_in_process_driver_still_reports_a_true_stall():
    """A party that waits without saying for what (a bug), nothing to deliver: a deadlock."""
    from marketplace.transport.inprocess import StalledRun

    class Waiter(Role):
        party_id, role_name = "curator", "curator"

        def start(self):
            return []

        def handle(self, message):
            return []

        def expected_peers(self):
            return ()

    with pytest.raises(StalledRun, match="still waiting"):
        run_inprocess([Node(Waiter(), run_id="t", max_message_bytes=1 << 10)])


def test_owners_with_float32_features_bid_exactly_what_the_curator_recomputes(tiny_scenario, tmp_path):
    from marketplace.runner.run import run_scenario

    reports = {}
    for dtype in ("float64", "float32"):
        tiny_scenario["summarize"]["owner_features"] = dtype
        scenario = parse_scenario(tiny_scenario, source=dtype, base_dir=tmp_path)
        reports[dtype] = run_scenario(scenario, tmp_path / dtype, driver="inprocess")
    assert reports["float32"]["flagged"] == {}  # every float32 bid passed the curator's float64 check
    assert reports["float32"]["selection"] == reports["float64"]["selection"]
    owner = build_role(
        parse_scenario(tiny_scenario, source="t", base_dir=tmp_path).config,
        "owner-1",
        exchange=plugins.exchange(parse_scenario(tiny_scenario, source="t", base_dir=tmp_path).config.protocol),
    )
    assert owner.phi.dtype == np.float32
