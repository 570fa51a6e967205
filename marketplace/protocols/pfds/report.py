"""The report of a `pfds` run (docs/design.md §4): every agent's error, the baselines, fidelity, history.

Each agent's model is scored on the test fold (``metrics.pfds``). The runner, which sees the whole world
for evaluation only, computes the baselines of the same run: NP-Agt (own rows only), DP-Pred (every
sharer's objective-perturbation / functional-mechanism model, voted or averaged), PFDS(s) (each sharer
labels its records with its own tree only), PFDS^- (no consistency step) and NP-Pred (non-private, all
training rows). The trees behind PFDS(s) and PFDS^- are the sharers' own (same seeds), so only the data
step differs. ``fidelity`` compares the synthetic dataset sizes with the true ones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from marketplace import seeds
from marketplace.data.dataset import Dataset, World
from marketplace.parties import party_ids
from marketplace.protocols.pfds.world import labels_of, schema_of, sharers_of, tree_seeds
from marketplace.roles import CONSUMER, CURATOR
from marketplace.scenario.config import ScenarioConfig

if TYPE_CHECKING:  # pragma: no cover
    from marketplace.protocols.pfds import PrivateTree, PublicSchema


def report(config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The protocol's sections of the run report: privacy, metrics (PFDS and each baseline asked for in
    ``pfds.baselines``), fidelity, the agents, the trees, the checks and the history."""
    return _report(config, world, results, baselines_asked=True)


def report_without_references(
    config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The report of a served session that did not ask for the central references
    (:meth:`marketplace.plugins.Exchange.report_without_references`): every agent's model scored on
    the test fold as :func:`report` scores it, and each baseline of ``pfds.baselines`` (models fitted
    again on the agents' rows, or on everyone's) stated absent
    (:data:`~marketplace.reporting.absent.NOT_ASKED`), with the fidelity of PFDS^- it would give."""
    from marketplace.reporting.absent import NOT_ASKED, REFERENCES_ABSENT

    if not world.central:  # nobody holds the agents' rows: report() says what that leaves out
        return report(config, world, results)
    sections = _report(config, world, results, baselines_asked=False)
    return {**sections, REFERENCES_ABSENT: {f"metrics.{name}": NOT_ASKED for name in config.pfds.baselines}}


def _report(
    config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]], *, baselines_asked: bool
) -> dict[str, Any]:
    """:func:`report`; without ``baselines_asked`` each baseline is an absent section (not computed)."""
    from marketplace.protocols.pfds.models import Fitted, model_error
    from marketplace.reporting.absent import NOT_ASKED, absent

    schema = schema_of(config)
    owners = party_ids(config)[1:-1]
    sharers, receivers = (list(group) for group in sharers_of(config))
    curator = results.get(CURATOR) or {}
    test_X, test_y = world.test.X, labels_of(schema, world.test)
    own = {s: world.owners[i] for i, s in enumerate(owners)} | {CONSUMER: world.validation}
    limit = config.pfds.baseline_agents or len(owners)
    evaluated = [CONSUMER, *owners[:limit]]

    pfds = {}
    for agent in [CONSUMER, *owners]:
        model = (results.get(agent) or {}).get("model")
        pfds[agent] = model_error(Fitted.from_plain(model), schema, test_X, test_y) if model else None
    metrics: dict[str, Any] = {"pfds": _summary(pfds, evaluated)}
    if not sum((curator.get("synthetic_rows") or {}).values()):
        metrics["pfds"] = _not_the_protocols(metrics["pfds"])
    baselines = Baselines(config, world, schema, sharers, own, evaluated)
    for name in config.pfds.baselines:
        metrics[name] = getattr(baselines, name)() if baselines_asked else absent(NOT_ASKED)
    sizes = {s: len(own[s]) for s in sharers}
    fidelity = {"pfds": _size_error(curator.get("synthetic_rows") or {}, sizes)}
    if baselines.minus_sizes:
        fidelity["pfds_minus"] = _size_error(baselines.minus_sizes, sizes)
    privacy = {
        s: (results.get(s) or {}).get("privacy") or {"eps": None, "note": "no report from this sharer (dropped out?)"}
        for s in sharers
    }
    privacy |= {r: {"guarantee": "none", "note": "this owner receives only (pfds.sharers)"} for r in receivers}
    privacy[CONSUMER] = {"guarantee": "none", "note": "the consumer shares nothing"}
    return {
        "privacy": privacy,
        "metrics": metrics,
        "fidelity": fidelity,
        "task": "classification" if config.pfds.model != "linear" else "regression",
        "error_measure": "misclassification rate"
        if config.pfds.model != "linear"
        else "MSE of the label scaled to [0, 1]",
        "agents": {
            "sharers": len(sharers),
            "receivers": len(receivers),
            "evaluated": evaluated,
            "rows": {a: len(d) for a, d in own.items()},
            "test_rows": len(world.test),
        },
        "trees": {
            "leaves": curator.get("tree_leaves"),
            "voters": curator.get("voters"),
            "data_sources": curator.get("data_sources"),
        },
        "flagged": curator.get("flagged", {}),
        "end_reason": curator.get("end_reason"),
        "parsimony": curator.get("parsimony"),
        "checks": {"consumer_error_matches_report": _consumer_check(results.get(CONSUMER) or {}, pfds.get(CONSUMER))},
        "history": history(curator.get("rounds") or [], [privacy[s] for s in sharers]),
    }


TREE_STEPS = "pfds.tree."
"""The prefix of the mechanisms a sharer spends on its tree (phase 1); the rest is its records'."""


def _eps_by_phase(ledger: dict[str, Any], phase: int) -> float | None:
    """What a sharer's ledger had spent by the end of ``phase``: its tree steps (phase 1), or its
    whole total (phase 2). Only for a ledger that composes by basic composition (then the phase's
    part is the sum of its steps); None otherwise, or when the sharer reported no ledger."""
    if not isinstance(ledger.get("eps"), (int, float)):
        return None
    if phase == 2:
        return float(ledger["eps"])
    if ledger.get("accountant") != "basic composition":
        return None
    return float(
        sum(
            step["eps"] * step.get("count", 1)
            for step in ledger.get("steps") or ()
            if str(step.get("mechanism", "")).startswith(TREE_STEPS)
        )
    )


def history(rounds: list[dict[str, Any]], ledgers: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's history: one record per phase the curator forwarded (1: the trees of the vote,
    2: the labelled synthetic records), with the largest eps any sharer had spent by its end."""
    from marketplace.reporting.history import history_section

    records = []
    for record in rounds:
        spent = [e for e in (_eps_by_phase(ledger, int(record["phase"])) for ledger in ledgers) if e is not None]
        records.append(dict(record, eps_max=max(spent) if spent else None))
    return history_section(
        records,
        x="phase",
        columns=["phase", "step", "sharers", "tree_leaves", "synthetic_rows", "eps_max"],
        plot=["sharers", "eps_max"],
        about={
            "phase": "1: the sharers' private trees are forwarded to every agent; 2: their labelled synthetic records "
            "are",
            "step": "what the phase forwarded (trees, records)",
            "sharers": "sharers whose release the curator forwarded in this phase",
            "tree_leaves": "leaves of the trees forwarded (phase 1)",
            "synthetic_rows": "synthetic records forwarded (phase 2)",
            "eps_max": "the largest eps any sharer had spent by the end of the phase (its tree steps; then its whole "
            "ledger), each sharer's guarantee for its own rows",
        },
    )


def nothing_released(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> str | None:
    """Why no sharer's synthetic records reached the agents, or None."""
    if not sum(((results.get(CURATOR) or {}).get("synthetic_rows") or {}).values()):
        return "no synthetic rows: no sharer's labelled records reached the agents (synthetic_rows: 0)"
    return None


def _not_the_protocols(summary: dict[str, Any]) -> dict[str, Any]:
    """The pfds errors of a run in which no synthetic record reached the agents: each agent trained
    on its own rows alone, so these are not the protocol's result. The headline figures are nulled;
    what the agents' models scored is kept aside, labelled."""
    return {
        "mean": None,
        "consumer": None,
        "mean_all_agents": None,
        "agents": {a: None for a in summary["agents"]},
        "note": "not the protocol's result: no synthetic record reached the agents, so each trained on its own "
        "rows alone (see without_shared_records)",
        "without_shared_records": summary,
    }


def _summary(errors: Mapping[str, float | None], evaluated: list[str]) -> dict[str, Any]:
    values = [e for a in evaluated if (e := errors.get(a)) is not None]
    every = [e for e in errors.values() if e is not None]
    return {
        "mean": float(np.mean(values)) if values else None,
        "consumer": errors.get(CONSUMER),
        "mean_all_agents": float(np.mean(every)) if every else None,
        "agents": errors,
    }


def _size_error(synthetic: dict[str, int], sizes: dict[str, int]) -> dict[str, Any]:
    gaps = [abs(synthetic[s] - sizes[s]) for s in synthetic]
    return {
        "mean_abs_size_error": float(np.mean(gaps)) if gaps else None,
        "mean_rel_size_error": float(np.mean([abs(synthetic[s] - sizes[s]) / sizes[s] for s in synthetic]))
        if gaps
        else None,
        "synthetic_rows": sum(synthetic.values()),
        "true_rows": sum(sizes[s] for s in synthetic),
    }


def _consumer_check(consumer: dict[str, Any], error: float | None) -> bool | None:
    if consumer.get("error") is None or error is None:
        return None
    return math.isclose(consumer["error"], error, rel_tol=1e-12, abs_tol=1e-12)


class Baselines:
    """The baselines of one run, computed centrally (the runner sees every agent's rows)."""

    def __init__(
        self,
        config: ScenarioConfig,
        world: World,
        schema: PublicSchema,
        sharers: list[str],
        own: dict[str, Dataset],
        evaluated: list[str],
    ) -> None:
        self.config, self.world, self.schema, self.sharers, self.own, self.evaluated = (
            config,
            world,
            schema,
            sharers,
            own,
            evaluated,
        )
        self.test_X, self.test_y = world.test.X, labels_of(schema, world.test)
        self.minus_sizes: dict[str, int] = {}
        self._trees: dict[str, PrivateTree] | None = None

    def _fit_error(self, X: np.ndarray, y: np.ndarray, party: str) -> float:
        from marketplace.protocols.pfds.models import fit_model, model_error

        fitted = fit_model(
            self.config.pfds.model, self.schema, X, y, seed=seeds.derive_int(self.config.seed, f"pfds.model.{party}")
        )
        return model_error(fitted, self.schema, self.test_X, self.test_y)

    def np_agt(self) -> dict[str, Any]:
        errors = {a: self._fit_error(self.own[a].X, labels_of(self.schema, self.own[a]), a) for a in self.evaluated}
        return _summary(errors, self.evaluated)

    def np_pred(self) -> dict[str, Any]:
        X = np.vstack([d.X for d in self.own.values()])
        y = np.concatenate([labels_of(self.schema, d) for d in self.own.values()])
        error = self._fit_error(X, y, "np_pred")
        return _summary({a: error for a in self.evaluated}, self.evaluated)

    def dp_pred(self) -> dict[str, Any]:
        from marketplace.protocols.pfds import (
            average_regressors,
            functional_mechanism,
            objective_perturbation,
            vote_classifiers,
        )
        from marketplace.protocols.pfds.models import scaled_labels

        c = self.config.pfds
        features = self.schema.to_features
        width = features(self.own[CONSUMER].X[:1]).shape[1]
        models = []
        for s in self.sharers:
            data = self.own[s]
            rng = seeds.rng(self.config.seed, f"pfds.dp_pred.{s}")
            Z, target = features(data.X), scaled_labels(self.schema, labels_of(self.schema, data))
            if c.model == "linear":
                models.append(
                    functional_mechanism(
                        Z,
                        target,
                        epsilon=c.epsilon,
                        x_bounds=[(0.0, 1.0)] * width,
                        y_bounds=(0.0, 1.0),
                        rng=rng,
                        regularization=c.regularization,
                    )
                )
            else:
                models.append(
                    objective_perturbation(
                        Z,
                        np.where(target == 1, 1.0, -1.0),
                        loss="logistic" if c.model == "logistic" else "huber",
                        epsilon=c.epsilon,
                        regularization=c.regularization,
                        rng=rng,
                        norm_bound=math.sqrt(self.schema.d),
                    )
                )
        Z_test, target = features(self.test_X), scaled_labels(self.schema, self.test_y)
        if c.model == "linear":
            error = float(np.mean((np.clip(average_regressors(models, Z_test), 0.0, 1.0) - target) ** 2))
        else:
            error = float(np.mean((vote_classifiers(models, Z_test) == 1).astype(np.int64) != target))
        out = _summary({a: error for a in self.evaluated}, self.evaluated)
        out["note"] = "one ensemble of every sharer's private model, the same for every agent"
        return out

    def trees(self) -> dict[str, Any]:
        """Every sharer's tree, regrown from the sharer's own stream: the trees of the protocol."""
        from marketplace.protocols.pfds import share_predictor
        from marketplace.protocols.pfds.plan import level_epsilon, sharer_plan

        if self._trees is None:
            c = self.config.pfds
            self._trees = {}
            for s in self.sharers:
                rng = np.random.default_rng(tree_seeds(self.config, s)["tree_seed"])
                data = self.own[s]
                self._trees[s] = share_predictor(
                    data.X,
                    labels_of(self.schema, data),
                    self.schema,
                    level_epsilon=level_epsilon(sharer_plan(self.config, s)),
                    rng=rng,
                    h_max=c.h_max,
                    t=c.t,
                    max_leaves=c.max_leaves,
                    attribute_choice=c.attribute_choice,
                    neighbours=c.neighbours,
                )
        return self._trees

    def _with_shared(self, released: dict[str, Any]) -> dict[str, Any]:
        errors = {}
        for a in self.evaluated:
            parts = [(self.own[a].X, labels_of(self.schema, self.own[a]))] + [
                (r.X, r.y) for s, r in released.items() if s != a
            ]
            X = np.vstack([p[0] for p in parts])
            y = np.concatenate([np.asarray(p[1], dtype=np.float64) for p in parts])
            errors[a] = self._fit_error(X, y.astype(np.int64) if self.config.pfds.model != "linear" else y, a)
        return _summary(errors, self.evaluated)

    def _released(self, label: str, *, own_tree_only: bool, consistency: bool) -> dict[str, Any]:
        from marketplace.protocols.pfds import share_data
        from marketplace.protocols.pfds.plan import level_epsilon, sharer_plan

        c = self.config.pfds
        trees = self.trees()
        out = {}
        for s in self.sharers:
            voters = [trees[s]] if own_tree_only else list(trees.values())
            out[s] = share_data(
                trees[s],
                self.own[s].X,
                voters,
                level_epsilon=level_epsilon(sharer_plan(self.config, s)),
                p=c.p,
                consistency=consistency,
                rng=seeds.rng(self.config.seed, f"pfds.{label}.{s}"),
            )
        return out

    def pfds_s(self) -> dict[str, Any]:
        return self._with_shared(self._released("pfds_s", own_tree_only=True, consistency=self.config.pfds.consistency))

    def pfds_minus(self) -> dict[str, Any]:
        released = self._released("pfds_minus", own_tree_only=False, consistency=False)
        self.minus_sizes = {s: int(r.X.shape[0]) for s, r in released.items()}
        return self._with_shared(released)
