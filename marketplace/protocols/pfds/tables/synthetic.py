"""``synthetic``: a generated mixed table (no file needed), for classification or regression."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np

from marketplace.protocols.pfds.tables.base import Table
from marketplace.schema import Range

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PublicSchema
    from marketplace.protocols.pfds.schema import Attribute


@dataclass(frozen=True)
class SyntheticTable:
    """A generated table: ``numeric`` attributes in [0, 1] and ``categorical`` ones with ``values``
    values each; the label comes from a random linear score (plus noise) of the attributes."""

    rows: Annotated[int, Range(min=10)] = 6000
    numeric: Annotated[int, Range(min=1, max=50)] = 4
    categorical: Annotated[int, Range(min=0, max=20)] = 2
    values: Annotated[int, Range(min=2, max=20)] = 3
    task: Literal["classification", "regression"] = "classification"
    noise: Annotated[float, Range(min=0.0)] = 0.3
    """Standard deviation of the noise added to the score before it becomes a label."""


def schema(source: Any) -> PublicSchema:
    from marketplace.protocols.pfds import (
        CategoricalAttribute,
        ClassLabels,
        NumericAttribute,
        PublicSchema,
        RegressionLabels,
    )

    s = source.synthetic
    attributes: list[Attribute] = [NumericAttribute(f"x{i}", 0.0, 1.0) for i in range(s.numeric)]
    attributes += [CategoricalAttribute(f"c{i}", tuple(range(s.values))) for i in range(s.categorical)]
    label = ClassLabels((0, 1)) if s.task == "classification" else RegressionLabels(0, 1000)
    return PublicSchema(tuple(attributes), label)


def load(source: Any, schema: Any, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    s = source.synthetic
    numeric = rng.beta(2.0, 2.0, size=(s.rows, s.numeric))
    codes = rng.integers(0, s.values, size=(s.rows, s.categorical))
    weights = rng.normal(size=s.numeric)
    effects = rng.normal(size=(s.categorical, s.values))
    score = (numeric - 0.5) @ weights * 2.0 + sum(effects[j, codes[:, j]] for j in range(s.categorical))
    score = score + rng.normal(scale=s.noise, size=s.rows)
    X = np.hstack([numeric, codes.astype(np.float64)])
    if s.task == "classification":
        return X, (score > np.median(score)).astype(np.int64)
    scaled = (score - score.min()) / (score.max() - score.min() + 1e-12)
    return X, np.round(scaled * 900 + 50).astype(np.int64)


TABLE = Table(name="synthetic", schema=schema, load=load, partition_attribute="x0", clip=False)
