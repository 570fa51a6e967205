"""The `stc` exchange (docs/design.md §6): roles from the scenario, and the report of a finished run; its
terminal display is in :mod:`.display`, its sweep columns, table and plot in :mod:`.sweeps`. Roles:
:mod:`.curator`, :mod:`.owner`, :mod:`.consumer` (message kinds in :mod:`.messages`); pure cores: the
other modules of this package.

The report scores the consumer's choice T_k with the *true* sources (the runner sees every
owner's rows, for evaluation only): Cost(T, S ∪ T_k), the mean distance of T to its nearest
centre, in the public scaled space (radius 1/2). References in the same run: ClusterT (k-medoids
on T, ignoring S), non-private STC (the same solver given the true S), S alone (k = 0), and, when
asked, PrivateKmeans (the paper's baseline: the solver given DP k-means centres of S in place of S').

Several owners: the non-private references and PrivateKmeans see the owners' rows pooled into one
S. PrivateKmeans runs once on that pool at one owner's release budget (eps, or rho under zcdp), so
it is a reference at the budget each owner spends, not a release any owner made. Its noise is
numpy's, seeded from the run seed (the runner's reference, never sent), even when the owners'
releases are ``secure``.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np

from marketplace import seeds
from marketplace.data.dataset import Dataset
from marketplace.data.world import World
from marketplace.parties import owner_position, party_ids
from marketplace.plugins import Exchange
from marketplace.privacy import noise as noise_streams
from marketplace.privacy.noise import NoiseOrigin
from marketplace.privacy.view import Seen
from marketplace.protocols.stc.display import head_rows, tables
from marketplace.protocols.stc.plan import VIEW, release_plan
from marketplace.protocols.stc.rules import check_plan, public_defaults
from marketplace.protocols.stc.sweeps import plot_sweep, sweep_headline, sweep_row, sweep_table
from marketplace.reporting.absent import NOT_ASKED, REFERENCES_ABSENT, absent, why_absent
from marketplace.roles import CONSUMER, CURATOR, Role
from marketplace.scenario.config import ScenarioConfig

if TYPE_CHECKING:
    from marketplace.protocols.stc.scaling import PublicScaling


def scaling_of(config: ScenarioConfig, dim: int) -> PublicScaling:
    """The public map into the ball of radius 1/2, from the scenario's box ``stc.domain``."""
    from marketplace.protocols.stc import PublicScaling

    domain = config.stc.domain
    if domain is None:
        raise ValueError(
            "stc.domain: expected the public box {low, high} of the data (it is never taken from the data)"
        )
    low, high = (
        np.broadcast_to(np.asarray(v, dtype=np.float64), (dim,)) if len(v) in (1, dim) else None
        for v in (domain.low, domain.high)
    )
    if low is None or high is None:
        raise ValueError(
            f"stc.domain: low and high must have 1 or {dim} values (the data has {dim} features), "
            f"got {len(domain.low)} and {len(domain.high)}"
        )
    if not np.all(high > low):
        raise ValueError("stc.domain: every high must exceed its low")
    return PublicScaling.for_box(low, high)


def check_world(config: ScenarioConfig, world: World) -> None:
    """The box must fit the data's width (raises ValueError "stc.domain: ..."), and NAS needs t
    source points at every owner (else that owner would refuse its release mid-run). A world that
    holds no owner's rows (a marketplace described by its public schema) cannot say how many each
    holds: there every owner checks its own when it starts (:func:`build_role`)."""
    scaling_of(config, world.dim)
    if config.stc.release == "nas" and world.central:
        short = [f"owner-{i + 1} ({len(o)})" for i, o in enumerate(world.owners) if len(o) < config.stc.t]
        if short:
            raise ValueError(
                f"stc.t: NAS averages t = {config.stc.t} source points per target point, but "
                f"{', '.join(short)} hold fewer rows; lower stc.t"
            )


def build_role(
    config: ScenarioConfig, party: str, world: World, owner_data: Dataset | None, noise: NoiseOrigin | None = None
) -> Role:
    from marketplace.protocols.stc.consumer import StcConsumer
    from marketplace.protocols.stc.curator import StcCurator
    from marketplace.protocols.stc.owner import StcOwner

    if party == CURATOR:
        return StcCurator(
            scenario_name=config.name, owners=tuple(party_ids(config)[1:-1]), dim=world.dim, settings=config.stc
        )
    scaling = scaling_of(config, world.dim)
    if party == CONSUMER:
        return StcConsumer(
            scenario_name=config.name,
            target=world.validation,
            scaling=scaling,
            settings=config.stc,
            solver_seed=seeds.derive_int(config.seed, "stc.solver"),
            own_evaluation=config.data.schema_only,
        )
    data = owner_data if owner_data is not None else world.owners[owner_position(config, party)]
    if data.X.shape[1] != world.dim:
        raise ValueError(f"{party}: data file has {data.X.shape[1]} features, the scenario's data has {world.dim}")
    if config.stc.release == "nas" and len(data) < config.stc.t:
        raise ValueError(
            f"{party}: stc.t = {config.stc.t}: NAS averages t source points per target point, but {party} "
            f"holds {len(data)} rows; lower stc.t or bring more rows"
        )
    return StcOwner(
        party_id=party,
        scenario_name=config.name,
        data=data,
        scaling=scaling,
        settings=config.stc,
        plan=release_plan(config, party),
        seed=noise_streams.derive(config.seed, f"stc.noise.{party}", noise),
    )


def progress(config: ScenarioConfig, curator: Role) -> tuple[int, int]:
    return curator.progress(), config.parties.owners


# --- the report --------------------------------------------------------------------------------


def _scaled(config: ScenarioConfig, world: World) -> tuple[np.ndarray, np.ndarray]:
    scaling = scaling_of(config, world.dim)
    T = scaling.apply(world.validation.X, clip=True)
    S = scaling.apply(np.concatenate([o.X for o in world.owners]), clip=True)
    return T, S


def report(config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from marketplace.protocols.stc import stc_cost

    if not world.central:
        return _report_without_world(config, results)
    s = config.stc
    T, S = _scaled(config, world)
    k = min(s.k, len(T))
    options = {"max_candidates": s.max_candidates}
    metrics = _scored_choice(config, T, S, results)
    refs: dict[str, Any] = {"source_only": {"cost": float(stc_cost(T, S))}}
    if "cluster_t" in s.baselines:
        refs["cluster_t"] = _nonprivate_reference("cluster_t", config.seed, T, S, k, options)
    if "nonprivate_stc" in s.baselines:
        refs["nonprivate_stc"] = _nonprivate_reference("nonprivate_stc", config.seed, T, S, k, options)
    if "private_kmeans" in s.baselines:
        refs["private_kmeans"] = _private_kmeans_reference(config, T, S, k, options)
    metrics["baselines"] = refs
    return _sections(config, results, metrics)


def report_without_references(
    config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The report of a served session that did not ask for the central references
    (:meth:`marketplace.plugins.Exchange.report_without_references`): the choice scored with the true
    S as :func:`report` scores it (one nearest-centre pass), and the references (source_only,
    cluster_t, nonprivate_stc, private_kmeans: each a solver run on everyone's rows) stated absent
    (:data:`~marketplace.reporting.absent.NOT_ASKED`)."""
    if not world.central:  # nobody holds the true S: the figures are absent for that reason
        return report(config, world, results)
    T, S = _scaled(config, world)
    metrics = _scored_choice(config, T, S, results)
    metrics["baselines"] = absent(NOT_ASKED)
    return {**_sections(config, results, metrics), REFERENCES_ABSENT: {"metrics.baselines": NOT_ASKED}}


def _scored_choice(
    config: ScenarioConfig, T: np.ndarray, S: np.ndarray, results: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """``metrics`` without its baselines: the consumer's choice scored with the true S."""
    from marketplace.protocols.stc import selection_cost

    choice = (results.get(CONSUMER) or {}).get("choice")
    return {
        "k": min(config.stc.k, len(T)),
        "target_size": len(T),
        "source_size": len(S),
        "cost": None if choice is None else float(selection_cost(T, S, np.array(choice["indices"]))),
        "estimated_cost": None if choice is None else choice["estimated_cost"],
        "released_centers": None if choice is None else choice["released_centers"],
    }


def _sections(config: ScenarioConfig, results: dict[str, dict[str, Any]], metrics: dict[str, Any]) -> dict[str, Any]:
    """The report's sections around ``metrics`` (its figures set aside when no owner released)."""
    choice = (results.get(CONSUMER) or {}).get("choice")
    curator = results.get(CURATOR) or {}
    _set_aside_without_releases(metrics, choice, curator)
    return {
        "privacy": _privacy(config, results),
        "parsimony": curator.get("parsimony"),
        "metrics": metrics,
        "choice": None if choice is None else choice["indices"],
        "end_reason": curator.get("end_reason"),
        "history": history(config, curator.get("rounds") or []),
    }


def _set_aside_without_releases(
    metrics: dict[str, Any],
    choice: dict[str, Any] | None,
    curator: dict[str, Any],
    keys: tuple[str, ...] = ("cost", "estimated_cost", "released_centers"),
) -> None:
    """When no owner's release reached the consumer, its choice used T alone: not the protocol's
    result, so its figures (``keys``) move to ``without_owner_releases``, and ``note`` says why."""
    if choice is not None and not curator.get("released"):
        aside = {k: metrics[k] for k in keys}
        metrics.update(
            {k: None for k in keys},
            without_owner_releases=aside,
            note="not the protocol's result: no owner's release reached the consumer, so its choice "
            "used T alone (see without_owner_releases)",
        )


def _privacy(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    privacy = {
        p: (results.get(p) or {}).get("privacy") or {"note": "no release recorded (dropped out or failed)"}
        for p in party_ids(config)[1:-1]
    }
    privacy[CONSUMER] = {
        "guarantee": "none",
        "note": "T is sent to the owners by design (it is what the consumer wants labelled)",
    }
    return privacy


def _report_without_world(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The report of a marketplace described by its public schema, where nobody holds the owners'
    true S (:mod:`marketplace.reporting.absent`): the choice scored as the consumer can score it, from
    its T and the owners' releases S' alone (``estimated_cost`` Cost(T, S' ∪ T_k),
    ``released_only_cost`` Cost(T, S'), ``chosen_only_cost`` Cost(T, T_k)); absent: the cost under the
    true S, the source size, and the references, every one of which is scored with (or built
    from) S."""
    s = config.stc
    consumer = results.get(CONSUMER) or {}
    curator = results.get(CURATOR) or {}
    choice = consumer.get("choice")
    own = consumer.get("own_evaluation") or {}
    target_size = consumer.get("target_size")
    missing = {
        "metrics.cost": why_absent(
            "the owners' true source set S, to score the choice with (Cost(T, S ∪ T_k)); "
            "metrics.estimated_cost is the consumer's own score, with the releases S' in place of S"
        ),
        "metrics.source_size": (
            "not reported: each owner's rows, and their count, are its own (its own report keeps "
            "its count, which never leaves it)"
        ),
        "metrics.baselines": why_absent(
            "the owners' true source set S (source_only, cluster_t, nonprivate_stc and "
            "private_kmeans are scored with S, and some built from it)"
        ),
    }
    metrics: dict[str, Any] = {
        "k": None if target_size is None else min(s.k, int(target_size)),
        "target_size": target_size,
        "source_size": None,
        "cost": None,
        "estimated_cost": None if choice is None else choice["estimated_cost"],
        "released_centers": None if choice is None else choice["released_centers"],
        "released_only_cost": own.get("released_only_cost"),
        "chosen_only_cost": own.get("chosen_only_cost"),
        "baselines": absent(missing["metrics.baselines"]),
        "measured_by": "the consumer, from its own target T and the owners' releases S' (estimated_cost, "
        "released_only_cost, chosen_only_cost), as its result states them: nobody holds the true S",
    }
    _set_aside_without_releases(
        metrics, choice, curator, keys=("estimated_cost", "released_centers", "released_only_cost", "chosen_only_cost")
    )
    return {
        "privacy": _privacy(config, results),
        "parsimony": curator.get("parsimony"),
        "metrics": metrics,
        "choice": None if choice is None else choice["indices"],
        "end_reason": curator.get("end_reason"),
        "history": history(config, curator.get("rounds") or []),
        REFERENCES_ABSENT: missing,
    }


def history(config: ScenarioConfig, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's history: one record per owner's release handed to the consumer, in owner order
    (stc has one round: every owner releases once)."""
    from marketplace.reporting.history import history_section

    cost = "eps" if config.stc.privacy.notion == "dp" else "rho"
    return history_section(
        rounds,
        x="release",
        columns=["release", "owner", "centers", "centers_total", "cost"],
        plot=["centers", "centers_total"],
        about={
            "release": "releases joined so far (one record per owner's release, in owner order: the order they arrived "
            "in follows timing and is not recorded)",
            "owner": "the owner whose release this record joins",
            "centers": "private centres in that release",
            "centers_total": "private centres the consumer gets so far",
            "cost": f"that release's privacy cost ({cost}, each owner's guarantee for its own points)",
        },
    )


def nothing_released(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> str | None:
    """Why no owner's private release reached the consumer, or None."""
    if not (results.get(CURATOR) or {}).get("released"):
        return "no owner released its centres (stc_release)"
    return None


_REFERENCES: dict[tuple, dict[str, float]] = {}
"""Memo of the non-private references: they depend only on the data, k, the seed and the solver
options, not on the privacy settings, so a sweep over eps, rho or the release computes each once."""


def _nonprivate_reference(
    name: str, seed: int, T: np.ndarray, S: np.ndarray, k: int, options: dict[str, Any]
) -> dict[str, float]:
    """ClusterT (k-medoids on T alone) or non-private STC (the solver given the true S), scored
    against the true S."""
    from marketplace.protocols.stc import cluster_t, nonprivate_stc, selection_cost

    key = (
        name,
        seed,
        k,
        tuple(sorted(options.items())),
        T.shape,
        S.shape,
        hashlib.sha256(T.tobytes()).digest(),
        hashlib.sha256(S.tobytes()).digest(),
    )
    if key not in _REFERENCES:
        if name == "cluster_t":
            picked = cluster_t(T, k, rng=seeds.rng(seed, "stc.baseline.cluster_t"), **options).indices
            cost = float(selection_cost(T, S, picked))
        else:
            cost = float(nonprivate_stc(S, T, k, rng=seeds.rng(seed, "stc.baseline.nonprivate"), **options).cost)
        if len(_REFERENCES) >= 64:
            _REFERENCES.clear()
        _REFERENCES[key] = {"cost": cost}
    return dict(_REFERENCES[key])


def _private_kmeans_reference(
    config: ScenarioConfig, T: np.ndarray, S: np.ndarray, k: int, options: dict[str, Any]
) -> dict[str, Any]:
    """The PrivateKmeans baseline: DP k-means with ``stc.kmeans_clusters`` clusters (default k) on
    the pooled S, at one owner's budget; the solver takes its centres as the free set, and the
    choice is scored with the true S."""
    from marketplace.protocols.stc import selection_cost, solve_stc
    from marketplace.protocols.stc.private_kmeans import private_kmeans

    s = config.stc
    budget = {"eps": s.privacy.epsilon} if s.privacy.notion == "dp" else {"rho": s.privacy.rho}
    release = private_kmeans(
        S,
        s.kmeans_clusters or k,
        iterations=s.kmeans_iterations,
        rng=seeds.rng(config.seed, "stc.baseline.private_kmeans"),
        **budget,
    )
    picked = solve_stc(
        T, release.centers, k, rng=seeds.rng(config.seed, "stc.baseline.private_kmeans.solver"), **options
    ).indices
    return {"cost": float(selection_cost(T, S, picked)), "centers": int(release.centers.shape[0])}


# --- what each owner gives up (docs/privacy.md, "stc") -------------------------------------------


def owner_exposure(config: ScenarioConfig, report: dict[str, Any]) -> dict[str, list]:
    """Per owner: its one private summary S' goes to the curator, which checks it and forwards it
    to the consumer; the other owners receive only T. Both observers of S' are bounded by the
    owner's own ledger (``privacy.<owner>``)."""
    from marketplace.reporting.per_owner import Exposure

    release = "this owner's private summary S' of its source set for the consumer's target points"
    return {
        owner: [
            Exposure("consumer", release, (owner,)),
            Exposure("curator", release + " (it checks and forwards it)", (owner,)),
            Exposure("other owners", "nothing derived from this owner's rows (they receive only the target points T)"),
        ]
        for owner in party_ids(config)[1:-1]
    }


class StcExchange(Exchange):
    """The runtime's entry to ``stc`` (:class:`marketplace.plugins.Exchange`): this module's functions."""

    def secure_noise(self, config: ScenarioConfig) -> bool:
        """Whether the run draws its noise in ``secure`` mode (``stc.privacy.secure``)."""
        return bool(config.stc.privacy.secure)

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
    public_defaults = staticmethod(public_defaults)
    sweep_headline = sweep_headline

    def declared_view(self, config: ScenarioConfig) -> tuple[Seen, ...]:
        """What the curator, the consumer and the other owners receive of an owner's data
        (:data:`marketplace.protocols.stc.plan.VIEW`), which the coupled differential test holds the
        protocol to."""
        return VIEW
