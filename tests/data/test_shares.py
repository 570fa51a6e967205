"""What each party's process is handed: its own share of the world, and nothing else's."""

from __future__ import annotations

import pickle

import pytest
from conftest import tiny_raw

from marketplace import plugins
from marketplace.parties import make_world, share_of
from marketplace.scenario import parse_scenario


def test_a_partys_share_stays_small_whatever_the_number_of_owners(tmp_path):
    """A share is handed to the party's process: it holds the party's own rows and answers an empty
    part for every other owner, in O(own rows) bytes, not O(K)."""
    sizes = {}
    for k in (10, 1000):
        raw = tiny_raw()
        raw["parties"] = {"owners": k}
        raw["data"]["source"]["covariate_shift"]["rows_per_component"] = 3000
        raw["data"]["partition"] = {"scheme": "even"}
        world = make_world(
            parse_scenario(raw, source="k", base_dir=tmp_path).config,
            plugins.exchange(parse_scenario(raw, source="k", base_dir=tmp_path).config.protocol),
        )
        share = share_of(world, "owner-3")
        assert len(share.owners) == k
        assert share.owners[2] is world.owners[2] and share.owners[-1] is share.owners[0] and len(share.owners[0]) == 0
        assert [len(o) for o in share.owners] == [len(world.owners[2]) if i == 2 else 0 for i in range(k)]
        assert len(share.owners[1:4]) == 3 and share.owners[1:4][1] is world.owners[2]
        again = pickle.loads(pickle.dumps(share))
        assert len(again.owners) == k and (again.owners[2].X == world.owners[2].X).all()
        sizes[k] = len(pickle.dumps(share_of(world, "curator")))
        with pytest.raises(IndexError):
            share.owners[k]
    assert sizes[1000] < sizes[10] + 64  # the curator's share does not grow with K
