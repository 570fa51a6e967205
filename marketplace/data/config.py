"""The `data:` section of a scenario: where the rows come from and how they are shared out.

Every party rebuilds the same world from this section and the run seed, and keeps only its own
share, so a container needs nothing but the scenario file (see :func:`marketplace.data.world.build_world`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from marketplace.data.tables import TableSource  # noqa: E402  (the raw-table source of pfds)
from marketplace.data.sources_sketch import LifeSciSource, OccupancySource, UniformSource  # the sketch sources
from marketplace.data.sources_stc import OfficeCaltechSource, SuperconductivitySource  # the stc sources
from marketplace.schema import Length, Range

Positive = Annotated[int, Range(min=1)]
Probability = Annotated[float, Range(min=0.0, max=1.0)]


@dataclass(frozen=True)
class CovariateShiftSource:
    """A Gaussian mixture in `dim` dimensions with `components` components.

    Labels come from a random hyperplane through each component's centre, so a linear model fitted
    on the wrong components does badly on the target: the covariate shift matters downstream.
    """

    dim: Positive = 10
    components: Annotated[int, Range(min=3)] = 6
    rows_per_component: Positive = 2500
    """Rows per component; the default leaves room for the consumer defaults (0.3 x 2500 = 750 >= 200 + 500)."""
    spread: Annotated[float, Range(min=0.0, min_open=True)] = 3.0
    """Scale of the component centres (standard normal times `spread`)."""
    noise: Annotated[float, Range(min=0.0, min_open=True)] = 1.0
    """Standard deviation of each component around its centre."""
    label_noise: Probability = 0.05


@dataclass(frozen=True)
class CsvSource:
    """A CSV file with a header row: feature columns, a label column, optionally a group column."""

    path: str
    label: str
    features: tuple[str, ...] = ()
    """Columns to use as features; empty means every numeric column except label and group."""
    group: str | None = None
    """Column whose values define the groups (components) used by partition and target; absent: the label."""
    delimiter: str = ","


@dataclass(frozen=True)
class AdultSource:
    """UCI Adult (census income): one-hot categoricals, standardised numerics, label income > 50K."""

    root: str
    group: str = "race"
    """Categorical column that defines the groups (e.g. race, sex, relationship, workclass)."""


@dataclass(frozen=True)
class MnistSource:
    """MNIST test images (10k x 784, scaled to [0, 1]); groups are the digits (label shift)."""

    root: str
    project_dim: Annotated[int, Range(min=0)] = 0
    """Gaussian random projection to this many dimensions (0 keeps all 784 pixels)."""


@dataclass(frozen=True)
class StcSyntheticSource:
    """One of the STC paper's three 2-D source/target sets (1 gaussians, 2 grid, 3 random): group 0
    is the source population, group 1 the target; the generator's public box is in
    ``marketplace.protocols.stc.synthetic``."""

    which: Literal[1, 2, 3] = 2
    n_source: Annotated[int, Range(min=1)] = 1000
    n_target: Annotated[int, Range(min=1)] = 1000


@dataclass(frozen=True)
class DigitsSource:
    """scikit-learn's bundled 8x8 digits (1,797 x 64, scaled to [0, 1]); groups are the digits."""


@dataclass(frozen=True)
class SourceConfig:
    kind: Literal["covariate_shift", "digits", "csv", "adult", "mnist", "stc_synthetic", "table", "uniform", "lifesci", "occupancy",
                  "office_caltech", "superconductivity"] = "covariate_shift"
    covariate_shift: CovariateShiftSource = field(default_factory=CovariateShiftSource)
    digits: DigitsSource = field(default_factory=DigitsSource)
    stc_synthetic: StcSyntheticSource = field(default_factory=StcSyntheticSource)
    csv: CsvSource | None = None
    adult: AdultSource | None = None
    mnist: MnistSource | None = None
    table: TableSource | None = None
    uniform: UniformSource = field(default_factory=UniformSource)
    lifesci: LifeSciSource | None = None
    occupancy: OccupancySource | None = None
    office_caltech: OfficeCaltechSource | None = None
    superconductivity: SuperconductivitySource | None = None

    def __post_init__(self) -> None:
        if self.kind in ("csv", "adult", "mnist", "table", "office_caltech", "superconductivity") and getattr(self, self.kind) is None:
            raise ValueError(f"source.kind is {self.kind!r} but the source.{self.kind} section is missing")


@dataclass(frozen=True)
class PartitionConfig:
    """How the owners' pool is split among the K owners.

    * ``even``: a random even split.
    * ``by_group``: skewed by group; owner i favours groups i, i+K, ...: a row of a favoured group
      goes to that owner with probability `skew`, otherwise to a uniformly random owner.
    * ``attribute_distance``: the rule of DESIGN.md §4 on numeric feature `attribute`: each owner
      draws a_i uniform in that feature's range and a row goes to owner i with probability
      proportional to 1/|x_a - a_i|.
    * ``target_to_one``: the paper's experiment: every owners'-pool row of the consumer's target
      groups goes to owner-1, every other row is split evenly among all owners. With
      ``data.consumer.target_share: 0.3`` owner-1 holds 70% of the target population.

    ``groups`` restricts the owners' pool to rows of those groups (empty: every group), e.g. one
    base population plus the target groups.
    """

    scheme: Literal["even", "by_group", "attribute_distance", "target_to_one"] = "by_group"
    skew: Probability = 0.8
    attribute: Annotated[int, Range(min=0)] = 0
    groups: tuple[int, ...] = ()


@dataclass(frozen=True)
class ConsumerConfig:
    """The consumer's target: rows drawn from the `target_groups`, split into D_v and a test set.

    `target_share` of the rows of the target groups are set aside as the target pool (the rest stay
    with the owners, so owners do hold target-like data); D_v and test are drawn from that pool.
    """

    target_groups: Annotated[tuple[int, ...], Length(min=1)] = (0,)
    target_share: Annotated[float, Range(min=0.0, max=1.0, min_open=True, max_open=True)] = 0.3
    validation_size: Positive = 200
    test_size: Positive = 500


@dataclass(frozen=True)
class SeedSetConfig:
    """The public seed set D_init, drawn from groups outside the target (a third distribution)."""

    groups: tuple[int, ...] = ()
    """Groups to draw from; empty means every group not in the target."""
    size: Annotated[int, Range(min=0)] = 50


@dataclass(frozen=True)
class DataConfig:
    source: SourceConfig = field(default_factory=SourceConfig)
    partition: PartitionConfig = field(default_factory=PartitionConfig)
    consumer: ConsumerConfig = field(default_factory=ConsumerConfig)
    seed_set: SeedSetConfig = field(default_factory=SeedSetConfig)
