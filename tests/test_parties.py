"""Building parties from the scenario alone, and an owner that brings its own data file."""

from __future__ import annotations

import numpy as np
import pytest

from marketplace.parties import build_role, load_owner_file, make_world, party_ids, public_features
from marketplace.scenario import parse_scenario


def test_every_party_derives_the_same_public_h1_from_the_seed(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    a, b = public_features(config, 3), public_features(config, 3)
    assert np.array_equal(a.W, b.W) and np.array_equal(a.b, b.b)


def test_party_ids_are_curator_owners_consumer(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    assert party_ids(config) == ["curator", "owner-1", "owner-2", "owner-3", "consumer"]


def test_each_party_keeps_only_its_share(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    world = make_world(config)
    owner = build_role(config, "owner-2", world=world)
    assert np.array_equal(owner.data.X, world.owners[1].X)
    assert not hasattr(owner, "validation")


def test_an_owner_can_read_its_own_npz_file(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    X = np.arange(30, dtype=float).reshape(10, 3)
    np.savez(tmp_path / "own.npz", X=X, y=np.arange(10) % 2)
    owner = build_role(config, "owner-1", owner_data=load_owner_file(str(tmp_path / "own.npz")))
    assert np.array_equal(owner.data.X, X) and owner.phi.shape == (10, 30)


@pytest.mark.parametrize(("arrays", "message"), [
    ({"X": np.zeros((4, 3))}, "expected arrays 'X' and 'y'"),
    ({"X": np.zeros((4, 3)), "y": np.zeros(3)}, "y must be an (4,) array, one label per row of X"),
    ({"X": np.full((4, 3), np.nan), "y": np.zeros(4)}, "X must be finite; row 0 holds nan"),
])
def test_a_bad_owner_file_is_refused_with_a_clear_error(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_owner_file(str(tmp_path / "bad.npz"))


def test_an_owner_file_with_the_wrong_width_is_refused(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    np.savez(tmp_path / "wide.npz", X=np.zeros((5, 7)), y=np.zeros(5))
    with pytest.raises(ValueError, match="7 features"):
        build_role(config, "owner-1", owner_data=load_owner_file(str(tmp_path / "wide.npz")))


def test_unknown_party_is_refused(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    with pytest.raises(ValueError, match="unknown party 'owner-7'"):
        build_role(config, "owner-7")
