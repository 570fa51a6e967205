"""Build the world of a run: one source split among owners, consumer and seed set.

:func:`build_world` is a deterministic function of (data config, number of owners, seed), so every
party rebuilds the same world from the scenario file and keeps only its own share. Each random step
draws from its own child of ``SeedSequence(seed)``: changing, say, the partition scheme or the number
of owners leaves the generated rows, the consumer's sets and the seed set as they were.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from marketplace.data.bounds import check_rows
from marketplace.data.config import DataConfig, PartitionConfig
from marketplace.data.dataset import Dataset, World
from marketplace.data.partition import (
    partition_attribute_distance,
    partition_by_group,
    partition_even,
    partition_target_to_one,
)
from marketplace.data.sources import load_source

_SOURCE, _TARGET, _SEED_SET, _PARTITION = range(4)


def build_world(config: DataConfig, n_owners: int, seed: int) -> World:
    """Load the source and split it into K owner shares, D_v, a test set and the seed set D_init.

    The target pool is a random ``target_share`` of the rows of the target groups; D_v and the test
    set are drawn from it (rows of the pool left over are used by nobody). The seed set comes from
    the seed groups (default: every non-target group). All other rows form the owners' pool, split
    with the partition scheme. Raises ValueError, naming the config key to change, when the data
    cannot satisfy the config.
    """
    if isinstance(n_owners, bool) or not isinstance(n_owners, int) or n_owners < 1:
        raise ValueError(f"n_owners must be a positive integer, got {n_owners!r}")
    streams = [np.random.default_rng(child) for child in np.random.SeedSequence(seed).spawn(4)]
    data = load_source(config.source, streams[_SOURCE])
    check_rows(data.X, f"data.source: {data.name}", columns=data.feature_names)
    targets = _target_groups(data, config)
    pool = _target_pool(data, targets, config, streams[_TARGET])
    seed_rows = _seed_rows(data, targets, pool, config, streams[_SEED_SET])
    n_split = config.consumer.validation_size
    n_used = n_split + config.consumer.test_size
    taken = np.zeros(len(data), dtype=bool)
    taken[pool] = True
    taken[seed_rows] = True
    owners_rows = np.flatnonzero(~taken)
    if config.partition.groups:
        _check_groups(data, config.partition.groups, "data.partition.groups")
        owners_rows = owners_rows[np.isin(data.group[owners_rows], config.partition.groups)]
    shares = _partition(data, owners_rows, n_owners, config.partition, streams[_PARTITION], targets)
    return World(
        owners=tuple(data.take(owners_rows[share], name=f"{data.name}/owner-{i}") for i, share in enumerate(shares)),
        validation=data.take(pool[:n_split], name=f"{data.name}/validation"),
        test=data.take(pool[n_split:n_used], name=f"{data.name}/test"),
        seed_set=data.take(seed_rows, name=f"{data.name}/seed-set"),
    )


def _available_groups(data: Dataset) -> str:
    """The groups that hold rows, as 'id (name, rows)' for error messages."""
    counts = data.group_counts()
    return ", ".join(f"{g} ({data.group_names[g]}, {int(c)} rows)" for g, c in enumerate(counts) if c)


def _check_groups(data: Dataset, groups: tuple[int, ...], key: str) -> None:
    """ValueError naming ``key`` when a group id holds no rows of the data."""
    counts = data.group_counts()
    unknown = [g for g in groups if not 0 <= g < len(counts) or counts[g] == 0]
    if unknown:
        raise ValueError(
            f"{key}: group(s) {unknown} hold no rows of {data.name!r}; available: {_available_groups(data)}"
        )


def _target_groups(data: Dataset, config: DataConfig) -> np.ndarray:
    targets = tuple(dict.fromkeys(config.consumer.target_groups))
    _check_groups(data, targets, "data.consumer.target_groups")
    return np.array(targets, dtype=np.int64)


def _target_pool(data: Dataset, targets: np.ndarray, config: DataConfig, rng: np.random.Generator) -> np.ndarray:
    """A random ``target_share`` of the target groups' rows, in random order (D_v first, then test)."""
    consumer = config.consumer
    target_rows = np.flatnonzero(np.isin(data.group, targets))
    size = int(round(consumer.target_share * target_rows.size))
    pool = rng.permutation(target_rows)[:size]
    wanted = consumer.validation_size + consumer.test_size
    if size < wanted:
        raise ValueError(
            f"the consumer's target pool has {size} rows (data.consumer.target_share = {consumer.target_share} of "
            f"the {target_rows.size} rows of groups {targets.tolist()}) but data.consumer.validation_size + "
            f"data.consumer.test_size = {consumer.validation_size} + {consumer.test_size} = {wanted} were asked for; "
            "lower those sizes, raise data.consumer.target_share or add groups to data.consumer.target_groups"
        )
    return pool


def _seed_rows(
    data: Dataset, targets: np.ndarray, pool: np.ndarray, config: DataConfig, rng: np.random.Generator
) -> np.ndarray:
    """``size`` rows of the seed groups (default: all non-target groups) outside the target pool."""
    size = config.seed_set.size
    groups = tuple(dict.fromkeys(config.seed_set.groups))
    if groups:
        _check_groups(data, groups, "data.seed_set.groups")
        overlap = sorted(set(groups) & set(targets.tolist()))
        if overlap:
            raise ValueError(
                f"data.seed_set.groups: group(s) {overlap} are also in data.consumer.target_groups; "
                "the seed set must come from a distribution other than the target"
            )
        chosen = np.array(groups, dtype=np.int64)
    else:
        chosen = np.setdiff1d(np.arange(len(data.group_names)), targets)
    candidates = np.flatnonzero(np.isin(data.group, chosen))
    candidates = np.setdiff1d(candidates, pool)
    if candidates.size < size:
        raise ValueError(
            f"data.seed_set.size = {size} but the seed groups {chosen.tolist()} hold only {candidates.size} rows; "
            "lower data.seed_set.size or set data.seed_set.groups"
        )
    return np.sort(rng.choice(candidates, size=size, replace=False))


def _partition(
    data: Dataset, rows: np.ndarray, k: int, cfg: PartitionConfig, rng: np.random.Generator, targets: np.ndarray
) -> list[np.ndarray]:
    """Positions into ``rows`` of each owner's share; ValueError when an owner would get nothing."""
    if cfg.scheme == "even":
        shares = partition_even(rows.size, k, rng)
    elif cfg.scheme == "target_to_one":
        shares = partition_target_to_one(np.isin(data.group[rows], targets), k, rng)
    elif cfg.scheme == "by_group":
        shares = partition_by_group(data.group[rows], k, cfg.skew, rng)
    elif cfg.scheme == "attribute_distance":
        if cfg.attribute >= data.dim:
            raise ValueError(
                f"data.partition.attribute = {cfg.attribute} but {data.name!r} has {data.dim} features "
                f"(0..{data.dim - 1})"
            )
        shares = partition_attribute_distance(data.X[rows, cfg.attribute], k, rng)
    else:
        raise ValueError(f"data.partition.scheme: unknown scheme {cfg.scheme!r}")
    empty = [f"owner-{i + 1}" for i, share in enumerate(shares) if share.size == 0]
    if empty:
        shown = ", ".join(empty[:10]) + (f" and {len(empty) - 10} more" if len(empty) > 10 else "")
        raise ValueError(
            f"parties.owners: {shown} would receive no rows of the {rows.size}-row owners' pool with "
            f"data.partition.scheme = {cfg.scheme!r}; use fewer owners, more data or another scheme"
        )
    return shares


_SUMMARIES: dict[int, dict[str, Any]] = {}
"""The summary of each world summarised, while that world lives (a served marketplace reports the same
world's counts in every session's report: counting every owner's rows again made the report cost more
with every owner). A world is read only once built."""


def world_summary(world: World) -> dict[str, Any]:
    """Sizes and per-group / per-label row counts of every part, as plain data for reports (a copy of
    the one counted the first time ``world`` was summarised, which the caller may change)."""
    kept = _SUMMARIES.get(id(world))
    if kept is None:
        kept = _SUMMARIES[id(world)] = _summary(world)
        weakref.finalize(world, _SUMMARIES.pop, id(world), None)
    return _copy_summary(kept)


def _copy_summary(summary: dict[str, Any]) -> dict[str, Any]:
    parts = ("validation", "test", "seed_set")
    return {
        **summary,
        "group_names": list(summary["group_names"]),
        "owners": [_copy_part(part) for part in summary["owners"]],
        **{name: _copy_part(summary[name]) for name in parts},
    }


def _copy_part(part: dict[str, Any]) -> dict[str, Any]:
    return {"rows": part["rows"], "groups": dict(part["groups"]), "labels": dict(part["labels"])}


def _summary(world: World) -> dict[str, Any]:
    return {
        "dim": world.dim,
        "group_names": list(world.validation.group_names),
        "owners": [_part_summary(owner) for owner in world.owners],
        "validation": _part_summary(world.validation),
        "test": _part_summary(world.test),
        "seed_set": _part_summary(world.seed_set),
    }


def _part_summary(part: Dataset) -> dict[str, Any]:
    """Rows, group histogram (by group name, groups present only) and label histogram of one part."""
    groups = {part.group_names[g]: int(c) for g, c in enumerate(part.group_counts()) if c}
    labels, counts = np.unique(part.y, return_counts=True)
    return {
        "rows": len(part),
        "groups": groups,
        "labels": {str(int(label)): int(count) for label, count in zip(labels, counts)},
    }
