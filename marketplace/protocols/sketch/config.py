"""The `sketch:` section of a scenario: DP sketch release and M²M (docs/design.md §5).

Every owner releases one DP sketch of its records under its own budget; the curator merges the
sketches and publishes them; the consumer estimates statistics and models from them by M²M
(post-processing: no further message to any owner). Everything the feature map depends on (the
box, the map's randomness) is public: given here or derived from the run seed, never fitted on data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Literal

from marketplace.schema import Length, Range

PositiveFloat = Annotated[float, Range(min=0.0, min_open=True)]
Unit = Annotated[float, Range(min=0.0, max=1.0)]

# The ranges where the sketch's arithmetic holds (refused at validation, not met as an overflow mid-run).
Epsilon = Annotated[
    float,
    Range(
        min=1e-6,
        max=1e6,
        reason="the noise scales Delta/eps and their variances, summed over owners and features, stay finite; "
        "beyond 1e6 the noise is below float32 resolution",
    ),
]
Delta = Annotated[
    float,
    Range(min=1e-12, max=0.5, reason="the Gaussian calibration's search resolves delta in float64 within it"),
]
Share = Annotated[
    float,
    Range(min=1e-3, max=0.999, reason="eps_num = share eps and eps_den = (1 - share) eps each stay >= 1e-9"),
]
Width = Annotated[
    float,
    Range(min=1e-6, max=1e6, reason="1/width, the scale of the map's frequencies or slab indices, stays finite"),
]
MAX_FEATURES = 100_000
"""m, the length of a sketch, whatever the map (RFF features, RACE R W, HIST d bins)."""


@dataclass(frozen=True)
class SketchMapConfig:
    """The public feature map Phi, on records scaled to the unit box [0, 1]^d (see ``SketchConfig``)."""

    kind: Literal["rff", "race", "hist"] = "rff"
    features: Annotated[int, Range(min=2, max=100_000)] = 200
    """RFF: m, the length of Phi(x) ([cos, sin] of m/2 frequencies); must be even."""
    sigma: Width = 1.0
    """RFF: the Gaussian kernel's bandwidth (in unit-box coordinates)."""
    repetitions: Annotated[int, Range(min=1, max=100_000)] = 50
    """RACE: R, the number of LSH repetitions."""
    buckets: Annotated[int, Range(min=2, max=100_000)] = 20
    """RACE: W, buckets per repetition (m = R W)."""
    bandwidth: Width = 0.5
    """RACE: width of an LSH slab (in unit-box coordinates)."""
    bins: Annotated[int, Range(min=1, max=100_000)] = 100
    """HIST: equal bins per attribute (m = d bins)."""

    def __post_init__(self) -> None:
        if self.kind == "rff" and self.features % 2:
            raise ValueError(
                f"sketch.map.features must be even for kind 'rff' ([cos, sin] of m/2 frequencies), got {self.features}"
            )
        if self.kind == "race" and self.repetitions * self.buckets > MAX_FEATURES:
            raise ValueError(
                f"sketch.map.repetitions x sketch.map.buckets (m, the sketch's length) must be at most "
                f"{MAX_FEATURES:,}, got {self.repetitions} x {self.buckets} = {self.repetitions * self.buckets:,}"
            )


@dataclass(frozen=True)
class CountQuery:
    """A counting query: the records with lower[i] <= x[attributes[i]] <= upper[i] for every i
    (unit-box coordinates; attributes not listed are unconstrained)."""

    attributes: Annotated[tuple[Annotated[int, Range(min=0)], ...], Length(min=1)]
    lower: tuple[Unit, ...]
    upper: tuple[Unit, ...]

    def __post_init__(self) -> None:
        if not len(self.lower) == len(self.upper) == len(self.attributes):
            raise ValueError(
                "a count query needs one lower and one upper bound per attribute, got "
                f"{len(self.attributes)} attributes, {len(self.lower)} lower and {len(self.upper)} upper bounds"
            )
        if any(lo > hi for lo, hi in zip(self.lower, self.upper)):
            raise ValueError(
                f"a count query's lower bounds must not exceed its upper bounds, got {self.lower} > {self.upper}"
            )


DEFAULT_CDF_POINTS = tuple(round(0.05 + 0.1 * i, 2) for i in range(10))


@dataclass(frozen=True)
class SketchQueries:
    """What the consumer estimates from the merged sketch (all from one M²M fit, at no privacy cost)."""

    moments: Annotated[int, Range(min=0, max=8)] = 2
    """Raw moments of orders 1 .. this, per attribute (0: none)."""
    cdf_points: tuple[Unit, ...] = DEFAULT_CDF_POINTS
    """The marginal CDF of every attribute at these points (unit-box coordinates; empty: none)."""
    covariance: bool = True
    counts: tuple[CountQuery, ...] = ()
    """Counting queries (conjunctions of range predicates) given explicitly."""
    random_counts: Annotated[int, Range(min=0, max=10_000)] = 10
    """Plus this many random counting queries, each a random interval on ``count_attributes``
    random attributes, drawn from the run seed (public)."""
    count_attributes: Annotated[int, Range(min=1)] = 2
    logistic_regression: bool = False
    """Fit a logistic regression of the label on the other attributes by implicit M²M; needs
    ``sketch.include_label`` (the label is sketched as the last attribute). The consumer measures
    its AUC on its test set."""
    logistic_l2: Annotated[
        float, Range(min=1e-9, max=1e6, reason="the ridge term of the logistic M²M fit stays well conditioned")
    ] = 1e-3
    rank_owners: bool = True
    """Rank the owners by the sketch estimate of MMD^2 between each owner's data and the consumer's
    own data (D_v), from the per-owner sketches."""


@dataclass(frozen=True)
class SketchConfig:
    """The `sketch` protocol. Records are mapped to the unit box by the public ``lower``/``upper``
    bounds (x -> (x - lower) / (upper - lower)); every estimate is in those unit coordinates."""

    lower: tuple[float, ...] = ()
    """The public box: one lower bound per attribute (required with ``protocol: sketch``)."""
    upper: tuple[float, ...] = ()
    """One upper bound per attribute, each above its lower bound."""
    clip: bool = True
    """Clip records to the box before sketching (a per-record map, no privacy cost); false refuses
    a record outside it."""
    include_label: bool = False
    """Sketch the 0/1 label as an extra last attribute (needed for logistic regression)."""
    map: SketchMapConfig = field(default_factory=SketchMapConfig)
    epsilon: Epsilon | None = 1.0
    """Each owner's budget for its one release; null releases exact sums (NOT private; for analysis)."""
    mechanism: Literal["laplace", "gaussian"] = "laplace"
    """laplace: eps-DP; gaussian: (eps, delta)-DP noise on the sum (the count keeps Laplace noise)."""
    delta: Delta = 1e-5
    """delta of the Gaussian mechanism (ignored by laplace)."""
    numerator_share: Share = 0.98
    """eps_num / eps: the share of the budget spent on the sum (the rest on the count)."""
    secure: bool = False
    """Draw noise from OS entropy with OpenDP's exact samplers (not reproducible from the seed)."""
    budget_epsilon: PositiveFloat | None = None
    """Refuse to start if one owner's release would cost more than this eps."""
    budget_delta: Annotated[float, Range(min=0.0, max=1.0, max_open=True)] = 0.0
    """...or more than this delta (with ``budget_epsilon``)."""
    samples: Annotated[int, Range(min=10, max=10_000_000)] = 100_000
    """n_s: synthetic points from the uniform prior on the unit box for the M²M ridge regression."""
    regularization: Literal["summed", "averaged", "theorem"] = "summed"
    """The lambda rule (marketplace.protocols.sketch.m2m): summed = sigma^2 / (n n_s) (default),
    averaged = sigma^2 / n (the paper's formula applied to the averaged loss), theorem = sigma^2 / n^2."""
    intercept: bool = False
    """Add an unpenalised constant feature to the M²M regression (not in the paper)."""
    precision: Literal["float32", "float64"] = "float32"
    """Working precision of the owners' RFF trigonometry (float32: faster, error ~1e-7 per value)."""
    queries: SketchQueries = field(default_factory=SketchQueries)

    def __post_init__(self) -> None:
        if len(self.lower) != len(self.upper):
            raise ValueError(
                f"sketch.lower and sketch.upper need one bound per attribute each, got {len(self.lower)} and "
                f"{len(self.upper)}"
            )
        bad = [i for i, (lo, hi) in enumerate(zip(self.lower, self.upper)) if not lo < hi]
        if bad:
            raise ValueError(f"sketch.upper must be above sketch.lower in every attribute, not in attribute(s) {bad}")
        wide = [i for i, (lo, hi) in enumerate(zip(self.lower, self.upper)) if not math.isfinite(hi - lo)]
        if wide:  # records are mapped by (x - lower) / (upper - lower): the width must be a finite number
            raise ValueError(
                f"sketch.upper - sketch.lower must be a finite number (below 1.8e308) in every attribute, not in "
                f"attribute(s) {wide}"
            )
