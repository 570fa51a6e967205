"""What a run of ``sketch`` releases about each party's data, declared once: its release plan.

Each owner releases one sketch (:mod:`.release`): the sum of its records' features with Laplace noise
calibrated to the feature map's L1 sensitivity (or Gaussian noise to its L2 sensitivity, for
``sketch.mechanism: gaussian``), at eps_num = ``numerator_share`` * eps, and its row count with
Laplace noise at the rest of eps (sensitivity 1), both under add/remove-one of a row, composed by
basic composition on the owner's own ledger, within ``sketch.budget_epsilon`` (and
``sketch.budget_delta``). The curator merges the sketch and sends it on to the consumer, so both
receive it. The consumer releases nothing derived from data of its own.

Everything that needs a release's eps reads it from here: the budget check before a run, the
owner's lifetime charge, the owner's ledger entries and the noise the owner draws
(:func:`marketplace.protocols.sketch.release.noisy_sketch`), as does the library's
:func:`~marketplace.protocols.sketch.release.private_sketch` (:func:`sketch_releases`).

What the curator, the consumer and the other owners receive of an owner's data is declared here too
(:func:`declared_view`): the sketch's sum and count are the two releases, everything else they
receive is public (settings, or computed from the sketches), and with ``sketch.epsilon`` null the
exact sketch, and what is computed from it, are disclosures.
"""

from __future__ import annotations

from typing import Any, Literal

from marketplace.memo import IdentityMemo
from marketplace.privacy.lifetime.declared import Declared
from marketplace.privacy.neighbouring import add_remove_one
from marketplace.privacy.plan import Account, ReleasePlan
from marketplace.privacy.view import REPORT, RUNTIME, Seen
from marketplace.protocols.sketch.release import ACCOUNT, sketch_releases
from marketplace.roles import CONSUMER

BUDGET_KEYS = ("sketch.budget_epsilon", "sketch.budget_delta")
UNBOUNDED = "sketch.epsilon is null: the owner's exact, noise-free sketch would leave"


_SENSITIVITIES: dict[tuple[Any, ...], tuple[float, float]] = {}
"""Memo of the public map's (L1, L2) sensitivities per map settings: a run's owners share one map,
and the plan of each is built (at least) once before the run starts."""


def _sensitivities(config: Any) -> tuple[float, float]:
    from marketplace.protocols.sketch.public import public_map, record_dim

    key = (repr(config.sketch.map), record_dim(config), config.seed)
    if key not in _SENSITIVITIES:
        fmap = public_map(config)
        if len(_SENSITIVITIES) >= 64:
            _SENSITIVITIES.clear()
        _SENSITIVITIES[key] = (float(fmap.l1_sensitivity), float(fmap.l2_sensitivity))
    return _SENSITIVITIES[key]


_PLANS: dict[tuple[str, str, str, int], tuple[ReleasePlan, Declared | None]] = {}
"""Memo of each party's plan and its declared cost, by what they are made of (the party, the run's name,
its sketch settings and seed): an agent admits and builds each of its owners every session, under
the same settings but for the request id, and a plan (immutable) costs more to make than to keep."""
_PLANS_KEPT = 4096


def owner_cost(config: Any, party: str) -> Declared | None:
    """What a run of ``config`` may release about owner ``party``'s data at most: the declaration of
    its :func:`release_plan` (kept with it)."""
    return _planned(config, party)[1]


def release_plan(config: Any, party: str) -> ReleasePlan:
    """The releases of ``party``'s data in a run of ``config``: an owner's one sketch (two releases on
    its ledger), or an unbounded release when ``sketch.epsilon`` is null (the exact sketch leaves);
    nothing for the consumer."""
    return _planned(config, party)[0]


def _planned(config: Any, party: str) -> tuple[ReleasePlan, Declared | None]:
    """``party``'s plan and its declared cost, made once per distinct settings (:data:`_PLANS`)."""
    key = (party, config.name, _settings_text(config.sketch), config.seed)
    kept = _PLANS.get(key)
    if kept is None:
        plan = _release_plan(config, party)
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        kept = _PLANS[key] = (plan, plan.declared())
    return kept


_TEXTS: IdentityMemo[str] = IdentityMemo(64)
"""Each sketch section's text, made once per section object: one session's owners share one section,
and its text costs more to make than a plan to look up."""


def _settings_text(sketch: object) -> str:
    """``repr(sketch)``, made once per section object (:data:`_TEXTS`)."""
    return _TEXTS.get((sketch,), lambda: repr(sketch))


def _release_plan(config: Any, party: str) -> ReleasePlan:
    """:func:`release_plan`, made."""
    if party == CONSUMER:
        return ReleasePlan(
            party=party, what=f"sketch: nothing of the consumer's ({config.name})", relation="add/remove-one"
        )
    s = config.sketch
    owner = Account(
        name=ACCOUNT,
        dataset=party,
        neighbouring=add_remove_one(f"a row of {party}'s data"),
        theorem="basic",
        budget=(s.budget_epsilon, s.budget_delta) if s.budget_epsilon is not None else None,
        budget_keys=BUDGET_KEYS,
    )
    what = f"sketch: one sketch of {party}'s rows ({config.name})"
    if s.epsilon is None:
        return ReleasePlan(party=party, what=what, relation="add/remove-one", accounts=(owner,), unbounded=UNBOUNDED)
    l1, l2 = _sensitivities(config)
    releases = sketch_releases(
        epsilon=s.epsilon,
        mechanism=s.mechanism,
        delta=s.delta,
        numerator_share=s.numerator_share,
        l1_sensitivity=l1,
        l2_sensitivity=l2,
    )
    return ReleasePlan(party=party, what=what, relation="add/remove-one", accounts=(owner,), releases=releases)


# --- what each other party receives of an owner's data -------------------------------------------

_EXACT = (
    "sketch.epsilon is null: the scenario asks each owner for its exact sketch, without noise, and the "
    "owner hands it over in the clear (its plan declares the release unbounded)"
)

_Observer = Literal["curator", "consumer", "owners"]


def declared_view(config: Any) -> tuple[Seen, ...]:
    """What the curator, the consumer and the other owners receive of an owner's data in a run of
    ``config`` (:mod:`marketplace.privacy.view`): the other owners only the curator's request; the
    curator the owner's sketch; the consumer every owner's sketch, their merge, and the report of
    what it computed from them. The sketch's noisy sum and count are the plan's two releases, and
    what is computed from them is public. With ``sketch.epsilon`` null the sketch is exact, handed
    over in the clear: it and everything computed from it are disclosures."""
    exact = config.sketch.epsilon is None

    def sketch(observer: _Observer, field: str, what: str) -> Seen:
        """A part of an owner's sketch: a release, or in the clear when the run is not private."""
        if exact:
            return Seen(observer, field, "disclosure", f"{what}, exact: {_EXACT}")
        return Seen(observer, field, "release", f"{what}, with its noise")

    def derived(observer: _Observer, field: str, what: str) -> Seen:
        """A figure computed from the owners' sketches: public, or as exact as they are."""
        if exact:
            return Seen(observer, field, "disclosure", f"{what}, from the exact sketches: {_EXACT}")
        return Seen(observer, field, "public", what)

    return (
        *RUNTIME,
        *REPORT,
        # the other owners: the curator's request, the same for every owner
        Seen("owners", "sketch_request.map_fingerprint", "public", "the fingerprint of the public feature map"),
        Seen("owners", "sketch_request.n_features", "public", "the public map's number of features"),
        # the curator: the owner's one sketch
        sketch("curator", "sketch_release.numerator", "the owner's sum of features of its rows"),
        sketch("curator", "sketch_release.count", "the owner's row count"),
        Seen(
            "curator", "sketch_release.numerator_variance", "public", "the variance of the sum's noise, from the plan"
        ),
        Seen("curator", "sketch_release.count_variance", "public", "the variance of the count's noise, from the plan"),
        Seen("curator", "sketch_release.map_fingerprint", "public", "the fingerprint of the public feature map"),
        Seen("curator", "sketch_release.epsilon", "public", "the sketch's eps, from the settings"),
        Seen("curator", "sketch_release.delta", "public", "the sketch's delta, from the settings"),
        Seen("curator", "sketch_release.mechanism", "public", "the noise's mechanism, from the settings"),
        # the consumer: every owner's sketch and their merge
        sketch("consumer", "sketch_publication.numerators", "each owner's sum of features"),
        sketch("consumer", "sketch_publication.counts", "each owner's row count"),
        Seen("consumer", "sketch_publication.owners", "public", "the owners whose sketches are published"),
        Seen(
            "consumer", "sketch_publication.numerator_variances", "public", "each sum's noise variance, from the plan"
        ),
        Seen("consumer", "sketch_publication.count_variances", "public", "each count's noise variance, from the plan"),
        Seen("consumer", "sketch_publication.epsilons", "public", "each sketch's eps, from the settings"),
        Seen("consumer", "sketch_publication.deltas", "public", "each sketch's delta, from the settings"),
        Seen("consumer", "sketch_publication.mechanisms", "public", "each sketch's mechanism, from the settings"),
        Seen("consumer", "sketch_publication.map_fingerprint", "public", "the fingerprint of the public feature map"),
        derived("consumer", "sketch_publication.merged_numerator", "the sum of the published sums"),
        derived("consumer", "sketch_publication.merged_count", "the sum of the published counts"),
        # the consumer: the protocol's sections of the run report
        Seen("consumer", "report.map", "public", "the public feature map: its kind, features and dimension"),
        Seen("consumer", "report.queries", "public", "how many statistics the public query plan asks for"),
        derived(
            "consumer",
            "report.estimates",
            "the statistics M²M estimates from the merged sketch, and how their projections moved them",
        ),
        derived(
            "consumer",
            "report.ranking",
            "the owners ranked by the sketch MMD² of their sketches to the consumer's own target",
        ),
        derived(
            "consumer",
            "report.metrics",
            "the figures computed from the sketches: the merged sketch's signal, and those the consumer "
            "measures against its own target and test set (in a deployment the errors against the truth "
            "are absent)",
        ),
        Seen("consumer", "report.truth", "public", "absent in a deployment: nobody holds the owners' rows"),
        Seen("consumer", "report.released", "public", "the owners whose sketches were merged"),
        Seen("consumer", "report.flagged", "public", "the owners the curator excluded, and why (from their sketches)"),
        Seen("consumer", "report.files", "public", "where the consumer's sketches were saved"),
        # with the sketches exact, the runtime's common sections that hold figures computed from
        # them (public otherwise, as view.REPORT declares them) are disclosures too
        *(
            (
                derived("consumer", "report.history.rounds", "each sketch's count and the merged count so far"),
                derived(
                    "consumer", "report.party_details.curator.result.rounds", "the same history, as the curator kept it"
                ),
                derived(
                    "consumer",
                    "report.party_details.consumer.result",
                    "what the consumer computed from the sketches (the report's estimates, ranking and metrics), "
                    "and the sketches themselves",
                ),
            )
            if exact
            else ()
        ),
    )
