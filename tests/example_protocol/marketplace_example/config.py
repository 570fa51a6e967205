"""The ``noisy_count:`` section of a scenario.

Every field has a default, and its type hint carries the constraints the scenario loader checks
(:mod:`marketplace.schema`): a bad value is refused before anything starts, naming the key
(``noisy_count.epsilon``), what was expected and what came.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from marketplace.schema import Range

PositiveFloat = Annotated[float, Range(min=0.0, min_open=True)]


@dataclass(frozen=True)
class NoisyCountConfig:
    """How many rows of class ``label`` do the owners hold together? Each owner answers with its
    own count plus Laplace noise of scale 1/epsilon."""

    label: Annotated[int, Range(min=0)] = 0
    """The class whose rows are counted (public: every party reads it from the scenario)."""
    epsilon: PositiveFloat = 1.0
    """Each owner's privacy cost for its one release (pure eps-DP, add/remove-one of its rows)."""
    budget: PositiveFloat | None = None
    """Refuse to start when one release would cost an owner more than this epsilon."""
    secure: bool = False
    """Draw the noise with OpenDP's exact sampler from OS entropy (not reproducible from the seed)."""
