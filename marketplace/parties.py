"""Building each party's role from the scenario alone, so any process (or container) can start one.

Every party rebuilds the same world from the scenario and seed and keeps only its share; public
randomness (the h1 map) comes from the run seed too, so all parties agree on it without a message.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np

from marketplace.data.dataset import Dataset, SparseParts
from marketplace.data.npz_file import OWNER_FILE_MAX_BYTES, read_npz
from marketplace.data.own_files import ReadLimits
from marketplace.data.world import World, build_world
from marketplace.plugins import Exchange
from marketplace.privacy.noise import NoiseOrigin
from marketplace.privacy.noise import describe as describe_noise
from marketplace.roles import CONSUMER, CURATOR, Role, owner_id
from marketplace.roles.identity import Identity
from marketplace.scenario import ScenarioConfig


def role_of(party: str) -> str:
    """The role name of a party id: curator, consumer or owner."""
    return "curator" if party == CURATOR else "consumer" if party == CONSUMER else "owner"


def parse_owner_ids(text: str, owners: int) -> list[str]:
    """Owner ids from a list such as ``owner-1..owner-250`` or ``owner-1,owner-7,owner-10..owner-20``,
    in order, each once; every id must be one of the scenario's ``owners`` owners."""
    chosen: list[int] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        first, sep, last = item.partition("..")
        lo = _owner_index(first, owners, item)
        hi = _owner_index(last, owners, item) if sep else lo
        if hi < lo:
            raise ValueError(f"{item!r}: a range runs from the lower owner to the higher (owner-1..owner-{owners})")
        chosen.extend(range(lo, hi + 1))
    if not chosen:
        raise ValueError(f"expected owner ids such as owner-1..owner-{owners}, got {text!r}")
    repeated = sorted(i for i, n in Counter(chosen).items() if n > 1)
    if repeated:
        raise ValueError(f"owner ids given more than once: {', '.join(f'owner-{i}' for i in repeated[:5])}")
    return [f"owner-{i}" for i in chosen]


def host_label(owners: list[str]) -> str:
    """The name of an owner host (its log, its process in the report): its first and last owner."""
    return owners[0] if len(owners) == 1 else f"{owners[0]}..{owners[-1]}"


def _owner_index(name: str, owners: int, item: str) -> int:
    prefix, _, number = name.strip().rpartition("-")
    if prefix != "owner" or not number.isdigit() or not 1 <= int(number) <= owners:
        raise ValueError(
            f"{item!r}: expected owner ids owner-1 ... owner-{owners} (this scenario has {owners} owners), "
            f"got {name.strip()!r}"
        )
    return int(number)


def party_ids(config: ScenarioConfig) -> list[str]:
    """Every party of a run, in the fixed start order: curator, owners, consumer."""
    return [CURATOR, *(owner_id(i) for i in range(config.parties.owners)), CONSUMER]


def party_index(config: ScenarioConfig, party: str) -> int | None:
    """Where ``party`` stands in :func:`party_ids` (curator 0, owner-i at i, consumer K + 1), or None
    for an id that is not a party of the run; O(1), where ``party_ids(config).index(party)`` is O(K)
    (building every role that way costs O(K^2): minutes at K = 10,000)."""
    owners = config.parties.owners
    if party == CURATOR:
        return 0
    if party == CONSUMER:
        return owners + 1
    return owner_number(party, owners)


def owner_number(party: str, owners: int) -> int | None:
    """``i`` for the id ``owner-i`` of a run with ``owners`` owners (1 ... owners), else None."""
    prefix, _, number = party.partition("-")
    if prefix != "owner" or not number.isdigit() or number.startswith("0") or not 1 <= int(number) <= owners:
        return None
    return int(number)


def owner_position(config: ScenarioConfig, party: str) -> int:
    """Where owner ``party``'s part is in the world's owners (0 for owner-1), in O(1): an agent builds one
    owner role per hosted owner every session, and looking each up in :func:`party_ids` made that
    O(K^2) per session. Raises ValueError naming the ids a run has for any other id."""
    number = owner_number(party, config.parties.owners)
    if number is None:
        raise ValueError(
            f"unknown party {party!r}: expected curator, consumer or owner-1 ... owner-{config.parties.owners}"
        )
    return number - 1


def make_world(config: ScenarioConfig, exchange: Exchange) -> World:
    """The world of the run: the exchange's own (its ``make_world``) or :func:`build_world`.
    ``exchange`` is the scenario's exchange (:func:`marketplace.plugins.exchange`). A
    schema-only marketplace (``data.schema``) has no such world: every part is empty (each party
    adds its own rows, :func:`with_own_rows`), and nobody holds everyone's rows."""
    schema = config.data.schema
    if schema is not None:  # config.data.schema_only
        from marketplace.data.public_schema import schema_world

        return schema_world(schema, config.parties.owners)
    own = exchange.make_world(config)
    if own is not None:
        return own
    return build_world(config.data, config.parties.owners, config.seed)


def share_of(world: World, party: str) -> World:
    """The part of the world ``party`` may hold: an owner its own rows, the consumer D_v and its test
    set (and the public seed set), the curator the public seed set; every other part is replaced by an
    empty dataset. A party
    process is given (or keeps) only this, so no process holds another party's private rows."""
    empty = world.seed_set.take([])
    k = len(world.owners)
    central = world.central  # a share of a schema-only world stays one: it says nobody holds everyone's rows
    if party == CURATOR:
        return World(
            owners=SparseParts(k, {}, empty), validation=empty, test=empty, seed_set=world.seed_set, central=central
        )
    if party == CONSUMER:  # the seed set is public: the consumer scores the summary with it too
        return World(
            owners=SparseParts(k, {}, empty),
            validation=world.validation,
            test=world.test,
            seed_set=world.seed_set,
            central=central,
        )
    number = owner_number(party, k)
    if number is None:
        raise ValueError(f"unknown party {party!r}: expected curator, consumer or owner-1 ... owner-{k}")
    return World(
        owners=SparseParts(k, {number - 1: world.owners[number - 1]}, empty),
        validation=empty,
        test=empty,
        seed_set=empty,
        central=central,
    )


def build_role(
    config: ScenarioConfig,
    party: str,
    *,
    world: World | None = None,
    owner_data: Dataset | None = None,
    noise: NoiseOrigin | None = None,
    exchange: Exchange,
) -> Role:
    """The role of ``party`` for this scenario, given its identity (:class:`~marketplace.roles.identity.Identity`:
    the configuration fingerprint its hello states, its noise description). ``owner_data`` replaces an
    owner's generated share (an owner that reads its own data file). ``noise`` is where the party's
    privacy noise comes from (:mod:`marketplace.privacy.noise`; None: the run seed); every ledger the
    role keeps says so. Building charges no lifetime ledger: that is a step of starting the party
    (:func:`marketplace.roles.lifetime.start_party`)."""
    if party_index(config, party) is None:
        raise ValueError(
            f"unknown party {party!r}: this scenario has curator, owner-1 ... owner-{config.parties.owners}, consumer"
        )
    world = world if world is not None else make_world(config, exchange)
    noise = _request_noise(config, noise)
    role: Role = exchange.build_role(config, party, world, owner_data, noise)
    identity = party_identity(config, party, exchange, noise, role_name=role.role_name, scenario=role.scenario_name)
    role.join(identity)
    for ledger in role.ledgers():
        ledger.noise = identity.noise
    return role


def _request_noise(config: ScenarioConfig, noise: NoiseOrigin | None) -> NoiseOrigin:
    """Where the party's noise comes from (None: the run seed), fresh per charged request."""
    noise = noise or NoiseOrigin.seed()
    if config.lifetime.ledgers is not None and config.lifetime.request_id:
        noise = dataclasses.replace(noise, request=config.lifetime.request_id)
    return noise


def party_identity(
    config: ScenarioConfig,
    party: str,
    exchange: Exchange,
    noise: NoiseOrigin | None = None,
    *,
    role_name: str | None = None,
    scenario: str | None = None,
) -> Identity:
    """``party`` as the scenario names it (:class:`~marketplace.roles.identity.Identity`), known
    without building its role: what a party whose ledger declined the run states in its hello."""
    from marketplace.scenario.fingerprint import fingerprint

    noise = _request_noise(config, noise)
    return Identity(
        party_id=party,
        role_name=role_name or role_of(party),
        scenario_name=config.name if scenario is None else scenario,
        config_fingerprint=_fingerprint_of(config, fingerprint),
        noise=describe_noise(noise, party, secure=exchange.secure_noise(config)),
    )


_last_fingerprint: list[tuple[ScenarioConfig, dict[str, str]]] = []


def _fingerprint_of(config: ScenarioConfig, fingerprint: Callable[[ScenarioConfig], dict[str, str]]) -> dict[str, str]:
    """The configuration fingerprint, computed once per config object (it serialises the whole data
    and protocol sections: about 0.5 ms, which every one of K roles built in one process would pay)."""
    if not _last_fingerprint or _last_fingerprint[0][0] is not config:
        _last_fingerprint[:] = [(config, fingerprint(config))]
    return dict(_last_fingerprint[0][1])


def load_owner_file(path: str, max_bytes: int = OWNER_FILE_MAX_BYTES, option: str | None = None) -> Dataset:
    """An owner's own data: a ``.npz`` archive (``numpy.savez``) with arrays X (n, dim), finite
    numbers small enough that the bids computed from them stay finite, and y (n,), integer class
    labels, read and checked by :func:`marketplace.data.npz_file.read_npz`. Anything else is refused
    with a ValueError that names the file, the array, what was expected and what was found (for a
    bad value its row and column, never the value; the party then exits with status 2). So is a
    file larger than ``max_bytes``, or whose arrays would take more (read from the archive's headers
    before any array is loaded; ``option``, the flag that raises the limit, is named by its error)."""
    rows = read_npz(path, max_bytes=max_bytes, option=option)
    return Dataset(
        X=rows.X,
        y=rows.y,
        group=np.zeros(len(rows.X), dtype=np.int64),
        feature_names=tuple(f"f{i}" for i in range(rows.X.shape[1])),
        group_names=("all",),
        name=path,
    )


def own_rows(
    config: ScenarioConfig,
    party: str,
    *,
    data: str | Path | None = None,
    test: str | Path | None = None,
    limits: ReadLimits | None = None,
) -> dict[str, Dataset]:
    """The rows ``party`` brings of its own, read from its files: ``{"owner": rows}`` for an owner,
    ``{"validation": D_v, "test": test set}`` for the consumer (the test set optional), ``{}`` when
    it brings none. In a schema-only marketplace (``data.schema``) every file is checked against the
    schema (:func:`marketplace.data.own_files.load_own_rows`), and an owner or consumer without its
    files is refused: nobody else holds them. Elsewhere only an owner's ``.npz`` (arrays X and y)
    may replace its generated share. Raises ValueError naming the party and what is wrong."""
    from marketplace.data.own_files import ReadLimits, load_own_rows

    limits = limits or ReadLimits()
    role = role_of(party)
    schema = config.data.schema
    if role == "curator":
        if data is not None or test is not None:
            raise ValueError("curator: holds no rows of its own (--data and --test are for owners and the consumer)")
        return {}
    if test is not None and role != "consumer":
        raise ValueError(f"{party}: --test is the consumer's own test set; an owner gives only --data")
    if schema is None:
        if role == "consumer" and (data is not None or test is not None):
            raise ValueError(
                "consumer: --data/--test bring the consumer's own target to a marketplace described by "
                "its public schema (data.schema); this scenario simulates its data (data.source), and "
                "the consumer's target is drawn from it (data.consumer)"
            )
        return {"owner": load_owner_file(str(data), limits.max_bytes, "--max-bytes")} if data is not None else {}
    if data is None:
        what = "its own rows (--data FILE.csv)" if role == "owner" else "its own target (--data TARGET.csv)"
        raise ValueError(
            f"{party}: this marketplace is described by its public schema (data.schema) and holds no "
            f"rows: {party} must bring {what}"
        )
    if role == "owner":
        return {"owner": load_own_rows(data, schema, party=party, limits=limits)}
    found = {"validation": load_own_rows(data, schema, party="consumer (target)", limits=limits)}
    if test is not None:
        found["test"] = load_own_rows(test, schema, party="consumer (test set)", limits=limits)
    return found


def with_own_rows(share: World, rows: dict[str, Dataset]) -> World:
    """``share`` with the consumer's own D_v and test set (``rows`` of :func:`own_rows`) in place."""
    if not rows.keys() & {"validation", "test"}:
        return share
    return dataclasses.replace(
        share, validation=rows.get("validation", share.validation), test=rows.get("test", share.test)
    )
