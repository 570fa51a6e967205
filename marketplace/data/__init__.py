"""Data for a run: sources (generated, bundled, public datasets, your own files), partitions among
owners, and the world.

``build_world(config, n_owners, seed)`` is the entry point: every party calls it with the scenario's
``data:`` section and the run seed, and keeps only its own part of the returned :class:`World`.
Sources live one per module in :mod:`marketplace.data.sources`; the public datasets they read come
from the data cache (:mod:`marketplace.datasets`).
"""

from marketplace.data.config import ConsumerConfig, DataConfig, PartitionConfig, SeedSetConfig, SourceConfig
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
from marketplace.data.sources import SOURCES, check_source_available, load_source
from marketplace.data.sources.adult import AdultSource
from marketplace.data.sources.covariate_shift import CovariateShiftSource
from marketplace.data.sources.csv_file import CsvSource
from marketplace.data.sources.digits import DigitsSource
from marketplace.data.sources.mnist import MnistSource
from marketplace.data.world import build_world, world_summary

__all__ = [
    "SOURCES",
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
