"""The `pfds:` section of a scenario: private federated data sharing (docs/design.md §4).

The owners are the *sharers* (by default all of them; see ``sharers``): each grows a private tree and later releases
labelled synthetic
data, spending ``epsilon`` in all. The consumer is one more agent, with its own rows, that shares
nothing. The public schema is the built-in one of ``data.source.table`` (a ``table`` source is
required). Each run evaluates one fold of a stratified ``folds``-fold split: the fold is every
agent's test set, the rest is split among the agents by the attribute-distance rule. Cross-
validation is a sweep over ``pfds.fold``; repeats are ``--repeats`` (seeds seed, seed+1, ...).
The paper's 10 x 10: ``--sweep pfds.fold=0,1,...,9 --repeats 10``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from marketplace.schema import Range

PositiveFloat = Annotated[float, Range(min=0.0, min_open=True)]
Epsilon = Annotated[
    float,
    Range(
        min=0.01,
        max=1000.0,
        reason="each leaf's Laplace count (scale 2 h_max/eps) becomes that many synthetic records, millions "
        "below 0.01; DP-Pred's objective perturbation takes expm1(eps/4), which overflows past 2839",
    ),
]
Baseline = Literal["np_agt", "dp_pred", "pfds_s", "pfds_minus", "np_pred"]
BASELINES: tuple[Baseline, ...] = ("np_agt", "dp_pred", "pfds_s", "pfds_minus", "np_pred")


@dataclass(frozen=True)
class PfdsConfig:
    """Every sharer's budget and tree parameters, the model agents train, and the evaluation."""

    epsilon: Epsilon = 1.0
    """Each sharer's total eps: eps/2 for its tree (eps/(2 h_max) per level), eps/2 for node counts."""
    h_max: Annotated[int, Range(min=2, max=32)] = 8
    """Levels of a tree (the leaves are level h_max)."""
    t: Annotated[int, Range(min=1, max=10_000)] = 10
    """Candidate thresholds per numeric split (exponential mechanism over them)."""
    p: Annotated[int, Range(min=2, max=32)] = 4
    """optPrivateGen counts the nodes of levels 1..p-1 (eps/(2(p-1)) per level)."""
    max_leaves: Annotated[int, Range(min=1, max=2**31 - 1)] = 65_536
    """Public cap on a tree's leaves (a categorical split that would exceed it is not taken)."""
    attribute_choice: Literal["level", "node"] = "level"
    """One random attribute per level (docs/design.md) or per node (the paper's Algorithm 3)."""
    consistency: bool = True
    """The consistency step of optPrivateGen; false runs PFDS^- as the protocol."""
    neighbours: Literal["add_remove", "replace"] = "add_remove"
    """Neighbouring datasets: one row added/removed (the paper) or replaced (sensitivity 2)."""
    model: Literal["logistic", "svm", "linear"] = "logistic"
    """What every agent trains: logistic regression, linear SVM (classification) or linear regression."""
    regularization: Annotated[
        float,
        Range(
            min=1e-6,
            max=1e6,
            reason="objective perturbation squares c/(n lambda), which must stay finite, and the ridge stays well "
            "conditioned",
        ),
    ] = 0.01
    """Lambda of the DP-Pred objective perturbation and ridge of the functional mechanism."""
    partition_attribute: str | None = None
    """Numeric attribute of the agents' partition (default: the table's, e.g. age for Adult)."""
    folds: Annotated[int, Range(min=2, max=100)] = 10
    """Stratified folds of the table (the paper: 10)."""
    fold: Annotated[int, Range(min=0, max=99)] = 0
    """The fold held out as every agent's test set in this run."""
    baselines: tuple[Baseline, ...] = BASELINES
    """Computed by the runner in the same run (it sees the whole world; for evaluation only)."""
    baseline_agents: Annotated[int, Range(min=0, max=100_000)] = 0
    """Evaluate the baselines on the consumer and the first this-many sharers (0: every agent)."""
    sharers: Annotated[int, Range(min=1, max=100_000)] | None = None
    """How many owners share (the last this-many, owner-(K-n+1)..owner-K; default: all). The
    others receive the sharers' releases and train on them like the consumer, releasing nothing:
    the paper's Figure 4 varies this with the agents fixed. Sharers last keeps the agents the
    baselines evaluate (the consumer and the first ``baseline_agents`` owners) the same across a
    sweep of this key."""
    budget: PositiveFloat | None = None
    """Refuse to start if a sharer's planned spend exceeds this eps."""
    secure: bool = False
    """Draw noise from OS entropy with OpenDP's exact samplers (not reproducible from the seed)."""

    def __post_init__(self) -> None:
        if self.fold >= self.folds:
            raise ValueError(f"fold must be below folds = {self.folds}, got {self.fold}")
        if self.p > self.h_max:
            raise ValueError(f"p must be at most h_max = {self.h_max}, got {self.p}")
