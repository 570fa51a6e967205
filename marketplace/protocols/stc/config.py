"""The `stc:` section of a scenario: private source-target clustering (docs/design.md §6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

from marketplace.schema import Length, Range

PositiveFloat = Annotated[float, Range(min=0.0, min_open=True)]

# The ranges where the release's arithmetic holds (refused at validation, not met as an overflow mid-run).
Epsilon = Annotated[
    float,
    Range(
        min=1e-6,
        max=1e9,
        reason="the Laplace scale (sqrt(d) + 1)/eps, its square and the NNA threshold ln(.)/eps stay finite; "
        "beyond 1e9 the noise is below float64 resolution of the ball",
    ),
]
Rho = Annotated[
    float,
    Range(min=1e-12, max=1e18, reason="the Gaussian sigma = (sqrt(d) + 1)/sqrt(2 rho) and its square stay finite"),
]
Bound = Annotated[
    float,
    Range(min=-1e150, max=1e150, reason="the box's centre (low + high)/2 and diameter ||high - low|| stay finite"),
]
Size = Annotated[int, Range(min=1, max=1_000_000, reason="a count of points, clusters or rounds one run can hold")]


@dataclass(frozen=True)
class StcPrivacy:
    """Each owner's release of S' under its own budget: pure eps-DP (Laplace) or rho-zCDP (Gaussian)."""

    notion: Literal["dp", "zcdp"] = "dp"
    epsilon: Epsilon = 3.0
    """eps of each owner's release when ``notion`` is dp (the paper: 3)."""
    rho: Rho = 3.0
    """rho of each owner's release when ``notion`` is zcdp (the paper: 3)."""
    budget: PositiveFloat | None = None
    """Refuse to start if one release would cost an owner more than this (eps, or rho under zcdp)."""
    secure: bool = False
    """Draw noise from OS entropy with OpenDP's exact samplers (not reproducible from the seed)."""
    gaussian_accountant: Literal["exact", "zcdp"] = "exact"
    """How a zcdp release's (eps, delta) equivalent is stated: ``exact`` (the Gaussian mechanism's
    own privacy-loss distribution, the tightest valid figure) or ``zcdp`` (the looser conversion of
    rho). rho itself is the same either way; ``secure`` mode always uses ``zcdp``."""


@dataclass(frozen=True)
class StcDomain:
    """The public box the points live in (one value per feature, or one value for all). Every party
    maps it to the ball of radius 1/2 the noise is calibrated for; points outside are clipped onto
    it (a per-record map, so it costs no privacy). Never computed from the data."""

    low: Annotated[tuple[Bound, ...], Length(min=1)]
    high: Annotated[tuple[Bound, ...], Length(min=1)]


@dataclass(frozen=True)
class StcConfig:
    """The consumer's target T (its unlabelled data) goes to the owners; each answers with a private
    release S'; the consumer picks k points of T to label, minimizing Cost(T, S' ∪ T_k)."""

    release: Literal["nna", "nas"] = "nna"
    k: Size = 10
    """Points of T the consumer can afford to label."""
    t: Size = 150
    """NAS: source neighbours averaged per target point (the paper: 150)."""
    gamma: Annotated[float, Range(min=0.0, max=1.0, min_open=True, max_open=True)] = 0.05
    """NNA: chance that an empty cell passes the noisy-count threshold."""
    coreset: (
        Annotated[float, Range(min=1e-6, max=1e6, reason="the kd-tree stops splitting at cells this wide")] | None
    ) = None
    """C: release for a kd-tree coreset of T (cells of diameter <= C in scaled units) instead of T."""
    domain: StcDomain | None = None
    """The public box of the data (required)."""
    max_candidates: Size | None = None
    """Solver: target points considered as centres (default: all); a cap trades cost for time."""
    baselines: tuple[Literal["cluster_t", "nonprivate_stc", "private_kmeans"], ...] = ("cluster_t", "nonprivate_stc")
    """References the report computes in the same run, each scored against the true S: ``cluster_t``
    (k-medoids on T, ignoring S), ``nonprivate_stc`` (the solver given the true S), and, only when
    listed, ``private_kmeans`` (the paper's PrivateKmeans: DP Lloyd's algorithm with
    ``kmeans_clusters`` clusters on the pooled scaled S, at one owner's release budget, its centres
    given to the solver as S')."""
    kmeans_clusters: Size | None = 100
    """private_kmeans baseline: clusters of S (the paper: 100; null: k)."""
    kmeans_iterations: Annotated[
        int, Range(min=1, max=10_000, reason="each Lloyd round gets eps/iterations: its noise scale stays finite")
    ] = 5
    """private_kmeans baseline: Lloyd rounds, the budget split evenly over them."""
    privacy: StcPrivacy = field(default_factory=StcPrivacy)

    def __post_init__(self) -> None:
        if self.max_candidates is not None and self.max_candidates < self.k:
            raise ValueError(
                f"stc.max_candidates must be at least stc.k (the k points to label are chosen among the "
                f"candidates), got max_candidates = {self.max_candidates} < k = {self.k}"
            )
