"""The `pfds` exchange (docs/design.md §4): the world of a run, roles from the scenario, and the report.

**World.** The table of ``data.source.table`` is cut into ``pfds.folds`` stratified folds (by the
run seed); fold ``pfds.fold`` is the test set every agent is scored on, and the rest is split among
the K owners and the consumer (K + 1 agents) by the attribute-distance rule on
``pfds.partition_attribute``. The last ``pfds.sharers`` owners share (default: all); the others
only receive, like the consumer. The consumer's share is ``world.validation``, the test fold
``world.test``. ``data.partition`` and ``data.consumer`` do not apply to this protocol.

**Report.** Each agent's model is scored on the test fold (``metrics.pfds``). The runner, which
sees the whole world for evaluation only, computes the baselines of the same run: NP-Agt (own
rows only), DP-Pred (every sharer's objective-perturbation / functional-mechanism model, voted or
averaged), PFDS(s) (each sharer labels its records with its own tree only), PFDS^- (no
consistency step) and NP-Pred (non-private, all training rows). The trees behind PFDS(s) and
PFDS^- are the sharers' own (same seeds), so only the data step differs. ``fidelity`` compares
the synthetic dataset sizes with the true ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.table import Table

from marketplace import seeds
from marketplace.privacy import noise as noise_streams
from marketplace.privacy.noise import NoiseOrigin
from marketplace.data.dataset import Dataset, World
from marketplace.parties import party_ids
from marketplace.plugins import Exchange
from marketplace.reporting.format import accountant_text, fmt, mean_sd, plural, relation_text, sweep_table_head
from marketplace.reporting.plots import eps_spent
from marketplace.roles import CONSUMER, CURATOR, Role
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError

METHODS = ("pfds", "np_agt", "dp_pred", "pfds_s", "pfds_minus", "np_pred")
LABELS = {"pfds": "PFDS", "np_agt": "NP-Agt", "dp_pred": "DP-Pred", "pfds_s": "PFDS(s)", "pfds_minus": "PFDS^-",
          "np_pred": "NP-Pred"}


# --- the world -----------------------------------------------------------------------------


def schema_of(config: ScenarioConfig):
    """The public schema of the run: the built-in one of the table source. A marketplace described
    by its public schema (``data.schema``) is refused (SchemaError naming ``data.schema``)."""
    from marketplace.protocols.pfds.tables import public_schema

    if config.data.schema_only:  # refused when the scenario is read (check_plan), before anything starts
        raise SchemaError("data.schema", "a table source instead (data.source.kind: table) for protocol pfds: it cuts one "
                          "table into the agents' shares and the test fold, and learns from the table's own typed "
                          "schema, neither of which a marketplace described by its public schema has",
                          "a public schema (each party holding its own rows)")
    source = config.data.source
    if source.kind != "table" or source.table is None:
        raise SchemaError("data.source.kind", "'table' (with a data.source.table section) for protocol pfds", repr(source.kind))
    return public_schema(source.table)


def partition_attribute(config: ScenarioConfig) -> str:
    from marketplace.protocols.pfds.tables import PARTITION_ATTRIBUTE

    return config.pfds.partition_attribute or PARTITION_ATTRIBUTE[config.data.source.table.dataset]


def stratified_folds(codes: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    """The fold (0..folds-1) of each row: every label code's rows, shuffled, dealt out in turn."""
    fold = np.empty(codes.shape[0], dtype=np.int64)
    start = 0
    for code in np.unique(codes):
        rows = rng.permutation(np.flatnonzero(codes == code))
        fold[rows] = (np.arange(rows.size) + start) % folds
        start += rows.size
    return fold


def make_world(config: ScenarioConfig) -> World:
    """Test fold, consumer share and sharers' shares of the table (see the module docstring)."""
    from marketplace.data.sources import load_source
    from marketplace.protocols.pfds import partition_agents

    schema = schema_of(config)
    source_rng = np.random.default_rng(np.random.SeedSequence(config.seed).spawn(4)[0])  # as build_world draws it
    data = load_source(config.data.source, source_rng)
    codes = schema.encode_labels(data.y)
    fold = stratified_folds(codes, config.pfds.folds, seeds.rng(config.seed, "pfds.folds"))
    test_rows = np.flatnonzero(fold == config.pfds.fold)
    train_rows = np.flatnonzero(fold != config.pfds.fold)
    k = config.parties.owners
    shares = partition_agents(data.X[train_rows], schema, attribute=partition_attribute(config), agents=k + 1,
                              rng=seeds.rng(config.seed, "pfds.partition"))
    empty = [CONSUMER if i == k else f"owner-{i + 1}" for i, share in enumerate(shares) if share.size == 0]
    if empty:
        raise ValueError(f"{', '.join(empty)} receive no training rows of the {train_rows.size} with "
                         f"parties.owners = {k}: use fewer owners or more rows (data.source.table.rows)")
    part = lambda rows, name: data.take(train_rows[rows], name=f"{data.name}/{name}")  # noqa: E731
    return World(owners=tuple(part(shares[i], f"owner-{i + 1}") for i in range(k)), validation=part(shares[k], "consumer"),
                 test=data.take(test_rows, name=f"{data.name}/test-fold-{config.pfds.fold}"), seed_set=data.take([]))


def labels_of(schema, dataset: Dataset) -> np.ndarray:
    """A dataset's labels as the schema reads them (class values, or real regression labels)."""
    from marketplace.protocols.pfds import ClassLabels

    return dataset.y if isinstance(schema.label, ClassLabels) else dataset.y.astype(np.float64)


# --- roles ---------------------------------------------------------------------------------


def sharers_of(config: ScenarioConfig) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(sharers, receivers): the last ``pfds.sharers`` owners share (default: every owner)."""
    owners = tuple(party_ids(config)[1:-1])
    n = len(owners) if config.pfds.sharers is None else min(config.pfds.sharers, len(owners))
    return owners[len(owners) - n:], owners[:len(owners) - n]


def owner_cost(config: ScenarioConfig, party: str):
    """What a run may release about an owner's rows, for its lifetime ledger: a sharer's tree, counts
    and synthetic records, at most ``pfds.epsilon`` (pure, basic composition) under the run's relation;
    an owner that only receives releases nothing (None)."""
    from marketplace.privacy.lifetime import Cost, Declared

    sharers, _ = sharers_of(config)
    if party not in sharers:
        return None
    relation = "replace-one" if config.pfds.neighbours == "replace" else "add/remove-one"
    return Declared(f"pfds: {party}'s tree and synthetic records ({config.name})", Cost.pure(config.pfds.epsilon), relation)


def consumer_cost(config: ScenarioConfig):
    """The consumer of ``pfds`` shares nothing of its own rows."""
    return None


def build_role(config: ScenarioConfig, party: str, world: World, owner_data: Dataset | None,
               noise: NoiseOrigin | None = None) -> Role:
    from marketplace.protocols.pfds.consumer import PfdsConsumer
    from marketplace.protocols.pfds.curator import PfdsCurator
    from marketplace.protocols.pfds.owner import PfdsReceiver, PfdsSharer

    ids = party_ids(config)
    sharers, receivers = sharers_of(config)
    schema = schema_of(config)
    c = config.pfds
    if party == CURATOR:
        return PfdsCurator(scenario_name=config.name, sharers=sharers, receivers=receivers, schema=schema)
    common = dict(scenario_name=config.name, schema=schema, sharers=sharers, model=c.model,
                  model_seed=seeds.derive_int(config.seed, f"pfds.model.{party}"))
    if party == CONSUMER:
        return PfdsConsumer(X=world.validation.X, y=labels_of(schema, world.validation), test_X=world.test.X,
                            test_y=labels_of(schema, world.test), **common)
    data = owner_data if owner_data is not None else world.owners[ids.index(party) - 1]
    if data.X.shape[1] != schema.d:
        raise ValueError(f"{party}: data has {data.X.shape[1]} columns, the public schema has {schema.d} attributes")
    if party in receivers:
        return PfdsReceiver(party_id=party, X=data.X, y=labels_of(schema, data), **common)
    return PfdsSharer(party_id=party, X=data.X, y=labels_of(schema, data), epsilon=c.epsilon, h_max=c.h_max, t=c.t, p=c.p,
                      max_leaves=c.max_leaves, attribute_choice=c.attribute_choice, consistency=c.consistency,
                      neighbours=c.neighbours, secure=c.secure, budget=c.budget, **tree_seeds(config, party, noise), **common)


def tree_seeds(config: ScenarioConfig, party: str, noise: NoiseOrigin | None = None) -> dict[str, np.random.SeedSequence]:
    """The sharer's streams: one for its tree, one for its synthetic data, both from its noise origin
    (:mod:`marketplace.privacy.noise`). The runner's baselines regrow trees from the seed-derived
    stream, which is the sharer's own only when its noise comes from the seed."""
    return {"tree_seed": noise_streams.derive(config.seed, f"pfds.tree.{party}", noise),
            "data_seed": noise_streams.derive(config.seed, f"pfds.data.{party}", noise)}


def check_plan(config: ScenarioConfig) -> None:
    """Refuse, before anything starts, a run that cannot work or whose planned spend per sharer
    exceeds ``pfds.budget``."""
    from marketplace.protocols.pfds.owner import pfds_relation
    from marketplace.privacy.accountant import BudgetExceeded, PrivacyLedger, Step
    from marketplace.protocols.pfds import ClassLabels

    schema = schema_of(config)
    c = config.pfds
    classification = isinstance(schema.label, ClassLabels)
    if classification == (c.model == "linear"):
        task = "classification" if classification else "regression"
        wanted = "'logistic' or 'svm'" if classification else "'linear'"
        raise SchemaError("pfds.model", f"{wanted} for the {task} table {config.data.source.table.dataset!r}", repr(c.model))
    if c.sharers is not None and c.sharers > config.parties.owners:
        raise SchemaError("pfds.sharers", f"at most parties.owners = {config.parties.owners} (the sharers are owners)",
                          str(c.sharers))
    attribute = partition_attribute(config)
    numeric = [a.name for a in schema.attributes if a.kind == "numeric"]
    if attribute not in numeric:
        raise SchemaError("pfds.partition_attribute", f"a numeric attribute of the table ({', '.join(numeric)})", repr(attribute))
    if c.budget is not None:
        plan = [Step(mechanism="pfds.tree", eps=c.epsilon / 2)] + ([Step(mechanism="pfds.synth.counts", eps=c.epsilon / 2)] if c.consistency else [])
        try:
            PrivacyLedger("each sharer", neighbouring=pfds_relation(c.neighbours, "a row of a sharer's data"),
                          budget=(c.budget, 0.0), theorem="basic").check_plan(plan)
        except BudgetExceeded as err:
            raise SchemaError("pfds.budget", "a budget that covers each sharer's planned spend "
                              f"(pfds.epsilon = {c.epsilon:g})", str(err)) from None


def progress(config: ScenarioConfig, curator: Role) -> tuple[int, int]:
    return {"trees": 0, "data": 1, "closing": 2}.get(getattr(curator, "phase", "trees"), 0), 2


# --- the report ----------------------------------------------------------------------------


def report(config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from marketplace.protocols.pfds.models import Fitted, model_error

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
        metrics[name] = getattr(baselines, name)()
    sizes = {s: len(own[s]) for s in sharers}
    fidelity = {"pfds": _size_error(curator.get("synthetic_rows") or {}, sizes)}
    if baselines.minus_sizes:
        fidelity["pfds_minus"] = _size_error(baselines.minus_sizes, sizes)
    privacy = {s: (results.get(s) or {}).get("privacy") or {"eps": None, "note": "no report from this sharer (dropped out?)"}
               for s in sharers}
    privacy |= {r: {"guarantee": "none", "note": "this owner receives only (pfds.sharers)"} for r in receivers}
    privacy[CONSUMER] = {"guarantee": "none", "note": "the consumer shares nothing"}
    return {
        "privacy": privacy,
        "metrics": metrics,
        "fidelity": fidelity,
        "task": "classification" if config.pfds.model != "linear" else "regression",
        "error_measure": "misclassification rate" if config.pfds.model != "linear" else "MSE of the label scaled to [0, 1]",
        "agents": {"sharers": len(sharers), "receivers": len(receivers), "evaluated": evaluated, "rows": {a: len(d) for a, d in own.items()},
                   "test_rows": len(world.test)},
        "trees": {"leaves": curator.get("tree_leaves"), "voters": curator.get("voters"), "data_sources": curator.get("data_sources")},
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
    return float(sum(step["eps"] * step.get("count", 1) for step in ledger.get("steps") or ()
                     if str(step.get("mechanism", "")).startswith(TREE_STEPS)))


def history(rounds: list[dict[str, Any]], ledgers: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's history: one record per phase the curator forwarded (1: the trees of the vote,
    2: the labelled synthetic records), with the largest eps any sharer had spent by its end."""
    from marketplace.reporting.history import history_section

    records = []
    for record in rounds:
        spent = [e for e in (_eps_by_phase(ledger, int(record["phase"])) for ledger in ledgers) if e is not None]
        records.append(dict(record, eps_max=max(spent) if spent else None))
    return history_section(records, x="phase", columns=["phase", "step", "sharers", "tree_leaves", "synthetic_rows", "eps_max"],
                           plot=["sharers", "eps_max"], about={
        "phase": "1: the sharers' private trees are forwarded to every agent; 2: their labelled synthetic records are",
        "step": "what the phase forwarded (trees, records)",
        "sharers": "sharers whose release the curator forwarded in this phase",
        "tree_leaves": "leaves of the trees forwarded (phase 1)",
        "synthetic_rows": "synthetic records forwarded (phase 2)",
        "eps_max": "the largest eps any sharer had spent by the end of the phase (its tree steps; then its whole "
                   "ledger), each sharer's guarantee for its own rows"})


def nothing_released(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> str | None:
    """Why no sharer's synthetic records reached the agents, or None."""
    if not sum(((results.get(CURATOR) or {}).get("synthetic_rows") or {}).values()):
        return "no synthetic rows: no sharer's labelled records reached the agents (synthetic_rows: 0)"
    return None


def _not_the_protocols(summary: dict[str, Any]) -> dict[str, Any]:
    """The pfds errors of a run in which no synthetic record reached the agents: each agent trained
    on its own rows alone, so these are not the protocol's result. The headline figures are nulled;
    what the agents' models scored is kept aside, labelled."""
    return {"mean": None, "consumer": None, "mean_all_agents": None, "agents": {a: None for a in summary["agents"]},
            "note": "not the protocol's result: no synthetic record reached the agents, so each trained on its own "
                    "rows alone (see without_shared_records)",
            "without_shared_records": summary}


def _summary(errors: dict[str, float | None], evaluated: list[str]) -> dict[str, Any]:
    values = [errors[a] for a in evaluated if errors.get(a) is not None]
    every = [e for e in errors.values() if e is not None]
    return {"mean": float(np.mean(values)) if values else None, "consumer": errors.get(CONSUMER),
            "mean_all_agents": float(np.mean(every)) if every else None, "agents": errors}


def _size_error(synthetic: dict[str, int], sizes: dict[str, int]) -> dict[str, Any]:
    gaps = [abs(synthetic[s] - sizes[s]) for s in synthetic]
    return {"mean_abs_size_error": float(np.mean(gaps)) if gaps else None,
            "mean_rel_size_error": float(np.mean([abs(synthetic[s] - sizes[s]) / sizes[s] for s in synthetic])) if gaps else None,
            "synthetic_rows": sum(synthetic.values()), "true_rows": sum(sizes[s] for s in synthetic)}


def _consumer_check(consumer: dict[str, Any], error: float | None) -> bool | None:
    if consumer.get("error") is None or error is None:
        return None
    return math.isclose(consumer["error"], error, rel_tol=1e-12, abs_tol=1e-12)


class Baselines:
    """The baselines of one run, computed centrally (the runner sees every agent's rows)."""

    def __init__(self, config: ScenarioConfig, world: World, schema, sharers: list[str], own: dict[str, Dataset],
                 evaluated: list[str]) -> None:
        self.config, self.world, self.schema, self.sharers, self.own, self.evaluated = config, world, schema, sharers, own, evaluated
        self.test_X, self.test_y = world.test.X, labels_of(schema, world.test)
        self.minus_sizes: dict[str, int] = {}
        self._trees = None

    def _fit_error(self, X: np.ndarray, y: np.ndarray, party: str) -> float:
        from marketplace.protocols.pfds.models import fit_model, model_error

        fitted = fit_model(self.config.pfds.model, self.schema, X, y, seed=seeds.derive_int(self.config.seed, f"pfds.model.{party}"))
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
        from marketplace.protocols.pfds import (average_regressors, functional_mechanism, objective_perturbation,
                                                vote_classifiers)
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
                models.append(functional_mechanism(Z, target, epsilon=c.epsilon, x_bounds=[(0.0, 1.0)] * width,
                                                   y_bounds=(0.0, 1.0), rng=rng, regularization=c.regularization))
            else:
                models.append(objective_perturbation(Z, np.where(target == 1, 1.0, -1.0), loss="logistic" if c.model == "logistic" else "huber",
                                                     epsilon=c.epsilon, regularization=c.regularization, rng=rng,
                                                     norm_bound=math.sqrt(self.schema.d)))
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

        if self._trees is None:
            c = self.config.pfds
            self._trees = {}
            for s in self.sharers:
                rng = np.random.default_rng(tree_seeds(self.config, s)["tree_seed"])
                data = self.own[s]
                self._trees[s] = share_predictor(data.X, labels_of(self.schema, data), self.schema, epsilon=c.epsilon, rng=rng,
                                                 h_max=c.h_max, t=c.t, max_leaves=c.max_leaves,
                                                 attribute_choice=c.attribute_choice, neighbours=c.neighbours)
        return self._trees

    def _with_shared(self, released: dict[str, Any]) -> dict[str, Any]:
        errors = {}
        for a in self.evaluated:
            parts = [(self.own[a].X, labels_of(self.schema, self.own[a]))] + [(r.X, r.y) for s, r in released.items() if s != a]
            X = np.vstack([p[0] for p in parts])
            y = np.concatenate([np.asarray(p[1], dtype=np.float64) for p in parts])
            errors[a] = self._fit_error(X, y.astype(np.int64) if self.config.pfds.model != "linear" else y, a)
        return _summary(errors, self.evaluated)

    def _released(self, label: str, *, own_tree_only: bool, consistency: bool) -> dict[str, Any]:
        from marketplace.protocols.pfds import share_data

        c = self.config.pfds
        trees = self.trees()
        out = {}
        for s in self.sharers:
            voters = [trees[s]] if own_tree_only else list(trees.values())
            out[s] = share_data(trees[s], self.own[s].X, voters, epsilon=c.epsilon, p=c.p, consistency=consistency,
                                rng=seeds.rng(self.config.seed, f"pfds.{label}.{s}"))
        return out

    def pfds_s(self) -> dict[str, Any]:
        return self._with_shared(self._released("pfds_s", own_tree_only=True, consistency=self.config.pfds.consistency))

    def pfds_minus(self) -> dict[str, Any]:
        released = self._released("pfds_minus", own_tree_only=False, consistency=False)
        self.minus_sizes = {s: int(r.X.shape[0]) for s, r in released.items()}
        return self._with_shared(released)


# --- terminal ------------------------------------------------------------------------------


def head_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    agents = report.get("agents") or {}
    receivers = f" + {plural(agents['receivers'], 'receiving owner')}" if agents.get("receivers") else ""
    sharers = plural(agents["sharers"], "sharer") if isinstance(agents.get("sharers"), int) else "- sharers"
    rows = [("agents", f"{sharers}{receivers} + the consumer; test fold of {agents.get('test_rows', '-')} rows; "
             f"error = {report.get('error_measure', '-')}")]
    ledgers = [p for p in (report.get("privacy") or {}).values() if isinstance(p, dict) and p.get("eps") is not None]
    if ledgers:
        eps = [p["eps"] for p in ledgers]
        delta = max((p.get("delta") or 0.0) for p in ledgers)
        how = "; ".join(dict.fromkeys(accountant_text(p) for p in ledgers))
        rows.append(("privacy", f"each sharer: eps spent in [{fmt(min(eps))}, {fmt(max(eps))}], delta "
                                f"{'= 0 (pure DP)' if delta == 0 else f'up to {fmt(delta)}'} ({how}; {relation_text(ledgers[0])})"))
    fidelity = report.get("fidelity") or {}
    for name, f in fidelity.items():
        if f.get("mean_abs_size_error") is not None:
            rows.append(("fidelity", f"{LABELS[name]}: mean |synthetic size - true size| = {fmt(f['mean_abs_size_error'])} rows "
                         f"({fmt(100 * f['mean_rel_size_error'])}%)"))
    if report.get("flagged"):
        rows.append(("flagged", ", ".join(report["flagged"])))
    return rows


def tables(report: dict[str, Any]) -> list[Table]:
    table = Table(title=f"error on the test fold ({report.get('error_measure', '')}); mean over the evaluated agents",
                  title_justify="left")
    table.add_column("method")
    table.add_column("mean error", justify="right")
    table.add_column("consumer", justify="right")
    for name in METHODS:
        m = (report.get("metrics") or {}).get(name)
        if m:
            table.add_row(LABELS[name], fmt(m.get("mean")), fmt(m.get("consumer")))
            if m.get("note"):
                table.caption = f"{LABELS[name]}: {m['note']}"
    return [table]


# --- sweeps --------------------------------------------------------------------------------


sweep_headline = ("pfds_error",)
"""The columns of :func:`sweep_row` a sweep prints for each finished run: PFDS's mean error over the evaluated agents."""


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The error and fidelity columns of one run, and ``eps_spent`` (with ``delta_spent``): the
    largest eps a sharer's ledger states (at most ``pfds.epsilon``: levels that read no data cost
    nothing)."""
    metrics = report.get("metrics") or {}
    row: dict[str, Any] = {}
    for name in METHODS:
        m = metrics.get(name) or {}
        row[f"{name}_error"] = m.get("mean")
        row[f"{name}_consumer_error"] = m.get("consumer")
    for name, f in (report.get("fidelity") or {}).items():
        row[f"{name}_size_error"] = f.get("mean_abs_size_error")
        row[f"{name}_rel_size_error"] = f.get("mean_rel_size_error")
    privacy = report.get("privacy") or {}
    eps = [p["eps"] for p in privacy.values() if isinstance(p, dict) and p.get("eps") is not None]
    row["eps_max"] = max(eps) if eps else None
    row.update(eps_spent({party: [ledger] for party, ledger in privacy.items() if party.startswith("owner-")}))
    row["sharers"] = (report.get("agents") or {}).get("sharers")
    return row


def sweep_table(summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
    """One row per sweep point: the eps a sharer actually spent (its ledger), every method's
    error and the synthetic size errors, mean±sd over repeats."""
    table = sweep_table_head(title, "mean±sd over repeats of the mean error over evaluated agents; eps spent: the "
                                    "largest a sharer's ledger states", keys)
    table.add_column("ok", justify="right")
    table.add_column("eps spent", justify="right", no_wrap=True)
    for name in METHODS:
        table.add_column(LABELS[name], justify="right", no_wrap=True)
    table.add_column("size err PFDS / PFDS^-", justify="right")
    for row in summary:
        sizes = f"{mean_sd(row, 'pfds_size_error', '.0f', sd=False)} / {mean_sd(row, 'pfds_minus_size_error', '.0f', sd=False)}"
        table.add_row(*(fmt(row.get(k)) for k in keys), f"{row['completed']}/{row['runs']}", mean_sd(row, "eps_spent", ".4g"),
                      *(mean_sd(row, f"{name}_error", ".3f") for name in METHODS), sizes)
    return table


def plot_sweep(summary: list[dict[str, Any]], keys: list[str], path, *, title: str) -> None:
    """Error of every method (left) and the synthetic size error of PFDS and PFDS^- (right)
    against the first swept key, or against the eps a sharer actually spent (its ledger) when
    that key is ``pfds.epsilon``."""
    from marketplace.reporting.plots import spent_axis, sweep_figure

    sweep_figure(summary, keys, path, title=title, x_column=spent_axis(keys, lambda key: key == "pfds.epsilon"), panels=[
        ("error on the test fold", [(LABELS[n], f"{n}_error", n not in ("np_agt", "np_pred")) for n in METHODS]),
        ("mean |synthetic size - true size| (rows)", [("PFDS", "pfds_size_error", True), ("PFDS^-", "pfds_minus_size_error", True)]),
    ])


# --- what each owner gives up (docs/privacy.md, "pfds") ------------------------------------------


def owner_exposure(config: ScenarioConfig, report: dict[str, Any]) -> dict[str, list]:
    """Per owner: a sharer's tree and synthetic records go through the curator to every other
    agent (the consumer and every other owner), all bounded by the sharer's own ledger
    (``privacy.<owner>``); a receiving owner sends nothing derived from its rows."""
    from marketplace.reporting.per_owner import Exposure

    sharers, receivers = sharers_of(config)
    release = "this sharer's DP decision tree and noisy node counts, and the synthetic records drawn from them"
    out = {owner: [Exposure(observer, release, (owner,)) for observer in ("consumer", "curator", "other owners")]
           for owner in sharers}
    nothing = "nothing derived from this owner's rows: it receives only (pfds.sharers)"
    out |= {owner: [Exposure(observer, nothing) for observer in ("consumer", "curator", "other owners")]
            for owner in receivers}
    return out


class PfdsExchange(Exchange):
    """The runtime's entry to ``pfds`` (:class:`marketplace.plugins.Exchange`): this module's functions."""

    build_role = staticmethod(build_role)
    check_plan = staticmethod(check_plan)
    progress = staticmethod(progress)
    report = staticmethod(report)
    head_rows = staticmethod(head_rows)
    tables = staticmethod(tables)
    sweep_row = staticmethod(sweep_row)
    sweep_table = staticmethod(sweep_table)
    plot_sweep = staticmethod(plot_sweep)
    nothing_released = staticmethod(nothing_released)
    owner_exposure = staticmethod(owner_exposure)
    owner_cost = staticmethod(owner_cost)
    consumer_cost = staticmethod(consumer_cost)
    make_world = staticmethod(make_world)
    sweep_headline = sweep_headline
