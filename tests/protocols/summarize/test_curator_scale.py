"""A summarize round costs the curator O(K), and building K roles costs O(K): no per-bid or
per-hello pass over every owner, no per-role list of every party. (How fast it is at K = 10,000 is
measured by benchmarks/bench_inprocess_scale.py, not here.)"""

from __future__ import annotations

import pytest
from conftest import ROOT

import marketplace.parties as parties
import marketplace.protocols.summarize.exchange as summarize_exchange
from marketplace import plugins
from marketplace.parties import build_role, make_world, owner_position, party_ids, party_index
from marketplace.roles.members import ActiveOwners
from marketplace.runner.run import run_scenario
from marketplace.scenario import parse_scenario


def many_owners_raw(owners: int, *, private: bool = False, rounds: int = 3) -> dict:
    return {
        "name": "many-owners",
        "protocol": "summarize",
        "seed": 5,
        "parties": {"owners": owners},
        "data": {
            "source": {
                "kind": "covariate_shift",
                "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 400},
            },
            "partition": {"scheme": "even"},
            "consumer": {"target_groups": [0], "target_share": 0.2, "validation_size": 8, "test_size": 10},
            "seed_set": {"groups": [3], "size": 4},
        },
        "summarize": {"rounds": rounds, "gamma": 0.5, "features": 30, "baselines": [], "privacy": {"enabled": private}},
    }


def test_active_owners_keep_their_order_and_forget_a_removed_owner():
    active = ActiveOwners(["owner-1", "owner-2", "owner-3", "owner-4"])
    active.remove("owner-3")
    assert list(active) == ["owner-1", "owner-2", "owner-4"] and active == ["owner-1", "owner-2", "owner-4"]
    assert "owner-3" not in active and "owner-4" in active and len(active) == 3 and active


def test_removing_an_owner_that_is_not_active_raises_value_error_like_a_list():
    active = ActiveOwners(["owner-1"])
    active.remove("owner-1")
    assert not active
    with pytest.raises(ValueError, match="'owner-1' is not an active owner"):
        active.remove("owner-1")


def test_party_index_is_the_position_in_party_ids():
    config = parse_scenario(many_owners_raw(12), source="test", base_dir=ROOT).config
    ids = party_ids(config)
    assert [party_index(config, p) for p in ids] == list(range(len(ids)))
    for stranger in ("owner-0", "owner-13", "owner-08", "owner-", "owner", "owner-1x", "Owner-1", "stranger", ""):
        assert party_index(config, stranger) is None, stranger


def test_owner_position_is_where_the_owner_s_part_is_and_names_the_ids_for_a_stranger():
    config = parse_scenario(many_owners_raw(12), source="test", base_dir=ROOT).config
    owners = party_ids(config)[1:-1]
    assert [owner_position(config, o) for o in owners] == list(range(12))
    for stranger in ("curator", "consumer", "owner-0", "owner-13", "owner-08", "stranger"):
        with pytest.raises(
            ValueError, match=rf"unknown party '{stranger}': expected curator, consumer or owner-1 ... owner-12"
        ):
            owner_position(config, stranger)


def test_building_an_owner_role_does_not_list_every_party(monkeypatch):
    config = parse_scenario(many_owners_raw(200), source="test", base_dir=ROOT).config
    world = make_world(config, plugins.exchange(config.protocol))
    calls = []

    def counting(config):
        calls.append(1)
        return party_ids(config)

    monkeypatch.setattr(parties, "party_ids", counting)
    monkeypatch.setattr(summarize_exchange, "party_ids", counting)
    roles = [
        build_role(config, f"owner-{i}", world=world, exchange=plugins.exchange(config.protocol)) for i in (1, 77, 200)
    ]
    assert [r.party_id for r in roles] == ["owner-1", "owner-77", "owner-200"]
    assert calls == []
    with pytest.raises(ValueError, match="unknown party 'owner-201'"):
        build_role(config, "owner-201", world=world, exchange=plugins.exchange(config.protocol))


@pytest.mark.parametrize("private", [False, True], ids=["greedy", "private"])
def test_a_whole_run_passes_over_the_owners_a_constant_number_of_times_per_round(monkeypatch, tmp_path, private):
    """Every pass over the active owners is counted. Per round the curator may broadcast to every
    owner (one pass); per bid or per hello it must not (that would be K^2 = 90,000 visits here)."""
    owners, rounds = 300, 3
    visits = {"n": 0}
    original = ActiveOwners.__iter__

    def counting_iter(self):
        for owner in original(self):
            visits["n"] += 1
            yield owner

    monkeypatch.setattr(ActiveOwners, "__iter__", counting_iter)
    scenario = parse_scenario(many_owners_raw(owners, private=private, rounds=rounds), source="test", base_dir=tmp_path)
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")
    assert report["status"] == "completed" and len(report["selection"]) == rounds
    assert visits["n"] <= 4 * owners * (rounds + 2), visits["n"]
    if not private:
        assert report["checks"]["central_replay"]["matches"] is True
