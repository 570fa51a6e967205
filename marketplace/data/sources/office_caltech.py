"""``office_caltech``: the Office-Caltech10 image features (``surf``: 800-d SURF bag of words, or
``googlenet``: 1024-d GoogLeNet features; the latter has no caltech10 file), for stc's source and
target domains. The group of a row is its domain, with ids fixed whatever ``domains`` lists:
amazon 0, webcam 1, dslr 2, caltech10 3. The label is the object class 1..10. Preprocessing is per
record: each row is scaled to unit Euclidean norm (an all-zero row stays zero), then goes through
the public Gaussian random projection to ``project_dim`` dimensions, whose seed is drawn from the
source stream of the run seed. Reads the registered dataset ``office_caltech10_features``.

A scenario gives the owner the source domain (``data.partition.groups: [s]``) and the consumer the
target domain (``data.consumer.target_groups: [t]``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.textio import project
from marketplace.datasets import read_bytes
from marketplace.schema import Range, SchemaError

DATASET = "office_caltech10_features"
OFFICE_DOMAINS = ("amazon", "webcam", "dslr", "caltech10")
"""Group ids of the Office-Caltech10 domains: their positions here (fixed, whatever is loaded)."""
OFFICE_FEATURES = {"surf": ("surf", 800, OFFICE_DOMAINS), "googlenet": ("googlenet1024", 1024, OFFICE_DOMAINS[:3])}
"""features -> (sub-folder, width, domains that have a file)."""


@dataclass(frozen=True)
class OfficeCaltechSource:
    features: Literal["surf", "googlenet"] = "surf"
    domains: tuple[str, ...] | None = None
    """Domains to load (default: every domain with a file for ``features``; googlenet has no
    caltech10); group ids stay fixed whatever is listed."""
    project_dim: Annotated[int, Range(min=0)] = 8
    """Gaussian random projection of the unit-norm rows to this many dimensions (0 keeps all features)."""


def office_domains(cfg: OfficeCaltechSource) -> tuple[str, ...]:
    """The domains to load: the listed ones, or every domain that has a file for ``cfg.features``."""
    return tuple(cfg.domains) if cfg.domains is not None else OFFICE_FEATURES[cfg.features][2]


def check(cfg: OfficeCaltechSource, path: str) -> None:
    """SchemaError naming the option when the features, domains or projection cannot work."""
    if cfg.features not in OFFICE_FEATURES:
        raise SchemaError(f"{path}.features", f"one of {list(OFFICE_FEATURES)}", repr(cfg.features))
    _, width, available = OFFICE_FEATURES[cfg.features]
    domains = office_domains(cfg)
    unknown = [d for d in domains if d not in OFFICE_DOMAINS]
    if not domains or unknown:
        raise SchemaError(
            f"{path}.domains",
            f"a non-empty list of domains from {list(OFFICE_DOMAINS)}",
            repr(list(domains)) + (f" (unknown: {unknown})" if unknown else ""),
        )
    if len(set(domains)) != len(domains):
        raise SchemaError(f"{path}.domains", "each domain at most once", repr(list(domains)))
    absent = [d for d in domains if d not in available]
    if absent:
        raise SchemaError(
            f"{path}.domains",
            f"domains that have {cfg.features} features: {list(available)} "
            f"(no {cfg.features} file for {absent}; use features: surf for them)",
            repr(list(domains)),
        )
    if isinstance(cfg.project_dim, bool) or not isinstance(cfg.project_dim, int) or not 0 <= cfg.project_dim <= width:
        raise SchemaError(
            f"{path}.project_dim", f"an integer in [0, {width}] (0 keeps all {width} features)", repr(cfg.project_dim)
        )


def office_caltech(cfg: OfficeCaltechSource, rng: np.random.Generator) -> Dataset:
    """The rows of the listed domains (in the fixed order amazon, webcam, dslr, caltech10), each
    scaled to unit norm, then projected to ``project_dim`` dimensions with one public projection."""
    check(cfg, "data.source.office_caltech")
    folder, width, _ = OFFICE_FEATURES[cfg.features]
    blocks, labels, groups = [], [], []
    for group, domain in enumerate(OFFICE_DOMAINS):
        if domain not in office_domains(cfg):
            continue
        X, y = read_office(f"{folder}/{domain}.mat", width)
        blocks.append(X)
        labels.append(y)
        groups.append(np.full(len(y), group, dtype=np.int64))
    X = unit_rows(np.vstack(blocks))
    names = tuple(f"{cfg.features}{j}" for j in range(width))
    if cfg.project_dim > 0:
        X, names = project(X, cfg.project_dim, rng)
    return Dataset(
        X=X,
        y=np.concatenate(labels),
        group=np.concatenate(groups),
        feature_names=names,
        group_names=OFFICE_DOMAINS,
        name=f"office_caltech/{cfg.features}",
    )


def read_office(name: str, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Features ('fts', n x width) and labels ('labels', n x 1 or 1 x n, values 1..10) of one .mat file."""
    from scipy.io import loadmat

    where = f"{DATASET}/{name}"
    mat = loadmat(io.BytesIO(read_bytes(DATASET, name)))
    if "fts" not in mat or "labels" not in mat:
        raise ValueError(
            f"{where}: expected the variables 'fts' and 'labels', found "
            f"{sorted(k for k in mat if not k.startswith('__'))}"
        )
    X = np.asarray(mat["fts"], dtype=np.float64)
    y = np.asarray(mat["labels"]).ravel().astype(np.int64)
    if X.ndim != 2 or X.shape[1] != width or X.shape[0] != y.size:
        raise ValueError(
            f"{where}: expected 'fts' of shape (n, {width}) and n labels, got {X.shape} and {y.size} labels"
        )
    if y.size and (y.min() < 1 or y.max() > 10):
        raise ValueError(f"{where}: labels must be the classes 1..10, got values in [{y.min()}, {y.max()}]")
    return X, y


def unit_rows(X: np.ndarray) -> np.ndarray:
    """Each row divided by its Euclidean norm (a per-record map; an all-zero row stays zero)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return np.divide(X, norms, out=np.zeros_like(X, dtype=np.float64), where=norms > 0)


SOURCE = Source(
    kind="office_caltech",
    options=OfficeCaltechSource,
    load=office_caltech,
    check=check,
    datasets=lambda cfg: (DATASET,),
    summary="Office-Caltech10 image features, grouped by domain",
)
