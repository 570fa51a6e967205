"""Public datasets fetched by name: the registry (provenance, licence, citation, files with their
SHA-256), the local cache they are read from, and downloading from upstream or a mirror.

* :mod:`.registry`: every dataset declared once;
* :mod:`.cache`: the cache folder (``$MARKETPLACE_DATA``) and checked reads from it;
* :mod:`.fetch`: downloads with pooch (atomic, verified, retried), from upstream or a mirror;
* ``marketplace data list|info|fetch|verify|path`` is :mod:`marketplace.cli.datasets`.
"""

from marketplace.datasets.cache import ChecksumMismatch, DatasetMissing, data_home, fetch_command, read_bytes, require
from marketplace.datasets.registry import DATASETS, DatasetSpec, FileSpec, UnknownDataset, dataset

__all__ = [
    "DATASETS",
    "ChecksumMismatch",
    "DatasetMissing",
    "DatasetSpec",
    "FileSpec",
    "UnknownDataset",
    "data_home",
    "dataset",
    "fetch_command",
    "read_bytes",
    "require",
]
