"""The `sketch` pieces every party derives from the scenario alone, no message needed: the unit-box
map of the records (:func:`unit_records`), the feature map (:func:`public_map`, randomness from the
run seed) and the consumer's query plan (:func:`query_plan`, random counting queries from the seed).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from marketplace import seeds
from marketplace.data.dataset import Dataset
from marketplace.scenario.config import ScenarioConfig

if TYPE_CHECKING:
    from marketplace.protocols.sketch.consumer import QueryPlan
    from marketplace.protocols.sketch.feature_maps import FeatureMap


def record_dim(config: ScenarioConfig) -> int:
    """d of the sketched records: the box's attributes, plus one for the label if it is sketched."""
    return len(config.sketch.lower) + int(config.sketch.include_label)


def attribute_names(config: ScenarioConfig, world: Any = None) -> tuple[str, ...] | None:
    """The names of the sketched attributes, in order: the data's columns (the schema's features in a
    marketplace described by its public schema, else the columns of ``world``'s data), then the
    label's name when it is sketched; None when neither names them (the results then say x0, x1, ...).
    Public: a column's name is part of the schema, not of anybody's rows."""
    schema = config.data.schema
    validation = getattr(world, "validation", None)
    if schema is not None:
        columns, label = tuple(schema.feature_names), schema.label.name
    elif isinstance(validation, Dataset):
        columns, label = tuple(validation.feature_names), "label"
    else:
        return None
    if len(columns) != len(config.sketch.lower):
        return None
    return (*columns, label) if config.sketch.include_label else columns


def unit_records(config: ScenarioConfig, data: Dataset, *, party: str = "a party") -> np.ndarray:
    """``data``'s rows mapped to the unit box with the public bounds (clipped when ``sketch.clip``),
    with the 0/1 label appended when ``sketch.include_label``."""
    s = config.sketch
    lower, upper = np.array(s.lower, dtype=np.float64), np.array(s.upper, dtype=np.float64)
    if data.X.shape[1] != lower.size:
        raise ValueError(
            f"{party}: sketch.lower/sketch.upper give {lower.size} bounds but the data have "
            f"{data.X.shape[1]} attributes ({', '.join(data.feature_names)})"
        )
    U = (data.X - lower) / (upper - lower)
    if s.clip:
        U = np.clip(U, 0.0, 1.0)
    if s.include_label:
        if len(data.y) and not np.isin(data.y, (0, 1)).all():
            raise ValueError(f"{party}: sketch.include_label needs 0/1 labels, got {np.unique(data.y)[:5].tolist()}")
        U = np.column_stack([U, data.y.astype(np.float64)])
    return np.ascontiguousarray(U)


_MAPS: dict[tuple[str, int, int], FeatureMap] = {}
"""Memo of the public maps drawn, by their settings (the map's, d and the run seed): an agent builds
one owner role per hosted owner per session, all of the same map. A map is immutable (its arrays are
read-only), so one drawn map serves them all."""
_MAPS_KEPT = 16


def public_map(config: ScenarioConfig) -> FeatureMap:
    """The public feature map on the unit box, its randomness drawn from the run seed (drawn once per
    distinct settings in a process: :data:`_MAPS`)."""
    key = (repr(config.sketch.map), record_dim(config), config.seed)
    fmap = _MAPS.get(key)
    if fmap is None:
        if len(_MAPS) >= _MAPS_KEPT:
            _MAPS.clear()
        fmap = _MAPS[key] = _draw_map(config)
    return fmap


def _draw_map(config: ScenarioConfig) -> FeatureMap:
    """The public feature map of ``config``, drawn (:func:`public_map` keeps it)."""
    from marketplace.protocols.sketch import RACE, RFF, Box, Histogram

    m = config.sketch.map
    box = Box.unit(record_dim(config))
    seed = seeds.derive(config.seed, "sketch.map")
    if m.kind == "rff":
        return RFF.draw(box, n_features=m.features, sigma=m.sigma, seed=seed)
    if m.kind == "race":
        return RACE.draw(box, repetitions=m.repetitions, buckets=m.buckets, bandwidth=m.bandwidth, seed=seed)
    return Histogram(box=box, bins=m.bins)


def query_plan(config: ScenarioConfig) -> QueryPlan:
    """The consumer's queries, with the random counting queries drawn from the run seed."""
    from marketplace.protocols.sketch.consumer import QueryPlan

    q, d = config.sketch.queries, record_dim(config)
    attributes = len(config.sketch.lower)  # counting queries constrain the data's attributes, not the label
    boxes = []
    for c in q.counts:
        if max(c.attributes) >= d:
            raise ValueError(f"sketch.queries.counts: attribute {max(c.attributes)} does not exist (d = {d})")
        lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
        lo[list(c.attributes)], hi[list(c.attributes)] = c.lower, c.upper
        boxes.append((lo, hi))
    rng = seeds.rng(config.seed, "sketch.count_queries")
    for _ in range(q.random_counts):
        chosen = rng.choice(attributes, size=min(q.count_attributes, attributes), replace=False)
        ends = np.sort(rng.random((chosen.size, 2)), axis=1)
        lo, hi = np.full(d, -np.inf), np.full(d, np.inf)
        lo[chosen], hi[chosen] = ends[:, 0], ends[:, 1]
        boxes.append((lo, hi))
    return QueryPlan(
        moments=q.moments,
        cdf_points=tuple(q.cdf_points),
        covariance=q.covariance,
        count_boxes=tuple(boxes),
        logistic_label=d - 1 if q.logistic_regression else None,
        logistic_l2=q.logistic_l2,
    )
