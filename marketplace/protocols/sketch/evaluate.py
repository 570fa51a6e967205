"""How a finished `sketch` run compares with the truth, for its report: the exact statistics of the
released owners' data (:func:`truth`) and the estimates' errors against them, the sketch ranking
against the true MMD^2 of each owner's data to the consumer's (:func:`ranking_check`), and
centralized logistic-regression references (:func:`logistic_baselines`).

The runner computes these, and it may see all data; no party of the protocol does.
"""

from __future__ import annotations

import copy
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from marketplace import seeds
from marketplace.data.world import World
from marketplace.parties import owner_position
from marketplace.protocols.sketch.public import public_map, query_plan, record_dim, unit_records
from marketplace.scenario.config import ScenarioConfig

_TRUTHS: dict[tuple[int, str, tuple[str, ...]], dict[str, Any]] = {}
"""The exact statistics of a world's owners (:func:`truth`), while that world lives: a served
marketplace evaluates session after session of one request on the same world and the same owners."""
TRUTHS_KEPT = 256


def truth(config: ScenarioConfig, world: World, owners: list[str]) -> dict[str, Any]:
    """The exact statistics of the union of ``owners``' data (unit coordinates), as the consumer's
    plan asks for them (computed once per world, seed, sketch settings and owners; a copy each time)."""
    from marketplace.protocols.sketch.consumer import plan_statistics

    key = (id(world), repr((config.seed, config.sketch, record_dim(config))), tuple(owners))
    kept = _TRUTHS.get(key)
    if kept is None:
        parts = [unit_records(config, world.owners[owner_position(config, o)]) for o in owners]
        U = np.vstack(parts) if parts else np.zeros((0, record_dim(config)))
        kept = plan_statistics(U, query_plan(config))
        while len(_TRUTHS) >= TRUTHS_KEPT:
            _TRUTHS.pop(next(iter(_TRUTHS)))
        _TRUTHS[key] = kept
        weakref.finalize(world, _TRUTHS.pop, key, None)
    return copy.deepcopy(kept)


def statistic_errors(estimates: dict[str, Any], true: dict[str, Any]) -> dict[str, Any]:
    """The errors of the consumer's estimates against the truth (:func:`truth`)."""
    from marketplace.protocols.sketch.consumer import statistic_errors as errors

    return errors(estimates, true)


def ranking_check(config: ScenarioConfig, world: World, ranking: dict[str, Any] | None) -> dict[str, Any] | None:
    """The sketch ranking against the true MMD^2 (the map's kernel, exact features) of each owner's
    data to the consumer's D_v."""
    if not ranking:
        return None
    from marketplace.protocols.sketch import mean_embedding, spearman_agreement

    fmap = public_map(config)
    target, owner_embedding = _true_embeddings(config, world, fmap, mean_embedding)
    true = [float(np.sum((owner_embedding(o) - target) ** 2)) / fmap.squared_norm for o in ranking["owners"]]
    order = [ranking["owners"][i] for i in np.argsort(true, kind="stable")]
    spearman = spearman_agreement(ranking["mmd2"], true) if len(true) >= 2 else None
    return {
        "true_mmd2": true,
        "true_order": order,
        "spearman": None if spearman is None or math.isnan(spearman) else spearman,
        "same_best": bool(order[0] == ranking["order"][0]),
        "note": "true MMD^2: the map's kernel, from exact (noise-free) features of each owner's data",
    }


_EMBEDDINGS: dict[tuple[int, str], tuple[np.ndarray, dict[str, np.ndarray]]] = {}
"""Exact mean embeddings of a world's D_v and owners under a public map, while that world lives: a
served marketplace evaluates session after session on the same world, and embedding every owner's
rows again each time was a third of its CPU per request."""


def _true_embeddings(
    config: ScenarioConfig, world: World, fmap: Any, mean_embedding: Any
) -> tuple[np.ndarray, Callable[[str], np.ndarray]]:
    """D_v's mean embedding under ``fmap``, and a function giving an owner's, both kept per (world, map, bounds)."""
    key = (
        id(world),
        repr((config.seed, config.sketch.map, config.sketch.lower, config.sketch.upper, record_dim(config))),
    )
    kept = _EMBEDDINGS.get(key)
    if kept is None:
        kept = _EMBEDDINGS[key] = (mean_embedding(fmap, unit_records(config, world.validation)), {})
        weakref.finalize(world, _EMBEDDINGS.pop, key, None)
    target, owners = kept

    def owner_embedding(owner: str) -> np.ndarray:
        if owner not in owners:
            owners[owner] = mean_embedding(fmap, unit_records(config, world.owners[owner_position(config, owner)]))
        return owners[owner]

    return target, owner_embedding


def logistic_baselines(config: ScenarioConfig, world: World, owners: list[str]) -> dict[str, Any] | None:
    """Centralized references on the union of the owners' data, scored on the consumer's test set:
    non-private logistic regression (scikit-learn, nearly unregularised), the same regularised ERM
    that DP-ERM perturbs, and DP-ERM (objective perturbation) at the owners' eps."""
    s = config.sketch
    if not s.queries.logistic_regression or not len(world.test) or not owners:
        return None
    from sklearn.metrics import roc_auc_score

    from marketplace.privacy.erm import erm_classifier, objective_perturbation

    U = np.vstack([unit_records(config, world.owners[owner_position(config, o)]) for o in owners])
    X, y = U[:, :-1], np.where(U[:, -1] > 0.5, 1.0, -1.0)
    T = unit_records(config, world.test)
    Xt, yt = T[:, :-1], T[:, -1]
    if len(np.unique(yt)) < 2 or len(np.unique(y)) < 2:
        return None
    bound = math.sqrt(X.shape[1])  # unit box: every row has norm <= sqrt(d)
    lam = s.queries.logistic_l2
    from sklearn.linear_model import LogisticRegression

    plain = LogisticRegression(C=1e4, max_iter=2000).fit(X, y)
    out: dict[str, float | str] = {
        "non_private_auc": float(roc_auc_score(yt, plain.decision_function(Xt))),
        "non_private_erm_auc": float(
            roc_auc_score(
                yt, erm_classifier(X, y, loss="logistic", regularization=lam, norm_bound=bound).decision_function(Xt)
            )
        ),
    }
    if s.epsilon is not None:
        model = objective_perturbation(
            X,
            y,
            loss="logistic",
            epsilon=s.epsilon,
            regularization=lam,
            rng=seeds.rng(config.seed, "sketch.dp_erm"),
            norm_bound=bound,
        )
        out["dp_erm_auc"] = float(roc_auc_score(yt, model.decision_function(Xt)))
        out["dp_erm_note"] = (
            "objective perturbation (Chaudhuri et al. 2011) on the union of the owners' data, centralized"
        )
    return out
