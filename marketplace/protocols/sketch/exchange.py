"""The `sketch` exchange (docs/design.md §5, M²M): roles from the scenario, and the report and files of a
finished run. Its terminal display is in ``display.py``, its sweep columns, table and plot in
``sweeps.py``. The roles live in ``curator.py``, ``owner.py`` and ``consumer.py`` next to this module;
the pure core in the other modules of ``protocols/sketch/``.

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

from marketplace import seeds
from marketplace.data.dataset import Dataset
from marketplace.data.world import World
from marketplace.parties import owner_position, party_ids
from marketplace.plugins import Exchange
from marketplace.privacy import noise as noise_streams
from marketplace.privacy.noise import NoiseOrigin
from marketplace.privacy.view import Seen
from marketplace.protocols.sketch.display import head_rows, tables
from marketplace.protocols.sketch.evaluate import logistic_baselines, ranking_check, statistic_errors, truth
from marketplace.protocols.sketch.plan import declared_view, owner_cost, release_plan
from marketplace.protocols.sketch.public import attribute_names, public_map, query_plan, record_dim, unit_records
from marketplace.protocols.sketch.rules import check_plan, public_defaults
from marketplace.protocols.sketch.sweeps import plot_sweep, sweep_headline, sweep_row, sweep_table
from marketplace.reporting.absent import NOT_ASKED, REFERENCES_ABSENT, absent, why_absent
from marketplace.roles import CONSUMER, CURATOR, Role
from marketplace.scenario.config import ScenarioConfig

SKETCH_FILES = "sketches"
"""Folder of a run directory where the consumer's sketches are saved (merged.npz, owner-K.npz)."""


# --- exchange interface ------------------------------------------------------------------------


def build_role(
    config: ScenarioConfig, party: str, world: World, owner_data: Dataset | None, noise: NoiseOrigin | None = None
) -> Role:
    from marketplace.protocols.sketch.consumer import SketchConsumer
    from marketplace.protocols.sketch.curator import SketchCurator
    from marketplace.protocols.sketch.owner import SketchOwner

    s = config.sketch
    fmap = public_map(config)
    if party == CURATOR:
        return SketchCurator(
            scenario_name=config.name,
            owners=tuple(party_ids(config)[1:-1]),
            feature_map=fmap,
            epsilon=s.epsilon,
            mechanism=s.mechanism,
            delta=s.delta,
        )
    if party == CONSUMER:
        plan = query_plan(config)
        test_X = test_y = None
        if plan.logistic_label is not None and len(world.test):
            test_X, test_y = unit_records(config, world.test, party=party)[:, :-1], world.test.y
        return SketchConsumer(
            scenario_name=config.name,
            feature_map=fmap,
            target=unit_records(config, world.validation, party=party),
            plan=plan,
            test_X=test_X,
            test_y=test_y,
            design_seed=seeds.derive(config.seed, "sketch.m2m"),
            samples=s.samples,
            regularization=s.regularization,
            intercept=s.intercept,
            rank=s.queries.rank_owners,
            own_evaluation=config.data.schema_only,
        )
    index = owner_position(config, party)
    data = owner_data if owner_data is not None else world.owners[index]
    rng = None if s.secure else np.random.default_rng(noise_streams.derive(config.seed, f"sketch.noise.{party}", noise))
    return SketchOwner(
        party_id=party,
        scenario_name=config.name,
        records=unit_records(config, data, party=party),
        feature_map=fmap,
        epsilon=s.epsilon,
        mechanism=s.mechanism,
        secure=s.secure,
        precision=s.precision,
        plan=release_plan(config, party),
        rng=rng,
    )


def check_world(config: ScenarioConfig, world: World) -> None:
    """The box must have one bound per attribute of the data; the label must be 0/1 if sketched;
    without clipping, every record must lie in the box. In a marketplace described by its public
    schema (no rows here) the same is checked against the schema: its classes must be 0/1 if the
    label is sketched, and without clipping its feature ranges must lie in the box (each owner's
    rows lie in those ranges)."""
    s = config.sketch
    if world.dim != len(s.lower):
        raise ValueError(
            f"sketch.lower: expected {world.dim} bounds (one per attribute of the data), got {len(s.lower)}"
        )
    schema = config.data.schema
    if schema is not None:
        if s.include_label and not set(schema.class_codes().values()) <= {0, 1}:
            raise ValueError(
                f"sketch.include_label: the schema's classes are not 0/1 (data.schema.label.classes: "
                f"{', '.join(str(c) for c in schema.label.classes)})"
            )
        if not s.clip:
            wider = [f.name for f, lo, hi in zip(schema.features, s.lower, s.upper) if f.lower < lo or f.upper > hi]
            if wider:
                raise ValueError(
                    f"sketch.clip: false, but the schema's ranges of {', '.join(wider)} reach outside the box "
                    f"sketch.lower/sketch.upper, so an owner's rows may too; widen the box or set sketch.clip: true"
                )
    parts = [*world.owners, world.validation, world.test]
    if s.include_label and any(len(p) and not np.isin(p.y, (0, 1)).all() for p in parts):
        raise ValueError("sketch.include_label: the data's labels are not all 0/1")
    if not s.clip:
        lower, upper = np.array(s.lower), np.array(s.upper)
        for p in parts:
            outside = ~np.all((p.X >= lower) & (p.X <= upper), axis=1)
            if outside.any():
                raise ValueError(
                    f"sketch.clip: false, but {int(outside.sum())} rows of {p.name} lie outside the box "
                    f"sketch.lower/sketch.upper; widen the box or set sketch.clip: true"
                )


def progress(config: ScenarioConfig, curator: Role) -> tuple[int, int]:
    return curator.progress(), config.parties.owners


# --- the report --------------------------------------------------------------------------------


def report(config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    curator = results.get(CURATOR) or {}
    consumer = results.get(CONSUMER) or {}
    owners = list(curator.get("released") or [])
    estimates = consumer.get("estimates") or {}
    if not world.central:
        return _report_without_world(config, world, results, curator, consumer, owners, estimates)
    true = truth(config, world, owners)
    privacy = _privacy(config, results, owners)
    privacy[CONSUMER] = {
        "guarantee": "none",
        "note": "the consumer's data never leave it (used for its own ranking and AUC)",
    }
    logistic = logistic_baselines(config, world, owners)
    metrics: dict[str, Any] = {
        "errors": statistic_errors(estimates, true) if estimates else {},
        "logistic_auc": consumer.get("logistic_auc"),
        "logistic_baselines": logistic,
        **_signal(consumer),
    }
    return {
        "privacy": privacy,
        "parsimony": {**(curator.get("parsimony") or {"points_seen": 0}), "rho": 0.0},
        "map": _map_section(config, world),
        "estimates": estimates,
        "truth": true,
        "metrics": metrics,
        "queries": consumer.get("queries"),
        "ranking": {**(consumer.get("ranking") or {}), "check": ranking_check(config, world, consumer.get("ranking"))}
        if consumer.get("ranking")
        else None,
        "released": owners,
        "flagged": curator.get("flagged", {}),
        "end_reason": curator.get("end_reason"),
        "history": history(curator.get("rounds") or []),
    }


def report_without_references(
    config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The report of a served session that did not ask for the central references
    (:meth:`marketplace.plugins.Exchange.report_without_references`): the estimates, the ranking, the
    AUC and the signal as the consumer found them, and, stated absent
    (:data:`~marketplace.reporting.absent.NOT_ASKED`), what :func:`report` computes on the owners' rows:
    the truth and the errors against it, the centralized logistic baselines and the ranking's check."""
    if not world.central:  # nobody holds the owners' rows: the figures are absent for that reason
        return report(config, world, results)
    curator = results.get(CURATOR) or {}
    consumer = results.get(CONSUMER) or {}
    owners = list(curator.get("released") or [])
    ranking = consumer.get("ranking")
    missing = {"truth": NOT_ASKED, "metrics.errors": NOT_ASKED}
    if config.sketch.queries.logistic_regression and owners:
        missing["metrics.logistic_baselines"] = NOT_ASKED
    if ranking:
        missing["ranking.check"] = NOT_ASKED
    privacy = _privacy(config, results, owners)
    privacy[CONSUMER] = {
        "guarantee": "none",
        "note": "the consumer's data never leave it (used for its own ranking and AUC)",
    }
    metrics: dict[str, Any] = {
        "errors": absent(NOT_ASKED),
        "logistic_auc": consumer.get("logistic_auc"),
        "logistic_baselines": absent(NOT_ASKED) if "metrics.logistic_baselines" in missing else None,
        **_signal(consumer),
    }
    return {
        "privacy": privacy,
        "parsimony": {**(curator.get("parsimony") or {"points_seen": 0}), "rho": 0.0},
        "map": _map_section(config, world),
        "estimates": consumer.get("estimates") or {},
        "truth": absent(NOT_ASKED),
        "metrics": metrics,
        "queries": consumer.get("queries"),
        "ranking": {**ranking, "check": absent(NOT_ASKED)} if ranking else None,
        "released": owners,
        "flagged": curator.get("flagged", {}),
        "end_reason": curator.get("end_reason"),
        "history": history(curator.get("rounds") or []),
        REFERENCES_ABSENT: missing,
    }


def _signal(consumer: dict[str, Any]) -> dict[str, Any]:
    """``metrics.signal``: whether the merged release collapsed under its noise
    (:mod:`marketplace.protocols.sketch.signal`), when the consumer saw one."""
    signal = consumer.get("signal")
    return {"signal": signal} if isinstance(signal, dict) else {}


def _map_section(config: ScenarioConfig, world: World) -> dict[str, Any]:
    """``map``: the public feature map, and ``attributes``, the names of the sketched attributes (the
    data's columns: :func:`~marketplace.protocols.sketch.public.attribute_names`) when the data name
    them; every per-attribute estimate is in that order."""
    names = attribute_names(config, world)
    return {
        "kind": config.sketch.map.kind,
        "n_features": public_map(config).n_features,
        "dim": record_dim(config),
        "coordinates": "unit box: (x - sketch.lower) / (sketch.upper - sketch.lower)",
        **({"attributes": list(names)} if names is not None else {}),
    }


def _report_without_world(
    config: ScenarioConfig,
    world: World,
    results: dict[str, dict[str, Any]],
    curator: dict[str, Any],
    consumer: dict[str, Any],
    owners: list[str],
    estimates: dict[str, Any],
) -> dict[str, Any]:
    """The report of a marketplace described by its public schema, where nobody holds the owners'
    rows (:mod:`marketplace.reporting.absent`): the estimates, the ranking and the AUC as before, the
    figures the consumer measured against its own target (``metrics.merged_mmd2``,
    ``metrics.target_gap``), and absent: the truth and the errors against it, the centralized
    logistic baselines, and the ranking's check against the true MMD^2."""
    own = consumer.get("own_evaluation") or {}
    missing = {"truth": why_absent("the union of the owners' rows, to compute the exact statistics")}
    missing["metrics.errors"] = (
        "not computed: the errors compare the estimates with the truth, which is absent "
        "(truth); metrics.target_gap compares them with the consumer's own target instead"
    )
    ranking = consumer.get("ranking")
    if ranking:
        missing["ranking.check"] = why_absent(
            "every owner's rows and the consumer's, for the true MMD^2 of each owner's data to the consumer's"
        )
    if config.sketch.queries.logistic_regression and owners:
        missing["metrics.logistic_baselines"] = why_absent(
            "the union of the owners' rows, to train the centralized "
            "references (non-private logistic regression, DP-ERM)"
        )
    missing.update(own.get("absent") or {})
    metrics: dict[str, Any] = {
        "errors": absent(missing["metrics.errors"]),
        "logistic_auc": consumer.get("logistic_auc"),
        "logistic_baselines": absent(missing["metrics.logistic_baselines"])
        if "metrics.logistic_baselines" in missing
        else None,
        "merged_mmd2": own.get("merged_mmd2"),
        "target_gap": own.get("target_gap") or {},
        "measured_by": "the consumer, against its own target (merged_mmd2, target_gap, the ranking) and test set "
        "(logistic_auc), as its result states them: nobody else holds those rows",
        **_signal(consumer),
    }
    if not own:
        missing["metrics.target_gap"] = missing["metrics.merged_mmd2"] = (
            "not computed: the consumer reported no "
            "figures of its own (it measures them against "
            "its own target, which nobody else holds)"
        )
    privacy = _privacy(config, results, owners)
    privacy[CONSUMER] = {
        "guarantee": "none",
        "note": "the consumer's data never leave it; the report holds only the figures "
        "it computed from them (the ranking, merged_mmd2, target_gap, the AUC)",
    }
    return {
        "privacy": privacy,
        "parsimony": {**(curator.get("parsimony") or {"points_seen": 0}), "rho": 0.0},
        "map": _map_section(config, world),
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
    privacy: dict[str, dict[str, Any]] = {}
    for owner in party_ids(config)[1:-1]:
        if config.sketch.epsilon is None:
            privacy[owner] = {
                "guarantee": "none",
                "note": "sketch.epsilon is null: exact sums were released (not private)",
            }
            continue
        ledger = (results.get(owner) or {}).get("privacy") or {}
        privacy[owner] = {
            "eps": ledger.get("eps"),
            "delta": ledger.get("delta"),
            "mechanism": config.sketch.mechanism,
            "numerator_share": config.sketch.numerator_share,
            "accountant": ledger.get("accountant"),
            "configured_theorem": ledger.get("configured_theorem"),
            "budget": ledger.get("budget"),
            "released": owner in owners,
            "steps": ledger.get("steps"),
            "neighbouring": ledger.get("neighbouring"),
            **({"noise": ledger["noise"]} if "noise" in ledger else {}),
        }
    return privacy


def history(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's history: one record per sketch the curator merged, in owner order (sketch has
    one round: every owner releases once)."""
    from marketplace.reporting.history import history_section

    return history_section(
        rounds,
        x="release",
        columns=["release", "owner", "count", "merged_count", "epsilon"],
        plot=["count", "merged_count"],
        about={
            "release": "sketches merged so far (one record per sketch, in owner order: the order they arrived in "
            "follows "
            "timing and is not recorded)",
            "owner": "the owner whose sketch this record merges",
            "count": "that sketch's released record count (noisy in a private run)",
            "merged_count": "the merged count so far (the publication's merged_count at the last record)",
            "epsilon": "that sketch's eps (each owner's guarantee for its own records; null: an exact release)",
        },
    )


def nothing_released(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> str | None:
    """Why no owner's sketch reached the consumer, or None."""
    if not (results.get(CURATOR) or {}).get("released"):
        return "no owner released a sketch"
    return None


def artifacts(report: dict[str, Any], out_dir: Path) -> None:
    """Save the consumer's sketches as .npz files in ``out_dir/sketches/`` (merged.npz and one per owner),
    for ``marketplace sketch query``, each with the names of its attributes when the report has them
    (``map.attributes``); their paths go into ``report["files"]``."""
    from marketplace.protocols.sketch.consumer import release_from_dict

    sketches = (((report.get("party_details") or {}).get(CONSUMER) or {}).get("result") or {}).get("sketches")
    if not sketches:
        return
    folder = Path(out_dir) / SKETCH_FILES
    folder.mkdir(parents=True, exist_ok=True)
    names = tuple((report.get("map") or {}).get("attributes") or ())

    def save(data: dict[str, Any], name: str) -> str:
        return str(release_from_dict({**data, "attributes": names}).save(folder / f"{name}.npz"))

    files = {"merged": save(sketches["merged"], "merged")}
    for owner, data in sketches["owners"].items():
        files[owner] = save(data, owner)
    report["files"] = {"sketches": files}


# --- what each owner gives up (docs/privacy.md, "sketch") ----------------------------------------


def owner_exposure(config: ScenarioConfig, report: dict[str, Any]) -> dict[str, list]:
    """Per owner: its one release goes to the curator, which merges it and sends it on to the
    consumer; the other owners receive only the curator's request. Both observers of the release
    are bounded by the owner's own ledger (``privacy.<owner>``)."""
    from marketplace.reporting.per_owner import Exposure

    release = "this owner's sketch: noisy feature sums and a noisy count (and every answer computed from them)"
    return {
        owner: [
            Exposure("consumer", release, (owner,)),
            Exposure("curator", release, (owner,)),
            Exposure(
                "other owners", "nothing derived from this owner's rows (they receive only the curator's request)"
            ),
        ]
        for owner in party_ids(config)[1:-1]
    }


class SketchExchange(Exchange):
    """The runtime's entry to ``sketch`` (:class:`marketplace.plugins.Exchange`): this module's functions."""

    def secure_noise(self, config: ScenarioConfig) -> bool:
        """Whether the run draws its noise in ``secure`` mode (``sketch.secure``)."""
        return bool(config.sketch.secure)

    build_role = staticmethod(build_role)
    check_plan = staticmethod(check_plan)
    progress = staticmethod(progress)
    report = staticmethod(report)
    report_without_references = staticmethod(report_without_references)
    head_rows = staticmethod(head_rows)
    tables = staticmethod(tables)
    sweep_row = staticmethod(sweep_row)
    sweep_table = staticmethod(sweep_table)
    plot_sweep = staticmethod(plot_sweep)
    check_world = staticmethod(check_world)
    nothing_released = staticmethod(nothing_released)
    owner_exposure = staticmethod(owner_exposure)
    release_plan = staticmethod(release_plan)
    owner_cost = staticmethod(owner_cost)
    artifacts = staticmethod(artifacts)
    public_defaults = staticmethod(public_defaults)
    sweep_headline = sweep_headline

    def declared_view(self, config: ScenarioConfig) -> tuple[Seen, ...]:
        """What the curator, the consumer and the other owners receive of an owner's data
        (:func:`marketplace.protocols.sketch.plan.declared_view`), which the coupled differential
        test holds the protocol to."""
        return declared_view(config)
