"""The world of a `pfds` run (docs/design.md §4) and who holds what in it.

The table of ``data.source.table`` is cut into ``pfds.folds`` stratified folds (by the run seed); fold
``pfds.fold`` is the test set every agent is scored on, and the rest is split among the K owners and the
consumer (K + 1 agents) by the attribute-distance rule on ``pfds.partition_attribute``. The last
``pfds.sharers`` owners share (default: all); the others only receive, like the consumer. The exchange
builds the roles from it, and the report scores the agents and the baselines on it: both read this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from marketplace import seeds
from marketplace.data.dataset import Dataset, World
from marketplace.parties import party_ids, party_index
from marketplace.privacy import noise as noise_streams
from marketplace.privacy.noise import NoiseOrigin
from marketplace.roles import CONSUMER
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PublicSchema


def schema_of(config: ScenarioConfig) -> PublicSchema:
    """The public schema of the run: the built-in one of the table source. A marketplace described
    by its public schema (``data.schema``) is refused (SchemaError naming ``data.schema``)."""
    from marketplace.protocols.pfds.tables import public_schema

    if config.data.schema_only:  # refused when the scenario is read (check_plan), before anything starts
        raise SchemaError(
            "data.schema",
            "a table source instead (data.source.kind: table) for protocol pfds: it cuts one "
            "table into the agents' shares and the test fold, and learns from the table's own typed "
            "schema, neither of which a marketplace described by its public schema has",
            "a public schema (each party holding its own rows)",
        )
    source = config.data.source
    if source.kind != "table" or source.table is None:
        raise SchemaError(
            "data.source.kind", "'table' (with a data.source.table section) for protocol pfds", repr(source.kind)
        )
    return public_schema(source.table)


def partition_attribute(config: ScenarioConfig) -> str:
    from marketplace.protocols.pfds.tables import PARTITION_ATTRIBUTE

    return config.pfds.partition_attribute or PARTITION_ATTRIBUTE[config.data.source.table.dataset]


def stratified_folds(codes: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    """The fold (0..folds-1) of each row: every label code's rows, shuffled, dealt out in turn."""
    fold = np.empty(codes.shape[0], dtype=np.int64)
    start = 0
    for code in np.unique(codes):
        rows = rng.permutation(np.flatnonzero(codes == code))
        fold[rows] = (np.arange(rows.size) + start) % folds
        start += rows.size
    return fold


def make_world(config: ScenarioConfig) -> World:
    """Test fold, consumer share and sharers' shares of the table (see the module docstring)."""
    from marketplace.data.sources import load_source
    from marketplace.protocols.pfds import partition_agents

    schema = schema_of(config)
    source_rng = np.random.default_rng(np.random.SeedSequence(config.seed).spawn(4)[0])  # as build_world draws it
    data = load_source(config.data.source, source_rng)
    codes = schema.encode_labels(data.y)
    fold = stratified_folds(codes, config.pfds.folds, seeds.rng(config.seed, "pfds.folds"))
    test_rows = np.flatnonzero(fold == config.pfds.fold)
    train_rows = np.flatnonzero(fold != config.pfds.fold)
    k = config.parties.owners
    shares = partition_agents(
        data.X[train_rows],
        schema,
        attribute=partition_attribute(config),
        agents=k + 1,
        rng=seeds.rng(config.seed, "pfds.partition"),
    )
    empty = [CONSUMER if i == k else f"owner-{i + 1}" for i, share in enumerate(shares) if share.size == 0]
    if empty:
        raise ValueError(
            f"{', '.join(empty)} receive no training rows of the {train_rows.size} with "
            f"parties.owners = {k}: use fewer owners or more rows (data.source.table.rows)"
        )
    part = lambda rows, name: data.take(train_rows[rows], name=f"{data.name}/{name}")  # noqa: E731
    return World(
        owners=tuple(part(shares[i], f"owner-{i + 1}") for i in range(k)),
        validation=part(shares[k], "consumer"),
        test=data.take(test_rows, name=f"{data.name}/test-fold-{config.pfds.fold}"),
        seed_set=data.take([]),
    )


def labels_of(schema: PublicSchema, dataset: Dataset) -> np.ndarray:
    """A dataset's labels as the schema reads them (class values, or real regression labels)."""
    from marketplace.protocols.pfds import ClassLabels

    return dataset.y if isinstance(schema.label, ClassLabels) else dataset.y.astype(np.float64)


def sharers_of(config: ScenarioConfig) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(sharers, receivers): the last ``pfds.sharers`` owners share (default: every owner)."""
    owners = tuple(party_ids(config)[1:-1])
    n = len(owners) if config.pfds.sharers is None else min(config.pfds.sharers, len(owners))
    return owners[len(owners) - n :], owners[: len(owners) - n]


def is_sharer(config: ScenarioConfig, party: str) -> bool:
    """Whether ``party`` is one of :func:`sharers_of`'s sharers, in O(1) (no list of the owners)."""
    owners = config.parties.owners
    number = party_index(config, party)
    sharing = owners if config.pfds.sharers is None else min(config.pfds.sharers, owners)
    return number is not None and owners - sharing < number <= owners


def tree_seeds(
    config: ScenarioConfig, party: str, noise: NoiseOrigin | None = None
) -> dict[str, np.random.SeedSequence]:
    """The sharer's streams: one for its tree, one for its synthetic data, both from its noise origin
    (:mod:`marketplace.privacy.noise`). The runner's baselines regrow trees from the seed-derived
    stream, which is the sharer's own only when its noise comes from the seed."""
    return {
        "tree_seed": noise_streams.derive(config.seed, f"pfds.tree.{party}", noise),
        "data_seed": noise_streams.derive(config.seed, f"pfds.data.{party}", noise),
    }
