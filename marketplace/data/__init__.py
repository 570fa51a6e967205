"""Data for a run: sources (synthetic, bundled, files), partitions among owners, and the world.

``build_world(config, n_owners, seed)`` is the entry point: every party calls it with the scenario's
``data:`` section and the run seed, and keeps only its own part of the returned :class:`World`.
"""

from marketplace.data.config import (
    AdultSource,
    ConsumerConfig,
    CovariateShiftSource,
    CsvSource,
    DataConfig,
    DigitsSource,
    MnistSource,
    PartitionConfig,
    SeedSetConfig,
    SourceConfig,
)
from marketplace.data.dataset import Dataset, World
from marketplace.data.partition import (
    assign_by_distance,
    attribute_distance_probabilities,
    draw_anchors,
    partition_attribute_distance,
    partition_by_group,
    partition_even,
    partition_target_to_one,
)
from marketplace.data.sources import check_source_available, load_source
from marketplace.data.world import build_world, world_summary

__all__ = [
    "AdultSource",
    "ConsumerConfig",
    "CovariateShiftSource",
    "CsvSource",
    "DataConfig",
    "Dataset",
    "DigitsSource",
    "MnistSource",
    "PartitionConfig",
    "SeedSetConfig",
    "SourceConfig",
    "World",
    "assign_by_distance",
    "attribute_distance_probabilities",
    "build_world",
    "check_source_available",
    "draw_anchors",
    "load_source",
    "partition_attribute_distance",
    "partition_by_group",
    "partition_even",
    "partition_target_to_one",
    "world_summary",
]
