"""The release plan of `summarize` (:mod:`marketplace.privacy.plan`): what a run may release about
each owner's data and about the consumer's D_v, built by
:meth:`~marketplace.protocols.summarize.private_curator.PrivateSchedule.plans` (the one place the
split of eps between the releases is computed) and read by the exchange's ``release_plan``.

An owner's plan has two accounts, each one ledger the curator keeps: ``auction`` (the composed
auction's selections, one per round, replace-one keeping the owner's number of distinct points,
basic composition) and ``D_s`` (the g_l releases of the summary: MWEM's ``h2.select`` and
``h2.measure`` steps, or one Gaussian release per later round). The consumer's has one,
``consumer:D_v`` (g~). The budget check before a run (``summarize.privacy.budget_summary`` and
``budget_validation``), each party's lifetime charge, the ledgers the curator records on and the
noise each release is calibrated with all come from these plans.

Two things :class:`~marketplace.privacy.plan.ReleasePlan` does not do, done here by
:class:`SummarizePlan`: with an empty seed set, D_s's first private MWEM release (T_init iterations
at ``eps_first_round``) and the later ones (``eps_later_rounds``) are recorded under the same
mechanism names, ``h2.select`` and ``h2.measure``, at different costs, where a plan names each
release once (:class:`LedgerRelease`: a plan name of its own, the ledger's name in ``records``); and
an owner's plan that releases nothing noisy (one round, ``eps_auction`` 0) still declares the
negligible ``min_eps`` that keeps its sale on the owner's ledger.

What the curator, the consumer and the other owners receive of an owner's data is declared here too
(:func:`declared_view`): g~, each g_l and the auction's selections are releases (the curator passes
each output through its plan, or the selection through the curator's coupling key), the exact bids
and asked-for points the trusted curator is sent, the sold points the consumer gets and what it
computes from them are disclosures, and the rest is public; in the non-private form the exact g_l
and whom the exact best-bidder rule asks (and what follows from it) are disclosures.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Literal

from marketplace.privacy.ledger import PrivacyLedger
from marketplace.privacy.lifetime.cost import Cost
from marketplace.privacy.lifetime.declared import Declared
from marketplace.privacy.neighbouring import REPLACE_ONE
from marketplace.privacy.plan import Account, PlanExceeded, Release, ReleasePlan
from marketplace.privacy.steps import Step
from marketplace.privacy.view import REPORT, RUNTIME, Seen

__all__ = [
    "BUDGET_SUMMARY_KEY",
    "BUDGET_VALIDATION_KEY",
    "LedgerRelease",
    "MIN_EPS",
    "NOT_COVERED",
    "SummarizePlan",
    "declared_view",
]

BUDGET_VALIDATION_KEY = "summarize.privacy.budget_validation"
BUDGET_SUMMARY_KEY = "summarize.privacy.budget_summary"
NOT_COVERED = (
    "the points sold (in the clear), what the choice of a sold point (its best remaining by the bid) reveals of its "
    "unsold points, and which points enter D_s"
)
"""What leaves an owner that its declared cost does not bound (docs/privacy.md)."""
NON_PRIVATE_OWNER = "the non-private form broadcasts D_s's exact mean embedding and asks the exact best bidder"
NON_PRIVATE_CONSUMER = "the non-private form sends D_v's mean embedding in the clear"
MIN_EPS = 1e-12
"""An owner's declared eps when nothing noisy is released (one round, eps_auction 0): its sale stays on
its ledger (an overstatement of the cost, never of the privacy)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class LedgerRelease(Release):
    """A release its ledger records under ``records``, a mechanism name another release of the
    plan records too at another cost (D_s's first MWEM release and its later ones, both
    ``h2.select`` / ``h2.measure``); ``name`` is its own, in the plan."""

    records: str = ""

    def step(self, count: int | None = None) -> Step:
        return dataclasses.replace(super().step(count), mechanism=self.records or self.name)


def _signature(step: Step) -> tuple[Any, ...]:
    return step.mechanism, step.eps, step.delta, step.rho, step.gaussian


class SummarizePlan(ReleasePlan):
    """A :class:`ReleasePlan` that knows :class:`LedgerRelease` and declares ``min_eps`` for a plan
    without releases (see the module docstring); its totals are composed once per plan."""

    def spend(self, ledger: PrivacyLedger, name: str, count: int | None = None) -> Step:
        release = self.release(name)
        step = release.step(count)
        if sum(r.step().mechanism == step.mechanism for r in self.releases) == 1:
            return super().spend(ledger, name, count)
        # releases recorded under one mechanism name (LedgerRelease): the ledger tells them apart by
        # their cost only, so identical steps of several together stay within what the plan declares
        # for all of them
        same = _signature(step)
        planned = sum(r.count for r in self.releases if _signature(r.step()) == same)
        done = sum(s.count for s in ledger.steps if _signature(s) == same)
        if done + step.count > planned:
            raise PlanExceeded(
                f"{self.party}: release {name!r} ({step.mechanism}) planned {planned} time(s) at this cost, asked for "
                f"{done + step.count}: every release is charged as planned, never more"
            )
        if step.count:
            ledger.spend(step.eps or 0.0, step.delta, mechanism=step.mechanism, count=step.count)
        return step

    def totals(self) -> dict[str, Any]:
        return dict(_totals(self.accounts, self.releases))

    def declared(self) -> Declared | None:
        if not self.releases and not self.unbounded and self.min_eps > 0:
            what = self.what + (f"; not covered: {self.not_covered}" if self.not_covered else "")
            return Declared(what, Cost(eps=self.min_eps), self.relation)
        return super().declared()


@functools.lru_cache(maxsize=64)
def _totals(accounts: tuple[Account, ...], releases: tuple[Release, ...]) -> tuple[tuple[str, Any], ...]:
    """Each account's planned total: the same for every owner of a run (10,000 owners share one)."""
    plan = ReleasePlan(party="-", what="-", relation=REPLACE_ONE, accounts=accounts, releases=releases)
    return tuple(plan.totals().items())


# --- what each other party receives of an owner's data -------------------------------------------

_Observer = Literal["curator", "consumer", "owners"]

_SALE = (
    "handed to the consumer in the clear (the sale, under the owner's sale terms, its price and cap, not its DP budget)"
)
_TRUSTED = "handed to the trusted curator in the clear (the auction and the bid check need it)"
_BOUGHT = (
    "computed by the consumer from the points it bought (in the clear, by the sale) and from its own D_v and test set"
)
_EXACT = (
    "the non-private form (summarize.privacy.enabled false) computes it from the owners' exact points and bids, "
    "without noise, and hands it over in the clear (the owner's plan declares the run unbounded)"
)
_OWN_DV = (
    "the consumer's own D_v, handed to the trusted curator by the consumer: it concerns the consumer's data, "
    "not an owner's (every owner's data is independent of it)"
)


def declared_view(config: Any) -> tuple[Seen, ...]:
    """What the curator, the consumer and the other owners receive of an owner's data in a run of
    ``config`` (:mod:`marketplace.privacy.view`; the exchange's ``declared_view`` returns it).

    The other owners receive g~ (the consumer's D_v, not an owner's), each round's g_l (a release of
    D_s) with q and the round, and a request when the auction's selection (a release) asks them. The
    trusted curator is handed an owner's exact bids and the points it asks for (a disclosure, by the
    protocol's trust; with a less-trusted curator, their h1 embeddings and the points sealed for the
    consumer), and the consumer's D_v, the consumer's own. The consumer receives the summary D_s,
    the sold points in the clear (the sale: a disclosure under the owner's sale terms), and in its
    report what it computes from them (disclosures too) beside figures that follow from the
    selections and the plans (public). In the non-private form g_l is D_s's exact mean embedding and
    the best bidder is asked exactly: those, and what follows from them (which owner sold how many
    points, so the message counts and the payments), are disclosures of the owners' exact data."""
    s = config.summarize
    exact = not s.privacy.enabled
    sealed = s.curator == "less_trusted"

    def computed(observer: _Observer, field: str, what: str, note: str) -> Seen:
        """A figure the curator computes from the owners' data: a release, or exact in the non-private form."""
        if exact:
            return Seen(observer, field, "disclosure", f"{what}, exact: {_EXACT}")
        return Seen(observer, field, "release", f"{what}: {note}")

    def follows(observer: _Observer, field: str, what: str) -> Seen:
        """A figure that follows from the auction's selections: public, or, when the best bidder is asked
        exactly (non-private), a function of the owners' exact bids."""
        if exact:
            return Seen(
                observer, field, "disclosure", f"{what}, which follows whom the exact best-bidder rule asked: {_EXACT}"
            )
        return Seen(observer, field, "public", f"{what}, from the auction's selections (releases) and public settings")

    owners: tuple[Seen, ...] = (
        Seen(
            "owners",
            "target_embedding.mean",
            "disclosure" if exact else "release",
            (
                "g~, D_v's exact mean embedding, which the non-private form sends every owner in the clear: the "
                "consumer's data, not an owner's (independent of every owner's data)"
                if exact
                else "g~, the consumer's release of D_v's mean embedding (consumer:D_v), independent of every "
                "owner's data"
            ),
        ),
        Seen(
            "owners",
            "target_embedding.consumer_key",
            "public",
            "the consumer's fresh public key (less-trusted curator), independent of every owner's data",
        ),
        Seen("owners", "round_open.round", "public", "the round's number"),
        computed(
            "owners",
            "round_open.summary_mean",
            "g_l, the mean embedding of D_s",
            "the curator's release of D_s (its D_s account); while D_s holds only the public seed set, a release of "
            "that set alone (public)",
        ),
        Seen(
            "owners",
            "round_open.q",
            "public",
            "q, the size of D_s: the public seed set's size and one point per round that added one, as the selections "
            "decide",
        ),
        (
            Seen(
                "owners",
                "request.round",
                "disclosure",
                f"whether the exact best-bidder rule asks this owner, and in which round: {_EXACT}",
            )
            if exact
            else Seen(
                "owners",
                "request.round",
                "release",
                "the round in which the auction's selection (its release, charged to every owner's "
                "auction account) asks this owner for a point",
            )
        ),
    )
    curator: tuple[Seen, ...] = (
        Seen("curator", "bid.round", "public", "the round the bid is for"),
        Seen("curator", "bid.value", "disclosure", f"the owner's exact best bid over its unsent points, {_TRUSTED}"),
        Seen("curator", "bid.available", "disclosure", f"whether the owner has an unsent point left, {_TRUSTED}"),
        Seen("curator", "terms.price", "public", "the owner's posted price per point, from its sale terms (settings)"),
        Seen("curator", "terms.points", "public", "the most points the owner sells in this run, from its sale terms"),
        follows("curator", "point.round", "the round the owner was asked in"),
        Seen(
            "curator",
            "point.x",
            "disclosure",
            f"the features of the point asked for, {_TRUSTED}; if it enters D_s, {_SALE}",
        ),
        Seen(
            "curator",
            "point.y",
            "disclosure",
            f"the label of the point asked for, {_TRUSTED}; if it enters D_s, {_SALE}",
        ),
        follows(
            "curator",
            "point.row",
            "the point's serial, never its row: how many points the owner handed over before it (a count of the "
            "requests it answered)",
        ),
        Seen("curator", "validation_set.X", "disclosure", f"D_v's features: {_OWN_DV}"),
        Seen("curator", "validation_embedding.phi", "disclosure", f"h1 of each row of D_v: {_OWN_DV}"),
        Seen("curator", "validation_embedding.consumer_key", "public", "the consumer's fresh public key"),
        *(
            (
                follows("curator", "sealed_point.round", "the round the owner was asked in"),
                Seen(
                    "curator",
                    "sealed_point.phi",
                    "disclosure",
                    "h1 of the point asked for: the less-trusted curator checks the bid on it; handed over in the "
                    "clear, by the protocol's trust",
                ),
                follows("curator", "sealed_point.row", "the point's serial, never its row (a count of requests)"),
                Seen(
                    "curator",
                    "sealed_point.sealed",
                    "disclosure",
                    f"the point sealed for the consumer (the curator cannot open it), {_SALE}",
                ),
                Seen(
                    "curator",
                    "sealed_point.key",
                    "disclosure",
                    "the point's content key, a keyed hash of the point by which the curator tells the owner's "
                    "points apart (one point is sold once)",
                ),
                Seen(
                    "curator",
                    "sealed_point.commitment",
                    "public",
                    "the commitment to the owner's random secret, independent of its points",
                ),
            )
            if sealed
            else ()
        ),
    )
    consumer: tuple[Seen, ...] = (
        Seen("consumer", "summary.X", "disclosure", f"the features of D_s's points, {_SALE}"),
        Seen("consumer", "summary.y", "disclosure", f"the labels of D_s's points, {_SALE}"),
        Seen("consumer", "summary.rounds", "public", "the size of D_s: one point per round that added one"),
        *(
            (
                Seen(
                    "consumer",
                    "sealed_summary.phi",
                    "disclosure",
                    f"h1 of D_s's points, as the curator verified them, {_SALE}",
                ),
                Seen(
                    "consumer", "sealed_summary.sealed", "disclosure", f"D_s's points, sealed for the consumer, {_SALE}"
                ),
                Seen("consumer", "sealed_summary.keys", "disclosure", f"each point's content key, {_SALE}"),
                Seen(
                    "consumer",
                    "sealed_summary.commitments",
                    "public",
                    "each point's owner's commitment to its random secret, independent of its points",
                ),
                Seen("consumer", "sealed_summary.rounds", "public", "the size of D_s"),
            )
            if sealed
            else ()
        ),
        # the protocol's sections of the run report
        Seen(
            "consumer",
            "report.selection",
            "disclosure",
            f"D_s in order: each point's owner, the serial its owner sent it as and a hash of the point, {_SALE}; "
            "which points enter D_s (the pool's best) depends on every owner's data and is not private",
        ),
        Seen(
            "consumer",
            "report.value",
            "disclosure",
            "each owner's value, the marginal gain of its sold points to the objective, computed from those points "
            f"and g~, {_SALE}",
        ),
        Seen("consumer", "report.metrics", "disclosure", f"the summary's MMD^2 and accuracy, {_BOUGHT}"),
        Seen(
            "consumer",
            "report.metrics.baselines",
            "public",
            "absent in a deployment: the references need every owner's rows in one place",
        ),
        Seen("consumer", "report.metrics.measured_by", "public", "who measured the metrics"),
        Seen(
            "consumer",
            "report.checks",
            "public",
            "the central replay of the protocol's rule: not applicable, or absent in a deployment (it needs every "
            "owner's rows)",
        ),
        Seen(
            "consumer",
            "report.flagged",
            "public",
            "the owners the curator excluded, and why in public words (an honest owner is never excluded)",
        ),
        Seen(
            "consumer",
            "report.auction",
            "public",
            "the private auction's settings, its per-round cost from the plan, how many owners it asked per round "
            "and how many points are left in its pool, from the selections",
        ),
        follows("consumer", "report.sale", "what each owner was paid and what is left of the spending budget"),
        Seen(
            "consumer",
            "report.history.rounds.mmd2",
            "disclosure",
            f"the MMD^2 of the summary after each round, {_BOUGHT}",
        ),
        Seen(
            "consumer",
            "report.party_details.curator.result.selection",
            "disclosure",
            f"D_s in order, as the curator kept it, {_SALE}",
        ),
        Seen(
            "consumer",
            "report.party_details.curator.result.value",
            "disclosure",
            f"each owner's value, from its sold points, {_SALE}",
        ),
        Seen(
            "consumer",
            "report.party_details.consumer.result.metrics",
            "disclosure",
            f"the summary's metrics, as the consumer computed them, {_BOUGHT}",
        ),
        Seen(
            "consumer",
            "report.party_details.consumer.result.own_evaluation",
            "disclosure",
            f"the MMD^2 of the summary after each round, {_BOUGHT}",
        ),
        Seen(
            "consumer",
            "report.party_details.consumer.result.rejected_points",
            "disclosure",
            f"the sealed points the consumer rejected when it opened them, and why, {_BOUGHT}",
        ),
    )
    # in the non-private form, who sold how many points follows the exact best-bidder rule: the
    # runtime's common sections that count them (public otherwise, as view.REPORT declares them)
    # are disclosures there
    counted = {
        "report.messages": "how many messages each party sent and received",
        "report.parsimony": "how many points and embeddings the curator saw, of each owner",
        "report.party_details": "what each party published of its result: which owner sold how many points, "
        "what it was paid, the curator's counts and history",
    }
    report = tuple(
        follows("consumer", seen.field, counted[seen.field]) if exact and seen.field in counted else seen
        for seen in REPORT
    )
    return (*RUNTIME, *report, *owners, *curator, *consumer)
