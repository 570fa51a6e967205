"""A point the curator refuses is not sold: the consumer does not pay for it, so the owner's sale record
(its lifetime ledger's points sold and earnings, and its own ``sale``) counts only the points the
curator took, and the bill equals the ledger. The curator tells the owner with an ``error`` about
the point; a refused point uses up none of the owner's point cap."""

from __future__ import annotations

import copy

import pytest

from marketplace import plugins
from marketplace.parties import build_role, make_world, party_ids
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.protocols.summarize.messages import Point, SealedPoint
from marketplace.protocols.summarize.sealing import seal_point
from marketplace.roles import Send
from marketplace.roles.lifetime import admit_party, settle
from marketplace.roles.party import Party
from marketplace.scenario import parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node

PRICE = 2.0


def scenario(tiny_scenario, tmp_path, trust: str) -> dict:
    raw = copy.deepcopy(tiny_scenario)
    raw["summarize"].update(
        curator=trust,
        rounds=6,
        privacy={"enabled": True, "t_init": 100, "t_sub": 3, "eps_auction": 0.5, "tau": 1},  # all asked, every round
    )
    raw["lifetime"] = {
        "ledgers": str(tmp_path / "ledgers"),
        "relation": "replace-one-distinct",
        "budget": {"epsilon": 1000.0, "delta": 0.5},
        "terms": {"price": PRICE},
    }
    return raw


def dishonest_for_its_second_point(role) -> None:
    """The owner hands over, for its second point, another row than the one it bid for (its bid no
    longer matches): the curator refuses that point and excludes the owner."""
    honest = role._send_point

    def send(message):
        sends = honest(message)
        if len(role.sent_rows) != 2:
            return sends
        body = sends[0].body
        other = (role.sent_rows[-1] + 1) % len(role.data)
        x, y = role.data.X[other], int(role.data.y[other])
        if isinstance(body, SealedPoint):
            lie = SealedPoint(
                round=body.round,
                phi=role._phi64(other),
                row=body.row,
                sealed=seal_point(x, y, role.consumer_key, secret=role.point_secret),
                key=body.key,
                commitment=body.commitment,
            )
        else:
            lie = Point(round=body.round, x=x, y=y, row=body.row)
        return [Send(sends[0].to, lie, reply_to=sends[0].reply_to)]

    role._send_point = send


def exchange_of(config):
    return plugins.exchange(config.protocol)


def started(config, world) -> dict[str, Party]:
    """Every party of the run, built and admitted under its lifetime ledger as a run starts them."""
    return {
        p: admit_party(
            config, Party(build_role(config, p, world=world, exchange=exchange_of(config))), exchange_of(config)
        )
        for p in party_ids(config)
    }


@pytest.mark.parametrize("trust", ["trusted", "less_trusted"])
def test_the_bill_equals_the_ledgers_sales_when_a_point_is_refused(tiny_scenario, tmp_path, trust):
    config = parse_scenario(scenario(tiny_scenario, tmp_path, trust), source="refused", base_dir=tmp_path).config
    world = make_world(config, exchange_of(config))
    parties = started(config, world)
    roles = {p: party.role for p, party in parties.items()}
    dishonest_for_its_second_point(roles["owner-1"])
    run_inprocess([Node(party, run_id="t", max_message_bytes=1 << 24) for party in parties.values()])
    records = {p: settle(party) for p, party in parties.items() if p.startswith("owner-")}
    curator, cheat = roles["curator"], roles["owner-1"]
    assert "owner-1" in curator.flagged and cheat.result()["points_sent"] == 2  # it handed over two points
    bill = curator.purse.report()
    assert bill["bought"]["owner-1"] == 1  # the consumer paid for the first only
    for owner, record in records.items():
        with LifetimeLedger.read(ledger_file(tmp_path / "ledgers", owner)) as ledger:
            (sale,) = ledger.sales()
        bought = bill["bought"].get(owner, 0)
        assert sale.sold == record["sale"]["sold"] == roles[owner].points_sold == bought, owner
        assert sale.earnings == pytest.approx(bill["paid_to"].get(owner, 0.0)) == PRICE * bought
        assert roles[owner].result()["sale"]["earned"] == pytest.approx(PRICE * bought)
    assert sum(bill["paid_to"].values()) == pytest.approx(bill["paid"])


def test_a_refused_point_uses_none_of_the_owners_cap(tiny_scenario, tmp_path):
    """owner-1 may sell 2 points in its life; one of its two sent points was refused, so one is left
    for the next request."""
    raw = scenario(tiny_scenario, tmp_path, "trusted")
    raw["lifetime"]["terms"]["points"] = 2
    config = parse_scenario(raw, source="refused", base_dir=tmp_path).config
    world = make_world(config, exchange_of(config))
    parties = started(config, world)
    dishonest_for_its_second_point(parties["owner-1"].role)
    run_inprocess([Node(party, run_id="t", max_message_bytes=1 << 24) for party in parties.values()])
    settle(parties["owner-1"])
    again = parse_scenario(
        {**raw, "lifetime": {**raw["lifetime"], "request_id": "second"}}, source="r", base_dir=tmp_path
    )
    party = admit_party(
        again.config,
        Party(build_role(again.config, "owner-1", world=world, exchange=exchange_of(again.config))),
        exchange_of(again.config),
    )
    assert party.admission.admitted, party.admission.reason  # before: declined, its two points counted as sold
    assert party.role.cap == 1
