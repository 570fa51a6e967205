"""The `summarize` exchange (docs/design.md §3): roles from the scenario, and the report of a finished
run; its terminal display is in ``display.py``, its sweep columns, table and plot in ``sweeps.py``. The
roles are this package's ``curator.py`` (and ``private_curator.py``), ``owner.py`` and ``consumer.py``;
the pure cores are its other modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from marketplace import seeds
from marketplace.data.dataset import Dataset
from marketplace.data.world import World
from marketplace.parties import party_ids, party_index
from marketplace.plugins import Exchange
from marketplace.privacy import noise as noise_streams
from marketplace.privacy.noise import NoiseOrigin
from marketplace.protocols.summarize.display import head_rows, tables
from marketplace.protocols.summarize.metrics import increase_pct
from marketplace.protocols.summarize.public import public_features
from marketplace.protocols.summarize.rules import check_plan, release_plan, schedule_of
from marketplace.protocols.summarize.sweeps import owner_ledgers, plot_sweep, sweep_headline, sweep_row, sweep_table
from marketplace.reporting.absent import NOT_ASKED, REFERENCES_ABSENT, absent, why_absent
from marketplace.roles import CONSUMER, CURATOR, Role
from marketplace.scenario.config import ScenarioConfig

if TYPE_CHECKING:
    from marketplace.privacy.view import Seen


def build_role(
    config: ScenarioConfig, party: str, world: World, owner_data: Dataset | None, noise: NoiseOrigin | None = None
) -> Role:
    from marketplace.protocols.summarize.consumer import SummarizeConsumer
    from marketplace.protocols.summarize.curator import SummarizeCurator
    from marketplace.protocols.summarize.owner import SummarizeOwner
    from marketplace.protocols.summarize.private_curator import PrivateSummarizeCurator

    features = public_features(config, world.dim)
    s = config.summarize
    if party == CURATOR:
        common = dict(
            scenario_name=config.name,
            owners=tuple(party_ids(config)[1:-1]),
            features=features,
            seed_set=world.seed_set.X,
            dim=world.dim,
            rounds=s.rounds,
            verify_tolerance=s.verify_tolerance,
            trust=s.curator,
            spending_budget=s.spending_budget,
        )
        if s.privacy.enabled:
            schedule = schedule_of(s.privacy, s.features, s.rounds, config.data.seed_set.size)
            return PrivateSummarizeCurator(
                schedule=schedule, seed=noise_streams.derive(config.seed, "summarize.curator.noise", noise), **common
            )
        return SummarizeCurator(**common)
    if party == CONSUMER:
        return SummarizeConsumer(
            scenario_name=config.name,
            validation=world.validation,
            test=world.test,
            seed_set=world.seed_set.X,
            gamma=s.gamma,
            svm_c=s.svm_c,
            svm_seed=seeds.derive_int(config.seed, "summarize.svm"),
            features=features,
            trust=s.curator,
            own_evaluation=config.data.schema_only,
        )
    number = party_index(config, party)  # O(1), so building K owners stays O(K)
    if number is None:  # parties.build_role checked the id
        raise ValueError(f"{party!r} is not a party of this run")
    index = number - 1
    data = owner_data if owner_data is not None else world.owners[index]
    if data.X.shape[1] != world.dim:
        raise ValueError(f"{party}: data file has {data.X.shape[1]} features, the scenario's data has {world.dim}")
    terms = config.lifetime.terms_of(party)
    return SummarizeOwner(
        party_id=party,
        scenario_name=config.name,
        data=data,
        features=features,
        trust=s.curator,
        feature_dtype=s.owner_features,
        price=0.0 if terms is None else terms.price,
        sale_cap=None if terms is None else _request_cap(terms, s.rounds),
    )


def _request_cap(terms: Any, rounds: int) -> int | None:
    """The points an owner without a ledger sells in one run under ``terms``: its caps, within this run
    alone (its lifetime count needs a ledger), None when it states none below the run's rounds."""
    cap = terms.cap(rounds)
    return cap if cap < rounds else None


def declared_view(config: ScenarioConfig) -> tuple[Seen, ...]:
    """What the curator, the consumer and the other owners receive of an owner's data in a run of
    ``config``, each field public, a release or a disclosure
    (:func:`marketplace.protocols.summarize.plan.declared_view`): the coupled differential test holds
    the protocol to it, and docs/privacy.md's table is made from it."""
    from marketplace.protocols.summarize.plan import declared_view as view

    return view(config)


def points_for_sale(config: ScenarioConfig, party: str) -> int:
    """The most points one run can take from an owner: one per round it is asked in. The private form
    counts a round that no asked owner delivered in as one of its R (a fresh draw would be an uncharged
    selection); the non-private form runs such a round again, so there an owner's own cap, not the
    rounds, bounds what it sells."""
    return config.summarize.rounds


def progress(config: ScenarioConfig, curator: Role) -> tuple[int, int]:
    return curator.progress(), config.summarize.rounds


# --- the report --------------------------------------------------------------------------------


def report(config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    from marketplace.protocols.summarize.evaluate import (
        baselines,
        central_replay,
        exclusion_rounds,
        mmd2_by_round,
        non_private_greedy,
    )

    curator = results.get(CURATOR) or {}
    consumer = results.get(CONSUMER) or {}
    selection = curator.get("selection", [])
    metrics = dict(consumer.get("metrics") or {"mmd2": None, "accuracy": None, "mmd2_with_seed_set": None})
    if not world.central:
        return _report_without_world(config, curator, consumer, selection, metrics)
    metrics["baselines"] = baselines(config, world)
    private = config.summarize.privacy.enabled
    if private:
        reference = metrics["baselines"]["non_private_greedy"] = non_private_greedy(config, world)
        # what privacy costs against the greedy it protects, like with like: both with the public seed
        # set (the objective greedy minimizes, the paper's MMD^2), and both summaries alone
        increase = increase_pct(metrics.get("mmd2_with_seed_set"), reference.get("mmd2_with_seed_set"))
        if increase is not None:
            metrics["mmd2_with_seed_set_increase_over_greedy_pct"] = increase
        increase = increase_pct(metrics.get("mmd2"), reference.get("mmd2"))
        if increase is not None:
            metrics["mmd2_alone_increase_over_greedy_pct"] = increase
    return _sections(
        config,
        curator,
        metrics,
        central_replay(config, world, selection, exclusion_rounds(curator)),
        history(curator.get("rounds") or [], *mmd2_by_round(config, world, selection, _sent_rows(results))),
    )


def report_without_references(
    config: ScenarioConfig, world: World, results: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """The report of a served session that did not ask for the central references
    (:meth:`marketplace.plugins.Exchange.report_without_references`): the summary's quality as the
    consumer measured it, and, stated absent (:data:`~marketplace.reporting.absent.NOT_ASKED`), what
    :func:`report` computes on the whole world: the baselines (with a private run's non-private greedy
    and the increases over it), the central replay of a non-private run and the MMD^2 after each round."""
    if not world.central:  # nobody holds every row: the figures are absent for that reason
        return report(config, world, results)
    curator = results.get(CURATOR) or {}
    consumer = results.get(CONSUMER) or {}
    selection = curator.get("selection", [])
    metrics = dict(consumer.get("metrics") or {"mmd2": None, "accuracy": None, "mmd2_with_seed_set": None})
    missing = {"metrics.baselines": NOT_ASKED}
    metrics["baselines"] = absent(NOT_ASKED)
    if config.summarize.privacy.enabled:
        for key in ("mmd2_with_seed_set_increase_over_greedy_pct", "mmd2_alone_increase_over_greedy_pct"):
            missing[f"metrics.{key}"] = "not computed: it compares with the non-private greedy (metrics.baselines)"
        replay = {
            "applicable": False,
            "reason": "a private run's releases are noisy; no replay of its rule can match them",
        }
    else:
        missing["checks.central_replay"] = NOT_ASKED
        replay = {"applicable": False, "reason": NOT_ASKED}
    missing["history.mmd2"] = NOT_ASKED
    rows = history(curator.get("rounds") or [], [None] * len(selection), NOT_ASKED)
    return {**_sections(config, curator, metrics, replay, rows), REFERENCES_ABSENT: missing}


def _sent_rows(results: dict[str, dict[str, Any]]) -> dict[str, list[int]]:
    """Each owner's serial -> row map (its result's ``sent_rows``), where ``results`` hold it: only in a
    simulation, whose runner saw what every owner kept to itself; a deployment's owners keep theirs."""
    return {
        party: result["sent_rows"]
        for party, result in results.items()
        if isinstance(result, dict) and isinstance(result.get("sent_rows"), list)
    }


def _sections(
    config: ScenarioConfig,
    curator: dict[str, Any],
    metrics: dict[str, Any],
    replay: dict[str, Any],
    rows: dict[str, Any],
) -> dict[str, Any]:
    """The report's sections, whoever computed the metrics, the replay and the history's MMD^2."""
    return {
        "privacy": _privacy(config, curator),
        "parsimony": curator.get("parsimony"),
        "selection": curator.get("selection", []),
        "value": curator.get("value"),
        "metrics": metrics,
        "flagged": curator.get("flagged", {}),
        "end_reason": curator.get("end_reason"),
        "checks": {"central_replay": replay},
        "auction": curator.get("auction"),
        "history": rows,
        **({"sale": curator["sale"]} if curator.get("sale") else {}),
    }


def _privacy(config: ScenarioConfig, curator: dict[str, Any]) -> dict[str, Any]:
    if config.summarize.privacy.enabled:
        return curator.get("privacy", {})
    return {
        p: {"guarantee": "none", "note": "non-private protocol: points and exact embeddings are revealed"}
        for p in party_ids(config)
        if p != CURATOR
    }


def _report_without_world(
    config: ScenarioConfig, curator: dict[str, Any], consumer: dict[str, Any], selection: list, metrics: dict[str, Any]
) -> dict[str, Any]:
    """The report of a marketplace described by its public schema, where nobody holds every
    party's rows (:mod:`marketplace.reporting.absent`): the summary's quality as the consumer measured
    it on its own D_v and test set (``metrics``, and the MMD^2 after each round in ``history``), and
    every reference that needs everyone's rows stated absent: the baselines (uniform sampling, the
    exact-kernel central greedy, and in a private run the non-private greedy the privacy cost is
    measured against) and the central replay of the protocol's rule."""
    private = config.summarize.privacy.enabled
    own = consumer.get("own_evaluation") or {}
    missing: dict[str, str] = {
        "metrics.baselines": why_absent(
            "every owner's rows and the consumer's D_v in one place (the references: uniform sampling, the "
            "exact-kernel "
            "central greedy"
            + (", the non-private greedy a private run's cost is measured against)" if private else ")")
        )
    }
    missing.update(own.get("absent") or {})
    metrics["baselines"] = absent(missing["metrics.baselines"])
    metrics["measured_by"] = (
        "the consumer, on its own D_v (mmd2, mmd2_with_seed_set) and test set (accuracy), as its "
        "result states them: nobody else holds those rows"
    )
    if private:  # not applicable in any private run, rows or not
        for key in ("mmd2_with_seed_set_increase_over_greedy_pct", "mmd2_alone_increase_over_greedy_pct"):
            missing[f"metrics.{key}"] = (
                "not computed: it compares with the non-private greedy, which is absent (metrics.baselines)"
            )
        replay = {
            "applicable": False,
            "reason": "a private run's releases are noisy: no replay of its rule can match them",
        }
    else:
        missing["checks.central_replay"] = why_absent(
            "every owner's rows and the consumer's D_v, to replay the protocol's rule in one place"
        )
        replay = {"applicable": False, "reason": missing["checks.central_replay"]}
    by_round = own.get("mmd2_by_round")
    if isinstance(by_round, list) and len(by_round) == len(selection):
        rows = history(
            curator.get("rounds") or [],
            by_round,
            about_mmd2="exact-kernel MMD^2 of the summary so far (without the seed set) to the consumer's "
            "D_v, computed by the consumer from the summary it received, in selection order, and "
            "its own D_v (nobody else holds D_v); the last round's is metrics.mmd2",
        )
    else:
        missing["history.mmd2"] = (
            "not computed: the consumer reported no MMD^2 by round (it computes it from the "
            "summary it received and its own D_v, which nobody else holds)"
        )
        rows = history(
            curator.get("rounds") or [],
            [None] * len(selection),
            missing["history.mmd2"],
            about_mmd2="exact-kernel MMD^2 of the summary so far (without the seed set) to the consumer's D_v, "
            "which only the consumer can compute (it alone holds D_v)",
        )
    return {**_sections(config, curator, metrics, replay, rows), REFERENCES_ABSENT: missing}


HISTORY_ABOUT = {
    "round": "the round (one record per round that added a point to D_s)",
    "mmd2": "exact-kernel MMD^2 of the summary so far (without the seed set) to the consumer's D_v, computed by the "
    "runner from the selection order and the world's rows; the last round's is metrics.mmd2",
    "requests": "owners asked for a point since the previous round's record (requests sent)",
    "summary_size": "points in the summary so far, |D_s| (the public seed set not counted)",
    "owners_active": "owners still taking part (not dropped out, not flagged)",
    "messages_sent": "protocol messages the curator had sent by the end of the round (this round's opening and "
    "requests included; heartbeats not)",
    "bytes_sent": "the bytes of those messages (whole frames)",
}


def history(
    rounds: list[dict[str, Any]],
    mmd2: list[float | None],
    why_unknown: str | None = None,
    *,
    about_mmd2: str | None = None,
) -> dict[str, Any]:
    """The report's per-round history: the curator's records (:meth:`SummarizeCurator._record_round`)
    with the MMD^2 of the summary after each round (the runner's, or ``about_mmd2`` says whose). A
    private run adds one column per privacy ledger, ``eps[<ledger>]``: the ledger's eps after the round."""
    from marketplace.reporting.history import history_section

    records = [dict(r, mmd2=mmd2[i] if i < len(mmd2) else None) for i, r in enumerate(rounds)]
    eps = list(dict.fromkeys(k for r in rounds for k in r if k.startswith("eps[")))
    about = HISTORY_ABOUT | {k: f"eps spent so far on the {k[4:-1]} ledger (as the ledger composes it)" for k in eps}
    if about_mmd2:
        about["mmd2"] = about_mmd2
    if why_unknown:
        about["mmd2"] += f"; unknown in this run: {why_unknown}"
    columns = ["round", "mmd2", "requests", "summary_size", "owners_active", *eps, "messages_sent", "bytes_sent"]
    return history_section(
        records, x="round", columns=columns, about=about, plot=["mmd2", "requests", *eps, "bytes_sent"]
    )


def nothing_released(config: ScenarioConfig, results: dict[str, dict[str, Any]]) -> str | None:
    """Why the run's summary holds nothing from the owners (no round selected a point), or None."""
    selection = (results.get(CURATOR) or {}).get("selection") or []
    if config.summarize.rounds > 0 and not selection:
        return f"the summary is empty (0 of {config.summarize.rounds} rounds selected a point)"
    return None


# --- what each owner gives up (docs/privacy.md, "Who observes what") ----------------------------


def owner_exposure(config: ScenarioConfig, report: dict[str, Any]) -> dict[str, list]:
    """Per owner: what the consumer, the curator and the other owners receive of its data, and
    which ledgers bound it. Towards the other owners: every ledger of the run but the consumer's
    ``consumer:D_v`` (read generically, each with the scope it states: :func:`owner_ledgers`)."""
    from marketplace.reporting.per_owner import Exposure

    private = config.summarize.privacy.enabled
    privacy = report.get("privacy") or {}
    consumer = Exposure(
        "consumer",
        "the points of this owner that enter D_s, in the clear",
        (),
        (
            "those points: handing them to the consumer is the sale",
            "which of its points enter D_s: the selection depends on every owner's data and is not private",
        ),
    )
    curator = Exposure(
        "curator",
        "every bid of this owner and every point it asks this owner for",
        (),
        (
            "all of it: the curator is trusted; how many points it saw is reported (parsimony), which is not a DP "
            "guarantee",
        ),
    )
    out = {}
    for owner in (p for p in party_ids(config) if p.startswith("owner-")):
        if private:
            ledgers = tuple(owner_ledgers(privacy))
            others = Exposure(
                "other owners",
                "each round's g_l (a DP release of D_s's mean embedding) and q = |D_s|, whether a request "
                "reaches them, and the timing of those messages",
                ledgers,
                (
                    "this owner's points end to end: which points enter D_s, and so later states, bids and g_l, depend "
                    "on every owner's data; each ledger holds only within the scope it states",
                    "the curator's computation time and network timing beyond the count of requests",
                ),
            )
        else:
            others = Exposure(
                "other owners",
                "each round's exact mean embedding of D_s and q = |D_s|, and whether a request reaches them",
                (owner,),
            )
        out[owner] = [consumer, curator, others]
    return out


class SummarizeExchange(Exchange):
    """The runtime's entry to ``summarize`` (:class:`marketplace.plugins.Exchange`): this module's functions."""

    def secure_noise(self, config: ScenarioConfig) -> bool:
        """Whether the run draws its noise in ``secure`` mode (``summarize.privacy.secure``)."""
        return bool(config.summarize.privacy.secure)

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
    nothing_released = staticmethod(nothing_released)
    owner_exposure = staticmethod(owner_exposure)
    release_plan = staticmethod(release_plan)
    declared_view = staticmethod(declared_view)
    points_for_sale = staticmethod(points_for_sale)
    sweep_headline = sweep_headline
