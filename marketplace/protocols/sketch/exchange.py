"""The `sketch` exchange (docs/design.md §5, M²M): roles from the scenario, and the report, tables, sweep
columns and files of a finished run. The roles live in ``curator.py``, ``owner.py`` and
``consumer.py`` next to this module; the pure core in the other modules of ``protocols/sketch/``.

Public pieces every party derives from the scenario alone (no message needed) are in ``public.py``:
the unit-box map of the records (``unit_records``), the feature map (``public_map``) and the
consumer's query plan (``query_plan``); they are imported here too. The comparison of a run with the
truth, for the report, is in ``evaluate.py``.

The report's truth (what the estimates are compared with) is computed by the runner, which may see
all data: the statistics of the union of the owners that released, and the MMD^2 of each owner's
data to the consumer's under the map's own kernel (from exact, noise-free features).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from marketplace import seeds
from marketplace.privacy import noise as noise_streams
from marketplace.privacy.noise import NoiseOrigin
from marketplace.data.dataset import Dataset
from marketplace.data.world import World
from marketplace.parties import party_ids
from marketplace.plugins import Exchange
from marketplace.protocols.sketch.evaluate import logistic_baselines, ranking_check, statistic_errors, truth
from marketplace.protocols.sketch.public import public_map, query_plan, record_dim, unit_records
from marketplace.reporting.absent import REFERENCES_ABSENT, absent, is_absent, why_absent
from marketplace.reporting.format import fmt, ledger_text, mean_sd, plural, sweep_table_head
from marketplace.reporting.plots import eps_spent
from marketplace.roles import CONSUMER, CURATOR, Role
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError

SKETCH_FILES = "sketches"
"""Folder of a run directory where the consumer's sketches are saved (merged.npz, owner-K.npz)."""


def _ledger(config: ScenarioConfig, owner: str):
    from marketplace.privacy.accountant import PrivacyLedger
    from marketplace.privacy.neighbouring import add_remove_one

    s = config.sketch
    budget = (s.budget_epsilon, s.budget_delta) if s.budget_epsilon is not None else None
    return PrivacyLedger(owner, neighbouring=add_remove_one(f"a row of {owner}'s data"), budget=budget, theorem="basic")


# --- lifetime ledgers ---------------------------------------------------------------------------


def owner_cost(config: ScenarioConfig, party: str):
    """What a run may release about an owner's rows (its one sketch), for its lifetime ledger:
    eps (Laplace) or (eps, delta) (the Gaussian sums and the Laplace count), under add/remove-one."""
    from marketplace.privacy.lifetime import Cost, Declared

    s = config.sketch
    what = f"sketch: one sketch of {party}'s rows ({config.name})"
    if s.epsilon is None:
        return Declared.unbounded_release(what, "sketch.epsilon is null: the owner's exact, noise-free sketch would leave")
    cost = Cost.approximate(s.epsilon, s.delta) if s.mechanism == "gaussian" else Cost.pure(s.epsilon)
    return Declared(what, cost, "add/remove-one")


def consumer_cost(config: ScenarioConfig):
    """The consumer of ``sketch`` sends nothing derived from its own data."""
    return None


# --- exchange interface ------------------------------------------------------------------------


def build_role(config: ScenarioConfig, party: str, world: World, owner_data: Dataset | None,
               noise: NoiseOrigin | None = None) -> Role:
    from marketplace.protocols.sketch.consumer import SketchConsumer
    from marketplace.protocols.sketch.curator import SketchCurator
    from marketplace.protocols.sketch.owner import SketchOwner

    ids = party_ids(config)
    s = config.sketch
    fmap = public_map(config)
    if party == CURATOR:
        return SketchCurator(scenario_name=config.name, owners=tuple(ids[1:-1]), feature_map=fmap,
                             epsilon=s.epsilon, mechanism=s.mechanism, delta=s.delta)
    if party == CONSUMER:
        plan = query_plan(config)
        test_X = test_y = None
        if plan.logistic_label is not None and len(world.test):
            test_X, test_y = unit_records(config, world.test, party=party)[:, :-1], world.test.y
        return SketchConsumer(scenario_name=config.name, feature_map=fmap,
                              target=unit_records(config, world.validation, party=party), plan=plan,
                              test_X=test_X, test_y=test_y, design_seed=seeds.derive(config.seed, "sketch.m2m"),
                              samples=s.samples, regularization=s.regularization, intercept=s.intercept,
                              rank=s.queries.rank_owners, own_evaluation=config.data.schema_only)
    index = ids.index(party) - 1
    data = owner_data if owner_data is not None else world.owners[index]
    rng = None if s.secure else np.random.default_rng(noise_streams.derive(config.seed, f"sketch.noise.{party}", noise))
    return SketchOwner(party_id=party, scenario_name=config.name, records=unit_records(config, data, party=party),
                       feature_map=fmap, epsilon=s.epsilon, mechanism=s.mechanism, delta=s.delta,
                       numerator_share=s.numerator_share, secure=s.secure, precision=s.precision,
                       ledger=_ledger(config, party), rng=rng)


def check_plan(config: ScenarioConfig) -> None:
    """Refuse, before anything starts, a scenario without a public box, or whose one release per
    owner would pass the per-owner budget."""
    from marketplace.protocols.sketch.owner import planned_steps
    from marketplace.privacy.accountant import BudgetExceeded

    s = config.sketch
    if not s.lower:
        raise SchemaError("sketch.lower", "the public box of the records: one lower bound per attribute "
                          "(and sketch.upper), never fitted on the data"
                          + (" (in a marketplace described by its public schema, a request served there without a box "
                             "gets the schema's feature ranges)" if config.data.schema_only else ""), "nothing")
    if s.queries.logistic_regression and not s.include_label:
        raise SchemaError("sketch.queries.logistic_regression", "sketch.include_label: true (the label must be sketched)", "include_label false")
    if s.epsilon is None or s.budget_epsilon is None:
        return
    try:
        _ledger(config, "owner").check_plan(planned_steps(s.epsilon, s.mechanism, s.delta, s.numerator_share))
    except BudgetExceeded as err:
        key = "budget_delta" if err.planned.eps <= s.budget_epsilon * (1 + 1e-9) else "budget_epsilon"
        raise SchemaError(f"sketch.{key}", "a per-owner budget that covers one release (sketch.epsilon"
                          + (", sketch.delta" if s.mechanism == "gaussian" else "") + ")", str(err)) from None


def check_world(config: ScenarioConfig, world: World) -> None:
    """The box must have one bound per attribute of the data; the label must be 0/1 if sketched;
    without clipping, every record must lie in the box. In a marketplace described by its public
    schema (no rows here) the same is checked against the schema: its classes must be 0/1 if the
    label is sketched, and without clipping its feature ranges must lie in the box (each owner's
    rows lie in those ranges)."""
    s = config.sketch
    if world.dim != len(s.lower):
        raise ValueError(f"sketch.lower: expected {world.dim} bounds (one per attribute of the data), got {len(s.lower)}")
    schema = config.data.schema
    if schema is not None:
        if s.include_label and not set(schema.class_codes().values()) <= {0, 1}:
            raise ValueError(f"sketch.include_label: the schema's classes are not 0/1 (data.schema.label.classes: "
                             f"{', '.join(schema.label.classes)})")
        if not s.clip:
            wider = [f.name for f, lo, hi in zip(schema.features, s.lower, s.upper) if f.lower < lo or f.upper > hi]
            if wider:
                raise ValueError(f"sketch.clip: false, but the schema's ranges of {', '.join(wider)} reach outside the box "
                                 f"sketch.lower/sketch.upper, so an owner's rows may too; widen the box or set sketch.clip: true")
    parts = [*world.owners, world.validation, world.test]
    if s.include_label and any(len(p) and not np.isin(p.y, (0, 1)).all() for p in parts):
        raise ValueError("sketch.include_label: the data's labels are not all 0/1")
    if not s.clip:
        lower, upper = np.array(s.lower), np.array(s.upper)
        for p in parts:
            outside = ~np.all((p.X >= lower) & (p.X <= upper), axis=1)
            if outside.any():
                raise ValueError(f"sketch.clip: false, but {int(outside.sum())} rows of {p.name} lie outside the box "
                                 f"sketch.lower/sketch.upper; widen the box or set sketch.clip: true")


def public_defaults(raw_section: dict[str, Any] | None, schema) -> dict[str, Any]:
    """The ``sketch:`` section of a request (raw, as written) for a marketplace described by its
    public schema ``schema`` (a :class:`~marketplace.data.public_schema.DataSchema`, or its raw
    mapping): the public box ``lower``/``upper`` taken from the schema's feature ranges when the
    request leaves both out or empty. The ranges are public (nobody's rows went into them), so the
    box stays public. A box the request gives is kept as it is (the checks then judge it). The
    section given is not changed: a new one is returned."""
    from marketplace.data.public_schema import DataSchema
    from marketplace.schema import build

    section = dict(raw_section or {})
    if not isinstance(schema, DataSchema):
        schema = build(DataSchema, dict(schema), "data.schema")
    if not section.get("lower") and not section.get("upper"):
        section["lower"] = [float(v) for v in schema.lower]
        section["upper"] = [float(v) for v in schema.upper]
    return section


def progress(config: ScenarioConfig, curator: Role) -> tuple[int, int]:
    return len(getattr(curator, "releases", {})), config.parties.owners


# --- the report --------------------------------------------------------------------------------


def report(config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    curator = results.get(CURATOR) or {}
    consumer = results.get(CONSUMER) or {}
    owners = list(curator.get("released") or [])
    estimates = consumer.get("estimates") or {}
    if not world.central:
        return _report_without_world(config, results, curator, consumer, owners, estimates)
    true = truth(config, world, owners)
    privacy = _privacy(config, results, owners)
    privacy[CONSUMER] = {"guarantee": "none", "note": "the consumer's data never leave it (used for its own ranking and AUC)"}
    logistic = logistic_baselines(config, world, owners)
    metrics: dict[str, Any] = {"errors": statistic_errors(estimates, true) if estimates else {},
                               "logistic_auc": consumer.get("logistic_auc"), "logistic_baselines": logistic}
    return {
        "privacy": privacy,
        "parsimony": {**(curator.get("parsimony") or {"points_seen": 0}), "rho": 0.0},
        "map": _map_section(config),
        "estimates": estimates,
        "truth": true,
        "metrics": metrics,
        "queries": consumer.get("queries"),
        "ranking": {**(consumer.get("ranking") or {}), "check": ranking_check(config, world, consumer.get("ranking"))}
        if consumer.get("ranking") else None,
        "released": owners,
        "flagged": curator.get("flagged", {}),
        "end_reason": curator.get("end_reason"),
        "history": history(curator.get("rounds") or []),
    }


def _map_section(config: ScenarioConfig) -> dict[str, Any]:
    return {"kind": config.sketch.map.kind, "n_features": public_map(config).n_features, "dim": record_dim(config),
            "coordinates": "unit box: (x - sketch.lower) / (sketch.upper - sketch.lower)"}


def _report_without_world(config: ScenarioConfig, results: dict[str, dict[str, Any]], curator: dict[str, Any],
                          consumer: dict[str, Any], owners: list[str], estimates: dict[str, Any]) -> dict[str, Any]:
    """The report of a marketplace described by its public schema, where nobody holds the owners'
    rows (:mod:`marketplace.reporting.absent`): the estimates, the ranking and the AUC as before, the
    figures the consumer measured against its own target (``metrics.merged_mmd2``,
    ``metrics.target_gap``), and absent: the truth and the errors against it, the centralized
    logistic baselines, and the ranking's check against the true MMD^2."""
    own = consumer.get("own_evaluation") or {}
    missing = {"truth": why_absent("the union of the owners' rows, to compute the exact statistics")}
    missing["metrics.errors"] = ("not computed: the errors compare the estimates with the truth, which is absent "
                                 "(truth); metrics.target_gap compares them with the consumer's own target instead")
    ranking = consumer.get("ranking")
    if ranking:
        missing["ranking.check"] = why_absent("every owner's rows and the consumer's, for the true MMD^2 of each owner's "
                                              "data to the consumer's")
    if config.sketch.queries.logistic_regression and owners:
        missing["metrics.logistic_baselines"] = why_absent("the union of the owners' rows, to train the centralized "
                                                           "references (non-private logistic regression, DP-ERM)")
    missing.update(own.get("absent") or {})
    metrics: dict[str, Any] = {
        "errors": absent(missing["metrics.errors"]), "logistic_auc": consumer.get("logistic_auc"),
        "logistic_baselines": absent(missing["metrics.logistic_baselines"]) if "metrics.logistic_baselines" in missing else None,
        "merged_mmd2": own.get("merged_mmd2"), "target_gap": own.get("target_gap") or {},
        "measured_by": "the consumer, against its own target (merged_mmd2, target_gap, the ranking) and test set "
                       "(logistic_auc), as its result states them: nobody else holds those rows"}
    if not own:
        missing["metrics.target_gap"] = missing["metrics.merged_mmd2"] = ("not computed: the consumer reported no "
                                                                          "figures of its own (it measures them against "
                                                                          "its own target, which nobody else holds)")
    privacy = _privacy(config, results, owners)
    privacy[CONSUMER] = {"guarantee": "none", "note": "the consumer's data never leave it; the report holds only the figures "
                                                      "it computed from them (the ranking, merged_mmd2, target_gap, the AUC)"}
    return {
        "privacy": privacy,
        "parsimony": {**(curator.get("parsimony") or {"points_seen": 0}), "rho": 0.0},
        "map": _map_section(config),
        "estimates": estimates,
        "truth": absent(missing["truth"]),
        "metrics": metrics,
        "queries": consumer.get("queries"),
        "ranking": {**ranking, "check": absent(missing["ranking.check"])} if ranking else None,
        "released": owners,
        "flagged": curator.get("flagged", {}),
        "end_reason": curator.get("end_reason"),
        "history": history(curator.get("rounds") or []),
        REFERENCES_ABSENT: missing,
    }


def _privacy(config: ScenarioConfig, results: dict[str, dict[str, Any]], owners: list[str]) -> dict[str, Any]:
    """Each owner's ledger for its one release (or that the release was not private)."""
    privacy = {}
    for owner in party_ids(config)[1:-1]:
        if config.sketch.epsilon is None:
            privacy[owner] = {"guarantee": "none", "note": "sketch.epsilon is null: exact sums were released (not private)"}
            continue
        ledger = (results.get(owner) or {}).get("privacy") or {}
        privacy[owner] = {"eps": ledger.get("eps"), "delta": ledger.get("delta"), "mechanism": config.sketch.mechanism,
                          "numerator_share": config.sketch.numerator_share, "accountant": ledger.get("accountant"),
                          "configured_theorem": ledger.get("configured_theorem"),
                          "budget": ledger.get("budget"), "released": owner in owners, "steps": ledger.get("steps"),
                          "neighbouring": ledger.get("neighbouring"),
                          **({"noise": ledger["noise"]} if "noise" in ledger else {})}
    return privacy


def history(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's history: one record per sketch the curator merged, in owner order (sketch has
    one round: every owner releases once)."""
    from marketplace.reporting.history import history_section

    return history_section(rounds, x="release", columns=["release", "owner", "count", "merged_count", "epsilon"],
                           plot=["count", "merged_count"], about={
        "release": "sketches merged so far (one record per sketch, in owner order: the order they arrived in follows "
                   "timing and is not recorded)",
        "owner": "the owner whose sketch this record merges",
        "count": "that sketch's released record count (noisy in a private run)",
        "merged_count": "the merged count so far (the publication's merged_count at the last record)",
        "epsilon": "that sketch's eps (each owner's guarantee for its own records; null: an exact release)"})


def nothing_released(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> str | None:
    """Why no owner's sketch reached the consumer, or None."""
    if not (results.get(CURATOR) or {}).get("released"):
        return "no owner released a sketch"
    return None


def artifacts(report: dict[str, Any], out: Path) -> None:
    """Save the consumer's sketches as .npz files in ``out/sketches/`` (merged.npz and one per owner),
    for ``marketplace sketch query``; their paths go into ``report["files"]``."""
    from marketplace.protocols.sketch.consumer import release_from_dict

    sketches = (((report.get("party_details") or {}).get(CONSUMER) or {}).get("result") or {}).get("sketches")
    if not sketches:
        return
    folder = Path(out) / SKETCH_FILES
    folder.mkdir(parents=True, exist_ok=True)
    files = {"merged": str(release_from_dict(sketches["merged"]).save(folder / "merged.npz"))}
    for owner, data in sketches["owners"].items():
        files[owner] = str(release_from_dict(data).save(folder / f"{owner}.npz"))
    report["files"] = {"sketches": files}


def head_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    m = report.get("map") or {}
    rows = [("sketch", f"{m.get('kind')} map, m = {m.get('n_features')}, d = {m.get('dim')}; "
                       f"{plural(len(report.get('released') or []), 'owner')} released ({report.get('end_reason') or '-'})")]
    pars = report.get("parsimony") or {}
    rows.append(("parsimony", f"curator saw {pars.get('points_seen', 0)} raw points ({pars.get('sketches_received', 0)} sketches)"))
    for name, entry in (report.get("privacy") or {}).items():
        if isinstance(entry, dict) and entry.get("eps") is not None:
            rows.append(("privacy", ledger_text(name, entry, mechanism=entry.get("mechanism"))))
    ranking = report.get("ranking") or {}
    check = ranking.get("check") or {}
    if ranking and is_absent(check):  # nobody holds the owners' rows: no true order to compare with
        rows.append(("ranking", f"by sketch MMD^2 to the consumer's data: {', '.join(ranking.get('order', []))}; "
                                f"true order not computed (references_absent)"))
    elif ranking:
        rows.append(("ranking", f"by sketch MMD^2: {', '.join(ranking.get('order', []))}; true: {', '.join(check.get('true_order', []))}; "
                                f"Spearman {fmt(check.get('spearman'))}"))
    from marketplace.protocols.sketch.consumer import projection_notes

    for line in projection_notes((report.get("estimates") or {}).get("projections") or {}):
        rows.append(("projected", line))
    if report.get("flagged"):
        rows.append(("flagged", ", ".join(f"{k}: {v}" for k, v in report["flagged"].items())))
    if report.get("files"):
        rows.append(("sketch file", report["files"]["sketches"]["merged"]))
    return rows


ERROR_METRICS = {
    "moment": "mean over attributes of |estimate - truth| / |truth| of the raw moment (absolute where the truth is 0)",
    "cdf_mae": "mean absolute error of the CDF values, over attributes and points",
    "covariance_rel_fro": "||estimate - truth||_F / ||truth||_F of the covariance matrix",
    "count_fraction_mae": "mean absolute error of the share of records inside each count box",
    "count_mre": "mean relative error of those shares, over boxes that hold at least one record",
    "count_total_rel": "|estimated size - size| / size, from the sketch's noisy count",
}
"""What each error metric of the report measures (the table shows it next to the value)."""


def error_meaning(name: str) -> str:
    if name.startswith("moment") and name.endswith("_mre"):
        return f"order {name[len('moment'):-len('_mre')]}: " + ERROR_METRICS["moment"]
    return ERROR_METRICS.get(name, "")


def tables(report: dict[str, Any]) -> list[Table]:
    metrics = report.get("metrics") or {}
    if is_absent(metrics.get("errors")):  # nobody holds the owners' rows: no truth, the consumer's own target instead
        table = Table(title="M²M estimates from the merged sketch against the consumer's own target (unit box): how far "
                            "the owners' data lie from what the consumer wants, not an estimation error; lower is closer",
                      title_justify="left", caption="errors against the truth: not computed (the truth needs every "
                      "owner's rows, which nobody holds here; references_absent in report.json)", caption_justify="left")
        table.add_column("statistic")
        table.add_column("gap", justify="right")
        table.add_column("what the gap is")
        table.add_row("merged MMD^2", fmt(metrics.get("merged_mmd2")),
                      "sketch estimate of MMD^2 between the owners' merged data and the consumer's target")
        for name, value in (metrics.get("target_gap") or {}).items():
            table.add_row(name, fmt(value), error_meaning(name).replace("truth", "target"))
    else:
        table = Table(title="M²M estimates from the merged sketch against the truth (union of the owners' data, unit box); "
                            "lower is better", title_justify="left")
        table.add_column("statistic")
        table.add_column("error", justify="right")
        table.add_column("what the error is")
        for name, value in (metrics.get("errors") or {}).items():
            table.add_row(name, fmt(value), error_meaning(name))
    out = [table]
    if metrics.get("logistic_auc") is not None:
        auc = Table(title="logistic regression of the label: AUC on the consumer's test set (higher is better)",
                    title_justify="left")
        auc.add_column("model")
        auc.add_column("AUC", justify="right")
        auc.add_row("from the sketch (M²M)", fmt(metrics["logistic_auc"]))
        if is_absent(metrics.get("logistic_baselines")):
            auc.add_row("centralized references", "not computed", style="dim")
        for key, value in ({} if is_absent(metrics.get("logistic_baselines")) else
                           metrics.get("logistic_baselines") or {}).items():
            if not key.endswith("note"):
                auc.add_row(key.replace("_auc", "").replace("_", " "), fmt(value))
        out.append(auc)
    return out


# --- sweeps ------------------------------------------------------------------------------------

PRIVACY_KEYS = frozenset({"sketch.epsilon", "sketch.mechanism", "sketch.delta", "sketch.numerator_share"})
"""Swept keys that set what an owner's release costs: its sweep is plotted against the eps spent."""

SWEEP_COLUMNS = ("moment1_mre", "moment2_mre", "cdf_mae", "covariance_rel_fro", "count_fraction_mae", "count_mre")


sweep_headline = ("moment1_mre", "logistic_auc")
"""The columns of :func:`sweep_row` a sweep prints for each finished run: the first-moment error and the logistic model's AUC."""


def sweep_row(report: dict[str, Any]) -> dict[str, Any]:
    """The error columns of one run, and ``eps_spent`` (with ``delta_spent``): the largest eps an
    owner's ledger states for its one release (``owner_eps``: the largest of every ledger's)."""
    metrics = report.get("metrics") or {}
    errors = metrics.get("errors") or {}
    baselines = metrics.get("logistic_baselines") or {}
    check = (report.get("ranking") or {}).get("check") or {}
    privacy = report.get("privacy") or {}
    eps = [e.get("eps") for e in privacy.values() if isinstance(e, dict) and e.get("eps") is not None]
    row = {column: errors.get(column) for column in SWEEP_COLUMNS}
    row.update(eps_spent({party: [ledger] for party, ledger in privacy.items() if party.startswith("owner-")}))
    row.update({"logistic_auc": metrics.get("logistic_auc"), "dp_erm_auc": baselines.get("dp_erm_auc"),
                "non_private_auc": baselines.get("non_private_auc"), "ranking_spearman": check.get("spearman"),
                "lambda": (report.get("estimates") or {}).get("lambda"), "owner_eps": max(eps) if eps else None,
                "released": len(report.get("released") or [])})
    return row


def sweep_table(summary: list[dict[str, Any]], keys: list[str], title: str) -> Table:
    """One row per sweep point: the eps an owner's release actually cost (its ledger) and the
    errors, mean±sd over repeats."""
    table = sweep_table_head(title, "mean±sd over repeats; errors in unit-box coordinates; eps spent: the largest an "
                                    "owner's ledger states for its release", keys)
    shown = [("ok", None), ("eps spent", "eps_spent"), ("mom1 MRE", "moment1_mre"), ("CDF MAE", "cdf_mae"), ("cov rel", "covariance_rel_fro"),
             ("count MAE", "count_fraction_mae"), ("AUC", "logistic_auc"), ("DP-ERM AUC", "dp_erm_auc"),
             ("rank rho", "ranking_spearman")]
    for name, _ in shown:
        table.add_column(name, justify="right", no_wrap=True)
    for row in summary:
        cells = [f"{row['completed']}/{row['runs']}"] + [mean_sd(row, column, ".3g") for _, column in shown[1:]]
        table.add_row(*(fmt(row.get(k)) for k in keys), *cells)
    return table


def plot_sweep(summary: list[dict[str, Any]], keys: list[str], path, *, title: str) -> None:
    """One panel per task (error against the first swept key, log-log when it spans decades), one
    line per value of the second swept key (e.g. the map kind); plus AUC when it was measured.
    When the first swept key is a privacy setting (``PRIVACY_KEYS``), x is the eps an owner's
    release actually cost (``eps_spent``, its ledger) instead of the key."""
    from marketplace.reporting.plots import EPS_SPENT_LABEL, spent_axis

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("first moment MRE", "moment1_mre"), ("second moment MRE", "moment2_mre"), ("CDF MAE", "cdf_mae"),
              ("covariance rel. error (Frobenius)", "covariance_rel_fro"), ("count fraction MAE", "count_fraction_mae")]
    if any(r.get("logistic_auc_mean") is not None for r in summary):
        panels.append(("logistic regression AUC", "logistic_auc"))
    panels = [p for p in panels if any(r.get(f"{p[1]}_mean") is not None for r in summary)]
    x_key, series_key = keys[0], (keys[1] if len(keys) > 1 else None)
    x_label = x_key
    if spent_axis(keys, PRIVACY_KEYS.__contains__):
        x_key, x_label = "eps_spent_mean", f"{EPS_SPENT_LABEL}\n(swept: {keys[0]})"
        summary = [row for row in summary if row.get(x_key) is not None]  # exact sums (no eps) have no x
    groups: dict[Any, list[dict[str, Any]]] = {}
    for row in summary:
        groups.setdefault(row.get(series_key) if series_key else None, []).append(row)
    xs_all = [r[x_key] for r in summary] or [1.0]
    log_x = min(xs_all) > 0 and max(xs_all) / min(xs_all) >= 100
    cols = min(3, max(1, len(panels)))
    rows_n = -(-max(1, len(panels)) // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.4 * cols, 3.6 * rows_n), squeeze=False)
    for axis in axes.flat[len(panels):]:
        axis.set_visible(False)
    for axis, (label, column) in zip(axes.flat, panels):
        for series, rows in groups.items():
            rows = sorted(rows, key=lambda r: r[x_key])
            pts = [(r[x_key], r.get(f"{column}_mean"), r.get(f"{column}_sd") or 0.0) for r in rows if r.get(f"{column}_mean") is not None]
            if pts:
                x, m, sd = zip(*pts)
                axis.errorbar(x, m, yerr=sd, fmt="o-", capsize=3, label=str(series) if series_key else "M²M")
        if column == "logistic_auc":
            for name, style in (("dp_erm_auc", "s--"), ("non_private_auc", "k:")):
                rows = sorted(next(iter(groups.values()), []), key=lambda r: r[x_key])
                pts = [(r[x_key], r.get(f"{name}_mean")) for r in rows if r.get(f"{name}_mean") is not None]
                if pts:
                    axis.plot(*zip(*pts), style, label=name.replace("_auc", "").replace("_", " "))
        elif all(r.get(f"{column}_mean") is None or r[f"{column}_mean"] > 0 for r in summary):
            axis.set_yscale("log")
        if log_x:
            axis.set_xscale("log")
        axis.set_xlabel(x_label)
        axis.set_title(label, fontsize=9)
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- what each owner gives up (docs/privacy.md, "sketch") ----------------------------------------


def owner_exposure(config: ScenarioConfig, report: dict[str, Any]) -> dict[str, list]:
    """Per owner: its one release goes to the curator, which merges it and sends it on to the
    consumer; the other owners receive only the curator's request. Both observers of the release
    are bounded by the owner's own ledger (``privacy.<owner>``)."""
    from marketplace.reporting.per_owner import Exposure

    release = "this owner's sketch: noisy feature sums and a noisy count (and every answer computed from them)"
    return {owner: [Exposure("consumer", release, (owner,)),
                    Exposure("curator", release, (owner,)),
                    Exposure("other owners", "nothing derived from this owner's rows (they receive only the curator's request)")]
            for owner in party_ids(config)[1:-1]}


class SketchExchange(Exchange):
    """The runtime's entry to ``sketch`` (:class:`marketplace.plugins.Exchange`): this module's functions."""

    build_role = staticmethod(build_role)
    check_plan = staticmethod(check_plan)
    progress = staticmethod(progress)
    report = staticmethod(report)
    head_rows = staticmethod(head_rows)
    tables = staticmethod(tables)
    sweep_row = staticmethod(sweep_row)
    sweep_table = staticmethod(sweep_table)
    plot_sweep = staticmethod(plot_sweep)
    check_world = staticmethod(check_world)
    nothing_released = staticmethod(nothing_released)
    owner_exposure = staticmethod(owner_exposure)
    owner_cost = staticmethod(owner_cost)
    consumer_cost = staticmethod(consumer_cost)
    artifacts = staticmethod(artifacts)
    public_defaults = staticmethod(public_defaults)
    sweep_headline = sweep_headline
