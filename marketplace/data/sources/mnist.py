"""``mnist``: the 10,000 MNIST test images scaled to [0, 1]; the group of a row is its digit
(label shift). Reads the registered dataset ``mnist`` (``marketplace data fetch mnist``)."""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.data.textio import project
from marketplace.datasets import read_bytes
from marketplace.schema import Range, SchemaError

DATASET = "mnist"
IMAGES = "t10k-images-idx3-ubyte.gz"
LABELS = "t10k-labels-idx1-ubyte.gz"
PIXELS = 28 * 28


@dataclass(frozen=True)
class MnistSource:
    project_dim: Annotated[int, Range(min=0)] = 0
    """Gaussian random projection to this many dimensions (0 keeps all 784 pixels)."""


def check(cfg: MnistSource, path: str) -> None:
    if cfg.project_dim > PIXELS:
        raise SchemaError(f"{path}.project_dim", f"at most {PIXELS} (0 keeps all pixels)", repr(cfg.project_dim))


def mnist(cfg: MnistSource, rng: np.random.Generator) -> Dataset:
    """With ``project_dim`` > 0 the pixels go through a Gaussian random projection whose seed is
    drawn from ``rng``: public randomness, the same for every party building the same world."""
    images = read_idx(IMAGES, ndim=3)
    labels = read_idx(LABELS, ndim=1)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{DATASET}: {images.shape[0]} images but {labels.shape[0]} labels")
    X = images.reshape(images.shape[0], -1) / 255.0
    names = tuple(f"pixel_{r}_{c}" for r in range(images.shape[1]) for c in range(images.shape[2]))
    if cfg.project_dim > 0:
        X, names = project(X, cfg.project_dim, rng)
    y = labels.astype(np.int64)
    return Dataset(
        X=X, y=y, group=y, feature_names=names, group_names=tuple(f"digit-{d}" for d in range(10)), name="mnist"
    )


def read_idx(name: str, ndim: int) -> np.ndarray:
    """Parse a gzipped IDX file of unsigned bytes, checking its magic number and its size."""
    data = gzip.decompress(read_bytes(DATASET, name))
    header = 4 + 4 * ndim
    if len(data) < header or data[:3] != b"\x00\x00\x08" or data[3] != ndim:
        raise ValueError(
            f"{DATASET}/{name}: not an IDX file of unsigned bytes with {ndim} dimension(s) (bad magic number)"
        )
    shape = tuple(int(s) for s in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    if len(data) != header + int(np.prod(shape)):
        raise ValueError(
            f"{DATASET}/{name}: header says shape {shape} but the file holds {len(data) - header} data bytes"
        )
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


SOURCE = Source(
    kind="mnist",
    options=MnistSource,
    load=mnist,
    check=check,
    datasets=lambda cfg: (DATASET,),
    summary="the MNIST test images, grouped by digit",
)
