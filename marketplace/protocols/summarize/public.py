"""The public h1 map of a run: random Fourier features drawn from the run seed, so every party
derives the same map without a message."""

from __future__ import annotations

import functools
from typing import Any

from marketplace import seeds
from marketplace.protocols.summarize.features import RandomFourierFeatures


def public_features(config: Any, dim: int) -> RandomFourierFeatures:
    """h1, drawn from the run seed: public randomness every party derives identically."""
    s = config.summarize
    return _draw_features(dim, s.features, s.gamma, config.seed)


@functools.lru_cache(maxsize=4)
def _draw_features(dim: int, features: int, gamma: float, seed: int) -> RandomFourierFeatures:
    """One draw per map (the value is frozen): K owners built in one process share it instead of
    drawing it K times."""
    return RandomFourierFeatures.draw(dim, features, gamma, seeds.derive(seed, "summarize.h1"))
