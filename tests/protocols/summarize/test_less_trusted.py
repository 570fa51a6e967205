"""The less-trusted curator: it works on h1 embeddings only, points reach the consumer sealed, and the
run selects exactly what the trusted run selects."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, ProtocolError
from marketplace.parties import build_role, make_world, party_ids
from marketplace.protocols.summarize.identity import sealed_point_key
from marketplace.protocols.summarize.messages import Point, SealedPoint, ValidationEmbedding, ValidationSet
from marketplace.protocols.summarize.owner import SummarizeOwner
from marketplace.protocols.summarize.sealing import ConsumerKey, SealingError, seal_point, sealed_size
from marketplace.roles import Send
from marketplace.scenario import parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node
from scenarios import run_raw

# --- sealing ------------------------------------------------------------------------------------


def test_a_sealed_point_opens_to_the_same_point_with_the_consumers_key():
    key = ConsumerKey.generate()
    x = np.array([0.1, -2.5, 3e10])
    opened_x, opened_y, secret = key.open_point(seal_point(x, -7, key.public, secret=b"s" * 32), dim=3)
    assert opened_x.tolist() == x.tolist() and opened_y == -7 and secret == b"s" * 32


def test_every_sealed_point_has_the_same_length_whatever_its_values():
    key = ConsumerKey.generate()
    lengths = {
        len(seal_point(np.full(5, v), y, key.public, secret=bytes(32)))
        for v, y in [(0.0, 0), (1e300, 2**62), (-1.5, -1)]
    }
    assert lengths == {sealed_size(5)}


def test_a_sealed_point_cannot_be_opened_with_another_key_or_after_tampering():
    key, other = ConsumerKey.generate(), ConsumerKey.generate()
    blob = seal_point(np.zeros(2), 1, key.public, secret=bytes(32))
    with pytest.raises(SealingError, match="cannot be opened"):
        other.open_point(blob, dim=2)
    tampered = bytes([blob[0]]) + bytes([blob[1] ^ 1]) + blob[2:]
    with pytest.raises(SealingError, match="cannot be opened"):
        key.open_point(tampered, dim=2)
    with pytest.raises(SealingError, match="expected"):
        key.open_point(blob, dim=3)
    with pytest.raises(SealingError, match="32 bytes"):
        seal_point(np.zeros(2), 1, b"short", secret=bytes(32))
    with pytest.raises(SealingError, match="32 bytes"):
        seal_point(np.zeros(2), 1, key.public, secret=b"short")


# --- whole runs -----------------------------------------------------------------------------------


@pytest.fixture
def scenario(tiny_scenario):
    raw = copy.deepcopy(tiny_scenario)
    raw["summarize"]["rounds"] = 8
    return raw


def with_trust(raw: dict, trust: str, private: bool = False) -> dict:
    raw = copy.deepcopy(raw)
    raw["summarize"]["curator"] = trust
    if private:
        raw["summarize"]["privacy"] = {"enabled": True, "t_init": 100, "t_sub": 3, "eps_auction": 0.5, "tau": 3}
    return raw


@pytest.mark.parametrize("private", [False, True], ids=["non-private", "private"])
def test_the_less_trusted_run_selects_and_scores_exactly_like_the_trusted_run(scenario, tmp_path, private):
    trusted = run_raw(with_trust(scenario, "trusted", private), tmp_path, "trusted")
    less = run_raw(with_trust(scenario, "less_trusted", private), tmp_path, "less")
    assert less["status"] == trusted["status"] == "completed"
    assert [s[:2] for s in less["selection"]] == [
        s[:2] for s in trusted["selection"]
    ]  # keys differ: embedding vs point
    assert less["metrics"]["mmd2"] == trusted["metrics"]["mmd2"]
    assert less["metrics"]["accuracy"] == trusted["metrics"]["accuracy"]
    assert less["privacy"] == trusted["privacy"]
    assert less["checks"] == trusted["checks"]


def test_the_less_trusted_curator_receives_no_raw_point_and_no_row_of_d_v(scenario, tmp_path):
    report = run_raw(with_trust(scenario, "less_trusted"), tmp_path, "less")
    kinds = set(report["messages"]["by_kind"])  # every kind sent in the run, by anyone
    assert {"point", "validation_set", "summary"}.isdisjoint(kinds)
    assert {"sealed_point", "validation_embedding", "sealed_summary"} <= kinds
    pars = report["parsimony"]
    assert pars["points_seen"] == 0 and pars["rho"] == 0
    # the non-private protocol asks one owner per round: no embedding beyond those of D_s and D_v
    assert pars["embeddings_seen"] == pars["summary_size"] + pars["validation_size"]


def _frames_seen_by(nodes, party):
    seen = []
    node = next(n for n in nodes if n.party_id == party)
    original = node.receive

    def receive(frame, peer, decoded=None):
        seen.append(bytes(frame))
        return original(frame, peer, decoded)

    node.receive = receive
    return seen


def test_no_byte_of_an_owners_or_the_consumers_raw_rows_reaches_the_less_trusted_curator(scenario, tmp_path):
    config = parse_scenario(with_trust(scenario, "less_trusted"), source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    roles = [build_role(config, p, world=world, exchange=plugins.exchange(config.protocol)) for p in party_ids(config)]
    nodes = [Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles]
    frames = _frames_seen_by(nodes, "curator")
    run_inprocess(nodes)
    wire = b"".join(frames)
    rows = [*world.validation.X, *(x for owner in world.owners for x in owner.X)]
    assert all(np.ascontiguousarray(x, dtype="<f8").tobytes() not in wire for x in rows)
    assert len(roles[-1].result()["metrics"]) and roles[-1].summary_size == config.summarize.rounds


class SwappingOwner(SummarizeOwner):
    """Shows the curator the embedding of the point it bid for, but seals a different point."""

    def _send_point(self, message):
        sends = super()._send_point(message)
        body: SealedPoint = sends[0].body
        other = (self.sent_rows[-1] + 1) % len(self.data)
        sealed = seal_point(self.data.X[other], int(self.data.y[other]), self.consumer_key, secret=self.point_secret)
        return [
            Send(
                sends[0].to,
                SealedPoint(
                    round=body.round,
                    phi=body.phi,
                    row=body.row,
                    sealed=sealed,
                    key=sealed_point_key(self.point_secret, self.data.X[other], int(self.data.y[other])),
                    commitment=body.commitment,
                ),
                reply_to=sends[0].reply_to,
            )
        ]


class RawOwner(SummarizeOwner):
    """Ignores the less-trusted setting and sends its raw point."""

    def _send_point(self, message):
        sends = super()._send_point(message)
        body, row = sends[0].body, self.sent_rows[-1]
        return [
            Send(
                sends[0].to,
                Point(round=body.round, x=self.data.X[row], y=int(self.data.y[row]), row=body.row),
                reply_to=sends[0].reply_to,
            )
        ]


def run_roles(config, replace: dict[str, type]):
    world = make_world(config, plugins.exchange(config.protocol))
    roles = []
    for party in party_ids(config):
        role = build_role(config, party, world=world, exchange=plugins.exchange(config.protocol))
        if party in replace:
            identity = role.identity
            role = replace[party](
                party_id=party,
                scenario_name=config.name,
                data=role.data,
                features=build_role(
                    config, "curator", world=world, exchange=plugins.exchange(config.protocol)
                ).features,
                trust="less_trusted",
            )
            role.join(identity)
        roles.append(role)
    run_inprocess([Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles])
    return {r.party_id: r for r in roles}


def test_the_consumer_rejects_a_sealed_point_that_does_not_match_its_verified_embedding(scenario, tmp_path):
    config = parse_scenario(with_trust(scenario, "less_trusted"), source="t", base_dir=tmp_path).config
    roles = run_roles(config, {"owner-1": SwappingOwner})
    from_owner_1 = [i for i, (owner, *_) in enumerate(roles["curator"].selection) if owner == "owner-1"]
    assert from_owner_1, "the scenario should buy from owner-1"
    rejected = roles["consumer"].result()["rejected_points"]
    assert [r["position"] for r in rejected] == from_owner_1
    assert all("differs from the verified embedding" in r["reason"] for r in rejected)
    assert roles["consumer"].summary_size == len(roles["curator"].selection) - len(from_owner_1)


def test_an_owner_that_sends_a_raw_point_to_a_less_trusted_curator_is_flagged(scenario, tmp_path):
    config = parse_scenario(with_trust(scenario, "less_trusted"), source="t", base_dir=tmp_path).config
    roles = run_roles(config, {"owner-1": RawOwner})
    curator = roles["curator"]
    assert curator.flagged.get("owner-1") == "sent a raw point to a less-trusted curator"
    assert all(owner != "owner-1" for owner, *_ in curator.selection)
    assert curator.ledger.by_party.get("owner-1") == 1  # it did arrive: parsimony counts it honestly


# --- content keys: a point is told apart by features and label, and sold once -------------------


class ForgingOwner(SummarizeOwner):
    """Sells a record it holds twice both times (it ignores its duplicates), naming the second sale
    by a made-up content key so that the curator cannot see it is the same point."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.same_content = None

    def _send_point(self, message):
        sends = super()._send_point(message)
        body: SealedPoint = sends[0].body
        if len(self.sent_rows) < 2:
            return sends
        forged = SealedPoint(
            round=body.round, phi=body.phi, row=body.row, sealed=body.sealed, key=bytes(16), commitment=body.commitment
        )
        return [Send(sends[0].to, forged, reply_to=sends[0].reply_to)]


class TwoSecretsOwner(ForgingOwner):
    """Sells its twice-held record twice, the second time under a new secret (so a new, honest key)."""

    def _send_point(self, message):
        if len(self.sent_rows) == 1:
            self.point_secret = bytes(range(32))
        return SummarizeOwner._send_point(self, message)


def run_with_one_record_twice(config, cheat: type[SummarizeOwner]):
    """Every owner holds one record twice; owner-1 is ``cheat``. Three owners, six rounds."""
    world = make_world(config, plugins.exchange(config.protocol))
    roles = []
    for party in party_ids(config):
        k = int(party.split("-")[1]) - 1 if party.startswith("owner-") else None
        data = None if k is None else world.owners[k].take([0, 0])
        role = build_role(config, party, world=world, owner_data=data, exchange=plugins.exchange(config.protocol))
        if party == "owner-1":
            identity = role.identity
            role = cheat(
                party_id=party, scenario_name=config.name, data=data, features=role.features, trust="less_trusted"
            )
            role.join(identity)
        roles.append(role)
    run_inprocess([Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles])
    return {r.party_id: r for r in roles}


def test_a_point_resold_under_a_forged_content_key_is_refused_by_the_consumer_when_it_opens_it(scenario, tmp_path):
    config = parse_scenario(with_trust(scenario, "less_trusted"), source="t", base_dir=tmp_path).config
    roles = run_with_one_record_twice(config, ForgingOwner)
    curator, consumer = roles["curator"], roles["consumer"]
    assert roles["owner-1"].result()["points_sent"] == 2 and curator.flagged == {}  # the curator cannot tell
    second = [i for i, (owner, *_) in enumerate(curator.selection) if owner == "owner-1"][1]
    (rejected,) = consumer.result()["rejected_points"]
    assert rejected["position"] == second and "not the one its content key names" in rejected["reason"]
    assert consumer.summary_size == len(curator.selection) - 1 == 3


def test_an_owner_that_names_its_points_under_a_second_secret_is_flagged(scenario, tmp_path):
    config = parse_scenario(with_trust(scenario, "less_trusted"), source="t", base_dir=tmp_path).config
    roles = run_with_one_record_twice(config, TwoSecretsOwner)
    assert "two different secrets" in roles["curator"].flagged["owner-1"]
    assert roles["consumer"].result()["rejected_points"] == []


def test_honest_owners_holding_a_record_twice_sell_it_once(scenario, tmp_path):
    config = parse_scenario(with_trust(scenario, "less_trusted"), source="t", base_dir=tmp_path).config
    roles = run_with_one_record_twice(config, SummarizeOwner)
    assert [roles[f"owner-{k}"].result()["points_sent"] for k in (1, 2, 3)] == [1, 1, 1]
    assert roles["curator"].flagged == {} and roles["curator"].end_reason == "every owner has run out of points"


# --- the curator's checks on what the consumer sends --------------------------------------------


def curator_for(scenario, trust, tmp_path):
    config = parse_scenario(with_trust(scenario, trust), source="t", base_dir=tmp_path).config
    return build_role(
        config,
        "curator",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )


def from_consumer(body):
    return Envelope(PROTOCOL_VERSION, "t", 1, "consumer", "curator", type(body).KIND, None, body)


def test_a_less_trusted_curator_refuses_raw_d_v_and_a_trusted_one_refuses_embeddings(scenario, tmp_path):
    less = curator_for(scenario, "less_trusted", tmp_path)
    with pytest.raises(ProtocolError, match="less-trusted curator takes D_v as 'validation_embedding'"):
        less.handle(from_consumer(ValidationSet(X=np.zeros((2, 3)))))
    trusted = curator_for(scenario, "trusted", tmp_path)
    with pytest.raises(ProtocolError, match="trusted curator takes D_v as 'validation_set'"):
        trusted.handle(from_consumer(ValidationEmbedding(phi=np.zeros((2, 30)), consumer_key=b"k" * 32)))


@pytest.mark.parametrize(
    "phi, reason",
    [
        (np.zeros((2, 29)), "width 30"),
        (np.full((2, 30), np.nan), "non-finite"),
        (np.full((2, 30), 0.5), "exceeds sqrt"),
        (np.zeros((0, 30)), "at least one row"),
    ],
)
def test_a_less_trusted_curator_refuses_embeddings_that_cannot_be_h1(scenario, tmp_path, phi, reason):
    curator = curator_for(scenario, "less_trusted", tmp_path)
    with pytest.raises(ProtocolError, match=reason):
        curator.handle(from_consumer(ValidationEmbedding(phi=phi, consumer_key=b"k" * 32)))
    assert curator.target_mean is None


def test_a_less_trusted_owner_refuses_g_tilde_without_the_consumers_key(scenario, tmp_path):
    from marketplace.protocols.summarize.messages import TargetEmbedding

    config = parse_scenario(with_trust(scenario, "less_trusted"), source="t", base_dir=tmp_path).config
    owner = build_role(
        config,
        "owner-1",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    message = Envelope(
        PROTOCOL_VERSION, "t", 1, "curator", "owner-1", "target_embedding", None, TargetEmbedding(mean=np.zeros(30))
    )
    with pytest.raises(ProtocolError, match="consumer_key is missing"):
        owner.handle(message)


def test_the_sealed_summary_is_only_accepted_by_a_less_trusted_consumer(scenario, tmp_path):
    from marketplace.protocols.summarize.messages import SealedSummary

    config = parse_scenario(with_trust(scenario, "trusted"), source="t", base_dir=tmp_path).config
    consumer = build_role(
        config,
        "consumer",
        world=make_world(config, plugins.exchange(config.protocol)),
        exchange=plugins.exchange(config.protocol),
    )
    body = SealedSummary(phi=np.zeros((0, 30)), sealed=(), rounds=0)
    with pytest.raises(ProtocolError, match="comes as 'summary'"):
        consumer.handle(Envelope(PROTOCOL_VERSION, "t", 1, "curator", "consumer", "sealed_summary", None, body))


@pytest.mark.slow
def test_a_less_trusted_private_run_over_processes_matches_the_in_process_run(scenario, tmp_path):
    raw = with_trust(scenario, "less_trusted", private=True)
    processes = run_raw(raw, tmp_path, "processes", driver="processes")
    inprocess = run_raw(raw, tmp_path, "inprocess")
    assert processes["status"] == "completed"
    assert processes["selection"] == inprocess["selection"]
    assert processes["metrics"]["mmd2"] == inprocess["metrics"]["mmd2"]
    assert processes["parsimony"] == inprocess["parsimony"]
