"""Which way a market's quality figure points, so that its tables and figures label it truly.

A request's quality is a column of its protocol's sweep row (``market.quality``, by default the
protocol's headline): an error or a distance for most (``moment1_mre``, ``cost``, ``pfds_error``,
``mmd2``: lower is better), a score for some (``accuracy``, the fraction of the consumer's test
points a linear SVM trained on the summary gets right; ``logistic_auc``; a rank correlation: higher
is better), and a plain count or setting for others (``k``, ``rounds``), which has no better side.
The direction is read from the column's name, so a column a new protocol adds is labelled by the
same words (and without a direction when its name says none).
"""

from __future__ import annotations

from typing import Literal

HIGHER_IS_BETTER = ("accuracy", "auc", "spearman")
"""Name endings of scores: the fraction right, an area under the ROC curve, a rank correlation."""
LOWER_IS_BETTER = ("error", "mae", "mre", "cost", "mmd2", "rel_fro", "_pct")
"""Name parts of errors and distances: an error, a mean absolute or relative error, a clustering cost,
an MMD^2, a relative Frobenius distance, a percentage above the greedy rule's MMD^2."""

Better = Literal["higher", "lower"]


def better(metric: str | None) -> Better | None:
    """``"higher"`` when a higher ``metric`` is better, ``"lower"`` when a lower one is, None when
    its name says neither (or there is no metric)."""
    if not metric:
        return None
    name = metric.lower()
    if name.endswith(HIGHER_IS_BETTER):
        return "higher"
    if any(part in name for part in LOWER_IS_BETTER):
        return "lower"
    return None


def direction(metric: str | None) -> str:
    """``"higher is better"``, ``"lower is better"`` or ``""``: the words a label adds for ``metric``."""
    side = better(metric)
    return f"{side} is better" if side else ""


def quality_label(metric: str | None) -> str:
    """A quality's label with its direction: ``"accuracy (higher is better)"``,
    ``"moment1_mre (lower is better)"``; the bare name when it has none (``"quality"`` without a metric)."""
    words = direction(metric)
    name = metric or "quality"
    return f"{name} ({words})" if words else name
