"""Labelling synthetic records by the sharers' trees (the paper's Algorithm 4, lines 4-7).

Each shared tree predicts a label code for every synthetic record (the label of the leaf it falls
into); the record gets the code most trees voted for. For classification the code is a class. For
regression the codes are the 10 (``RegressionLabels.buckets``) equal-width buckets of the public
label range, and the record gets a value drawn uniformly inside the winning bucket.

Labelling reads only trees that are already private and records that are already private, so it
costs nothing (post-processing); the labelled data carries the spends of its synthetic records.

Ties (possible with an even number of trees) go to the smallest code by default, so hand-built
cases have one answer; ``rng`` breaks them uniformly at random instead.

>>> majority_vote(np.array([[0, 1, 2], [1, 1, 0], [1, 0, 2]]), n_classes=3).tolist()
[1, 1, 2]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._checks import generator, int_at_least
from .budget import Spend, total_epsilon
from .schema import RegressionLabels
from .synth import SyntheticData
from .tree import PrivateTree

__all__ = ["LabelledData", "majority_vote", "vote_codes", "label_synthetic", "bucket_of", "draw_in_bucket"]


def majority_vote(votes: Any, *, n_classes: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """The most frequent code in each column of ``votes`` (voters x records, codes 0..n_classes-1).
    Ties: the smallest code, or a uniform choice among the tied codes when ``rng`` is given."""
    n_classes = int_at_least(n_classes, 1, "n_classes", "majority_vote")
    votes = np.asarray(votes)
    if (
        votes.ndim != 2
        or votes.shape[0] == 0
        or (votes.size and (votes.dtype.kind not in "iu" or votes.min() < 0 or votes.max() >= n_classes))
    ):
        raise ValueError(
            f"The 'votes' parameter of majority_vote must be a (voters, records) array of integer codes "
            f"in [0, {n_classes}) with at least one voter. Got dtype {votes.dtype}, shape {votes.shape} instead."
        )
    voters, records = votes.shape
    tally = np.zeros((records, n_classes), dtype=np.int64)
    for row in votes:
        tally[np.arange(records), row] += 1
    if rng is None:
        return np.argmax(tally, axis=1)
    rng = generator(rng, "majority_vote")
    tied = tally == tally.max(axis=1, keepdims=True)
    return np.argmax(tied * rng.random(tally.shape), axis=1)


def _check_trees(trees: Any, where: str) -> list[PrivateTree]:
    trees = list(trees) if isinstance(trees, (list, tuple)) else None
    if not trees or not all(isinstance(tree, PrivateTree) for tree in trees):
        raise TypeError(f"The 'trees' parameter of {where} must be a non-empty list of PrivateTree.")
    schema = trees[0].schema
    for i, tree in enumerate(trees[1:], start=1):
        if tree.schema != schema:
            raise ValueError(
                f"The 'trees' parameter of {where} must hold trees grown on one public schema. "
                f"Tree {i} has another one."
            )
    return trees


def vote_codes(trees: Sequence[PrivateTree], X: Any, *, rng: np.random.Generator | None = None) -> np.ndarray:
    """The majority label code of the trees' predictions for each row of X."""
    trees = _check_trees(trees, "vote_codes")
    schema = trees[0].schema
    rows = schema.check_rows(X, "X", "vote_codes", allow_empty=True)
    votes = (
        np.vstack([tree._predict_rows(rows) for tree in trees])
        if rows.shape[0]
        else np.zeros((len(trees), 0), np.int64)
    )
    return majority_vote(votes, n_classes=schema.n_codes, rng=rng)


def bucket_of(y: Any, labels: RegressionLabels) -> np.ndarray:
    """The bucket (0..buckets-1) of each real label; hi falls in the last bucket."""
    if not isinstance(labels, RegressionLabels):
        raise TypeError(
            f"The 'labels' parameter of bucket_of must be RegressionLabels. Got {type(labels).__name__} instead."
        )
    return labels.encode(y)


def draw_in_bucket(codes: Any, labels: RegressionLabels, *, rng: np.random.Generator) -> np.ndarray:
    """A value drawn uniformly inside each code's bucket."""
    if not isinstance(labels, RegressionLabels):
        raise TypeError(
            f"The 'labels' parameter of draw_in_bucket must be RegressionLabels. Got {type(labels).__name__} instead."
        )
    return labels.decode(codes, rng=rng)


@dataclass(frozen=True, eq=False)
class LabelledData:
    """A sharer's labelled synthetic dataset, what it sends to the others: records, labels (class
    values or real values), label codes, and the spends behind them."""

    X: np.ndarray
    y: np.ndarray
    codes: np.ndarray
    spends: tuple[Spend, ...]

    @property
    def epsilon(self) -> float:
        return total_epsilon(self.spends)


def label_synthetic(
    trees: Sequence[PrivateTree], synthetic: SyntheticData, *, rng: np.random.Generator, random_ties: bool = False
) -> LabelledData:
    """Label ``synthetic`` by the majority vote of ``trees`` (all sharers' trees; PFDS(s) passes only
    its own). Regression labels are drawn uniformly in the winning bucket, with ``rng``."""
    if not isinstance(synthetic, SyntheticData):
        raise TypeError(
            f"The 'synthetic' parameter of label_synthetic must be SyntheticData. "
            f"Got {type(synthetic).__name__} instead."
        )
    rng = generator(rng, "label_synthetic")
    trees = _check_trees(trees, "label_synthetic")
    codes = vote_codes(trees, synthetic.X, rng=rng if random_ties else None)
    y = trees[0].schema.decode_labels(codes, rng=rng)
    return LabelledData(X=synthetic.X, y=y, codes=codes, spends=synthetic.spends)
