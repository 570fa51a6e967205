"""An honest owner is never refused or flagged, whatever its data inside the schema (docs/design.md §10):
the curator identifies a point as the owner counts it (features and label), and its bid check leaves
room for every rounding error an honest computation can make, however large |xW| is.

Each case gives every owner data that broke the check before: one record twice with two labels (a
one-hot table's usual case), two rows whose features differ by one ulp (the same h1 embedding), and
rows with |xW| near 1e9 (the owner's batched h1 and the curator's one-row h1 differ in the 7th digit).
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from marketplace import plugins
from marketplace.data.dataset import Dataset
from marketplace.parties import build_role, make_world, party_ids
from marketplace.scenario import parse_scenario
from marketplace.transport.inprocess import run_inprocess
from marketplace.transport.node import Node

PRIVATE = {"enabled": True, "t_init": 100, "t_sub": 3, "eps_auction": 0.5, "tau": 3}


def twin_labels(data: Dataset, k: int) -> Dataset:
    """One record of the owner's, twice: the same features under two labels."""
    one = data.take([k % len(data)] * 2)
    return Dataset(one.X, one.y + np.array([0, 1]), one.group, one.feature_names, one.group_names, one.name)


def one_ulp_apart(data: Dataset, k: int) -> Dataset:
    """Two rows of one label whose features differ in one coordinate by one ulp (1e-20 and the next
    double): h1 maps both to the same embedding, bit for bit."""
    one = data.take([k % len(data)] * 2)
    X = np.array(one.X)
    X[:, 0] = [1e-20, np.nextafter(1e-20, 1.0)]
    return Dataset(X, one.y, one.group, one.feature_names, one.group_names, one.name)


def huge(data: Dataset, k: int) -> Dataset:
    """The owner's rows scaled by 1e9: |xW| near 1e9, where the h1 of a row computed in a batch and
    alone differ by about 1e-7."""
    return Dataset(data.X * 1e9, data.y, data.group, data.feature_names, data.group_names, data.name)


CASES = {"same-features-two-labels": twin_labels, "one-ulp-apart": one_ulp_apart, "xW-near-1e9": huge}


def run(tiny_scenario, tmp_path, case: str, trust: str, private: bool) -> dict:
    raw = copy.deepcopy(tiny_scenario)
    raw["summarize"].update(curator=trust, rounds=6)
    if private:
        raw["summarize"]["privacy"] = dict(PRIVATE)
    config = parse_scenario(raw, source="honest", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    roles = []
    for party in party_ids(config):
        data = None
        if party.startswith("owner-"):
            k = int(party.split("-")[1]) - 1
            data = CASES[case](world.owners[k], k)
        roles.append(
            build_role(config, party, world=world, owner_data=data, exchange=plugins.exchange(config.protocol))
        )
    run_inprocess([Node(r, run_id="t", max_message_bytes=1 << 24) for r in roles])
    return {r.party_id: r for r in roles}


@pytest.mark.parametrize("private", [False, True], ids=["non-private", "private"])
@pytest.mark.parametrize("trust", ["trusted", "less_trusted"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_an_honest_owner_is_never_refused_or_flagged_whatever_its_data(tiny_scenario, tmp_path, case, trust, private):
    roles = run(tiny_scenario, tmp_path, case, trust, private)
    curator, consumer = roles["curator"], roles["consumer"]
    owners = [r for p, r in roles.items() if p.startswith("owner-")]
    assert curator.flagged == {} and curator.dropouts == {}
    assert all(o.failure is None for o in owners)
    if case != "xW-near-1e9":  # two rows per owner, three owners, six rounds: every row is sold, both twins
        assert [o.result()["points_sent"] for o in owners] == [2, 2, 2]
    assert len(curator.selection) == 6
    if trust == "less_trusted":  # and the consumer keeps every point it opens
        assert consumer.result()["rejected_points"] == []
    assert consumer.summary_size == 6


def test_the_one_ulp_rows_have_one_embedding_and_are_two_points(tiny_scenario, tmp_path):
    """The precondition of the one-ulp case: the two rows differ in their bytes (the owner counts
    them as two points) and h1 maps them to one embedding, bit for bit."""
    config = parse_scenario(tiny_scenario, source="honest", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    rows = one_ulp_apart(world.owners[0], 0)
    features = build_role(config, "curator", world=world, exchange=plugins.exchange(config.protocol)).features
    assert rows.X[0].tobytes() != rows.X[1].tobytes()
    assert np.array_equal(features.transform(rows.X[:1]), features.transform(rows.X[1:]))


# --- the rounding bounds the checks allow ------------------------------------------------------


def exact_h1(features, X: np.ndarray) -> np.ndarray:
    """h1 in extended precision (numpy's longdouble), the reference the bound is measured against."""
    t = X.astype(np.longdouble) @ features.W.astype(np.longdouble) + features.b.astype(np.longdouble)
    return (np.longdouble(features.bound) * np.cos(t)).astype(np.float64)


@pytest.mark.skipif(np.finfo(np.longdouble).nmant < 60, reason="needs an extended-precision longdouble")
@pytest.mark.parametrize("dim", [3, 40])
@pytest.mark.parametrize("scale", [1.0, 1e3, 1e6, 1e9, 1e12])
def test_every_evaluation_of_h1_is_within_its_error_bound(dim, scale):
    from marketplace.protocols.summarize.features import RandomFourierFeatures

    features = RandomFourierFeatures.draw(dim, 50, 0.5, seed=3)
    X = np.random.default_rng(dim).normal(size=(300, dim)) * scale
    bound = features.transform_error(X)
    batched = features.transform(X)
    alone = np.array([features.transform(x[None, :])[0] for x in X])
    assert (np.abs(batched - alone) <= 2 * bound).all()
    if scale <= 1e6:  # past that the longdouble reference's own error (its cos included) is too coarse
        assert (np.abs(batched - exact_h1(features, X)) <= bound).all()
    assert bound.max() <= features.bound * 2.1 and (scale > 1 or bound.max() < 1e-13)


@pytest.mark.parametrize("scale", [1.0, 1e9])
def test_the_bid_check_allows_what_rounding_does_and_refuses_more(scale):
    """An honest bid computed from the owner's batched h1 passes the curator's check on its one-row
    h1 at any magnitude; a bid off by 1e-6 of the coordinates' scale is still refused at |xW| ~ 1."""
    from marketplace.protocols.summarize.bid import bid_rounding, bid_value
    from marketplace.protocols.summarize.features import RandomFourierFeatures

    features = RandomFourierFeatures.draw(5, 60, 0.5, seed=1)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 5)) * scale
    direction = rng.normal(size=60) * features.bound
    owner = features.transform(X)
    for x, phi in zip(X, owner):
        mine = features.transform(x[None, :])[0]
        allowed = bid_rounding(mine, direction, features.transform_error(x[None, :])[0])
        assert abs(bid_value(phi, direction) - bid_value(mine, direction)) <= allowed
        if scale == 1.0:
            assert allowed < 1e-6 * features.bound
