"""One sharer's two phases (the paper's Algorithms 2 and 4) and the split of rows among agents.

:func:`share_predictor` grows the tree a sharer sends to the others, with half its budget;
:func:`share_data` builds its synthetic records with the other half and labels them with every
shared tree. Between the two calls the runtime exchanges the trees (``PrivateTree.to_plain`` /
``from_plain``). :func:`partition_agents` splits a dataset among agents by the attribute-distance
rule of docs/design.md §4, reusing :mod:`marketplace.data.partition`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from marketplace.data.partition import assign_by_distance

from ._checks import generator, int_at_least, positive_real
from .budget import LevelEpsilon, Released, split_budget, unchanged
from .grow import DEFAULT_MAX_LEAVES, grow_tree
from .label import LabelledData, label_synthetic
from .schema import PublicSchema
from .synth import opt_private_gen
from .tree import PrivateTree

__all__ = ["share_predictor", "share_data", "partition_agents"]


def share_predictor(
    X: Any,
    y: Any,
    schema: PublicSchema,
    *,
    epsilon: float | None = None,
    rng: np.random.Generator,
    h_max: int = 8,
    t: int = 10,
    max_leaves: int = DEFAULT_MAX_LEAVES,
    attribute_choice: str = "level",
    neighbours: str = "add_remove",
    secure: bool = False,
    level_epsilon: LevelEpsilon | None = None,
    released: Released = unchanged,
) -> PrivateTree:
    """The tree a sharer with total budget ``epsilon`` shares: grown with epsilon/2, epsilon/(2 h_max)
    per level (:func:`~marketplace.protocols.pfds.budget.split_budget`). A sharer of a run passes its
    release plan's per-level eps instead (``level_epsilon``, :func:`marketplace.protocols.pfds.plan.level_epsilon`)
    and its plan's ``released``, through which each level's output leaves it (:func:`~.grow.grow_tree`)."""
    if epsilon is not None and level_epsilon is None:
        level_epsilon, epsilon = split_budget(epsilon, h_max=h_max, p=2).level, None
    return grow_tree(
        X,
        y,
        schema,
        epsilon=epsilon,
        level_epsilon=level_epsilon,
        rng=rng,
        h_max=h_max,
        t=t,
        max_leaves=max_leaves,
        attribute_choice=attribute_choice,
        neighbours=neighbours,
        secure=secure,
        released=released,
    )


def share_data(
    tree: PrivateTree,
    X: Any,
    trees: Sequence[PrivateTree],
    *,
    epsilon: float | None = None,
    rng: np.random.Generator,
    p: int = 4,
    consistency: bool = True,
    solver: str = "newton",
    random_ties: bool = False,
    secure: bool = False,
    level_epsilon: LevelEpsilon | None = None,
    released: Released = unchanged,
) -> LabelledData:
    """A sharer's labelled synthetic data: optPrivateGen on its own ``tree`` and rows ``X`` with the
    other half of its total ``epsilon`` (epsilon/(2(p-1)) per counted level,
    :func:`~marketplace.protocols.pfds.budget.split_budget`), or its release plan's per-level eps
    (``level_epsilon``), labelled by the majority of ``trees`` (every sharer's, its own included).
    ``epsilon`` of the result is what the sharer spent in all. Each counted level's noisy counts leave
    through ``released`` (:func:`~.synth.noisy_node_counts`)."""
    if epsilon is not None and level_epsilon is None:
        total = positive_real(epsilon, "epsilon", "share_data")
        # p is checked before a level is read; the tree is as deep as its counted levels need.
        level_epsilon, epsilon = (
            (lambda purpose, level: split_budget(total, h_max=tree.h_max, p=p).level(purpose, level)),
            None,
        )
    synthetic = opt_private_gen(
        tree,
        X,
        epsilon=epsilon,
        level_epsilon=level_epsilon,
        rng=rng,
        p=p,
        consistency=consistency,
        solver=solver,
        secure=secure,
        released=released,
    )
    return label_synthetic(trees, synthetic, rng=rng, random_ties=random_ties)


def partition_agents(
    X: Any, schema: PublicSchema, *, attribute: str, agents: int, rng: np.random.Generator
) -> list[np.ndarray]:
    """Row indices of each agent: agent i draws an anchor a_i uniformly in the public range of the
    numeric ``attribute`` and gets each row with probability ∝ 1/|x_a - a_i| (docs/design.md §4)."""
    where = "partition_agents"
    rows = schema.check_rows(X, "X", where)
    column = schema.index(attribute)
    spec = schema.attributes[column]
    if spec.kind != "numeric":
        raise ValueError(
            f"The 'attribute' parameter of {where} must name a numeric attribute. Got {attribute!r}, "
            "which is categorical, instead."
        )
    agents = int_at_least(agents, 1, "agents", where)
    rng = generator(rng, where)
    anchors = rng.uniform(spec.lo, spec.hi, size=agents)
    return assign_by_distance(rows[:, column], anchors, rng)
