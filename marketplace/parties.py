"""Building each party's role from the scenario alone, so any process (or container) can start one.

Every party rebuilds the same world from the scenario and seed and keeps only its share; public
randomness (the h1 map) comes from the run seed too, so all parties agree on it without a message.
"""

from __future__ import annotations

import numpy as np

from marketplace import seeds
from marketplace.data.dataset import Dataset
from marketplace.data.world import World, build_world
from marketplace.protocols.summarize import RandomFourierFeatures
from marketplace.roles import CONSUMER, CURATOR, Role, owner_id
from marketplace.scenario import ScenarioConfig


def role_of(party: str) -> str:
    """The role name of a party id: curator, consumer or owner."""
    return "curator" if party == CURATOR else "consumer" if party == CONSUMER else "owner"


def party_ids(config: ScenarioConfig) -> list[str]:
    """Every party of a run, in the fixed start order: curator, owners, consumer."""
    return [CURATOR, *(owner_id(i) for i in range(config.parties.owners)), CONSUMER]


def public_features(config: ScenarioConfig, dim: int) -> RandomFourierFeatures:
    """h1, drawn from the run seed: public randomness every party derives identically."""
    s = config.summarize
    return RandomFourierFeatures.draw(dim, s.features, s.gamma, seeds.derive(config.seed, "summarize.h1"))


def make_world(config: ScenarioConfig) -> World:
    """The world of the run: the exchange's own (``make_world`` in its module) or :func:`build_world`."""
    from marketplace.exchanges import exchange

    own = getattr(exchange(config.protocol), "make_world", None)
    if own is not None:
        return own(config)
    return build_world(config.data, config.parties.owners, config.seed)


def share_of(world: World, party: str) -> World:
    """The part of the world ``party`` may hold: an owner its own rows, the consumer D_v and its test
    set (and the public seed set), the curator the public seed set; every other part is replaced by an
    empty dataset. A party
    process is given (or keeps) only this, so no process holds another party's private rows."""
    empty = world.seed_set.take([])
    if party == CURATOR:
        return World(owners=tuple(empty for _ in world.owners), validation=empty, test=empty, seed_set=world.seed_set)
    if party == CONSUMER:  # the seed set is public: the consumer scores the summary with it too
        return World(owners=tuple(empty for _ in world.owners), validation=world.validation, test=world.test,
                     seed_set=world.seed_set)
    index = [owner_id(i) for i in range(len(world.owners))].index(party)
    owners = tuple(o if i == index else empty for i, o in enumerate(world.owners))
    return World(owners=owners, validation=empty, test=empty, seed_set=empty)


def build_role(config: ScenarioConfig, party: str, *, world: World | None = None, owner_data: Dataset | None = None) -> Role:
    """The role of ``party`` for this scenario. ``owner_data`` replaces an owner's generated share
    (an owner that reads its own data file)."""
    ids = party_ids(config)
    if party not in ids:
        raise ValueError(f"unknown party {party!r}: this scenario has {', '.join(ids)}")
    world = world if world is not None else make_world(config)
    from marketplace.exchanges import exchange
    from marketplace.scenario.fingerprint import fingerprint

    role = exchange(config.protocol).build_role(config, party, world, owner_data)
    role.config_fingerprint = fingerprint(config)
    return role


def load_owner_file(path: str) -> Dataset:
    """An owner's own data: ``.npz`` with arrays X (n, dim) and y (n,)."""
    with np.load(path, allow_pickle=False) as f:
        if "X" not in f or "y" not in f:
            raise ValueError(f"{path}: expected arrays 'X' and 'y', found {sorted(f.files)}")
        X = np.asarray(f["X"], dtype=np.float64)
        y = np.asarray(f["y"]).astype(np.int64)
    if X.ndim != 2 or y.shape != (len(X),) or not np.isfinite(X).all():
        raise ValueError(f"{path}: X must be a finite (n, dim) array and y an (n,) array; got {X.shape} and {y.shape}")
    names = tuple(f"f{i}" for i in range(X.shape[1]))
    return Dataset(X=np.ascontiguousarray(X), y=y, group=np.zeros(len(X), dtype=np.int64), feature_names=names,
                   group_names=("all",), name=path)
