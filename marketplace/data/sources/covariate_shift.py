"""``covariate_shift``: a generated Gaussian mixture whose labels follow a different random
hyperplane in each component, so a linear model fitted on the wrong components does badly on the
target: the covariate shift matters downstream. No file needed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.data.sources.base import Source
from marketplace.schema import Range


@dataclass(frozen=True)
class CovariateShiftSource:
    """A Gaussian mixture in `dim` dimensions with `components` components."""

    dim: Annotated[int, Range(min=1)] = 10
    components: Annotated[int, Range(min=3)] = 6
    rows_per_component: Annotated[int, Range(min=1)] = 2500
    """Rows per component; the default leaves room for the consumer defaults (0.3 x 2500 = 750 >= 200 + 500)."""
    spread: Annotated[float, Range(min=0.0, min_open=True)] = 3.0
    """Scale of the component centres (standard normal times `spread`)."""
    noise: Annotated[float, Range(min=0.0, min_open=True)] = 1.0
    """Standard deviation of each component around its centre."""
    label_noise: Annotated[float, Range(min=0.0, max=1.0)] = 0.05


def covariate_shift(cfg: CovariateShiftSource, rng: np.random.Generator) -> Dataset:
    """Centres ~ N(0, spread^2 I), rows ~ N(centre, noise^2 I); a row of component c is labelled 1
    when (x - centre_c) . w_c > 0 for a random unit vector w_c, then flipped with probability
    ``label_noise``. The group of a row is its component."""
    k, n_c, dim = cfg.components, cfg.rows_per_component, cfg.dim
    centres = rng.normal(0.0, cfg.spread, size=(k, dim))
    normals = rng.normal(size=(k, dim))
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    group = np.repeat(np.arange(k), n_c)
    offsets = rng.normal(0.0, cfg.noise, size=(k * n_c, dim))
    X = centres[group] + offsets
    y = (np.einsum("ij,ij->i", offsets, normals[group]) > 0).astype(np.int64)
    flip = rng.random(k * n_c) < cfg.label_noise
    y[flip] = 1 - y[flip]
    return Dataset(
        X=X,
        y=y,
        group=group,
        feature_names=tuple(f"f{j}" for j in range(dim)),
        group_names=tuple(f"component-{c}" for c in range(k)),
        name="covariate_shift",
    )


SOURCE = Source(
    kind="covariate_shift",
    options=CovariateShiftSource,
    load=covariate_shift,
    summary="generated Gaussian mixture with per-component labelling hyperplanes",
)
