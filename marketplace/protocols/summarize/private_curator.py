"""The curator's side of private `summarize`: h2 releases instead of exact means, PRIVAUCTION
instead of asking the best bidder only.

What changes against :class:`~marketplace.protocols.summarize.curator.SummarizeCurator`:

* g~ is h2(h1(D_v)) (T_init iterations at eps_v), recorded on the ``consumer:D_v`` ledger.
* Each round's g_l is h2(h1(D_s)): the first release runs T_init iterations, later ones continue
  the same MWEM state for T_sub iterations (warm start). A release computed while D_s holds only
  the public seed set protects no private row and is recorded on no ledger; later ones are
  recorded on the ``D_s`` ledger (the owners' points in the summary). A round after one that added
  no point (D_s unchanged) reuses the last release (post-processing, no new cost).
* With ``release="gaussian"`` both are Gaussian-mechanism releases instead
  (:mod:`~marketplace.protocols.summarize.gaussian_release`), zCDP-calibrated so that each
  protected dataset ends at the total the MWEM schedule would have spent (budgets only check);
  a D_s of public seed points only is released exactly.
* Owners are asked by the private auction (the composed rule by default: each round's whole
  selection is eps_auc-DP given the earlier ones; the two-sided schedule and the paper's coins as
  options, which bound one round given the curator's state only) and the tau rule; every point
  received goes into the pool (verified against the direction of the round it was bid in); the
  pool's best point under the current direction enters D_s. Nobody is told who won. Each round is
  recorded on the ``auction`` ledger at the rule's per-round figure; the ledger's scope and, for
  the older rules, a warning say what that figure covers. See ``docs/privacy.md``. The auction
  draws at most once per round, in at most the R rounds planned: a round whose asked owners deliver
  nothing, with an empty pool, ends without a point instead of drawing again
  (:meth:`PrivateSummarizeCurator._open_round_again`).

Every figure above comes from the run's release plans (:meth:`PrivateSchedule.plans`, which an
owner's and the consumer's declared cost and the budget check read too): each ledger is one of
their accounts, each spend one of their releases (:meth:`~marketplace.privacy.plan.ReleasePlan.spend`,
refused past its planned count), and each mechanism is calibrated to its release's eps or rho.
Every release's output leaves where it is made, through its plan
(:meth:`~marketplace.privacy.plan.ReleasePlan.released`: g~ through the consumer's, each g_l of D_s
through the owners'), and each round's auction selection through the coupling key
``("curator", <the auction's release name>)`` (:meth:`PrivateSummarizeCurator._selection_released`),
so the coupled differential test (:mod:`marketplace.differential`) records and replays them all.

Owners and the consumer run unchanged: the protocol differs only in what the curator releases
and whom it asks.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.privacy import coupling
from marketplace.privacy.accountant import Guarantee, PrivacyLedger, calibrate_zcdp
from marketplace.privacy.gdp import calibrate_mu
from marketplace.privacy.neighbouring import REPLACE_ONE, REPLACE_ONE_DISTINCT, replace_one, replace_one_distinct
from marketplace.privacy.plan import Account, Release, ReleasePlan
from marketplace.privacy.rng import make_rng
from marketplace.protocols.summarize import Pool, PoolEntry, PrivAuction, h2_release
from marketplace.protocols.summarize.config import SummarizePrivacy
from marketplace.protocols.summarize.curator import SummarizeCurator, SummarizePhase, payload
from marketplace.protocols.summarize.gaussian_release import SUM_L2_SENSITIVITY, gaussian_mean_release
from marketplace.protocols.summarize.h2 import (
    H2_MEASURE,
    H2_SELECT,
    SENSITIVITY,
    IterationCost,
    MwemState,
    iteration_steps,
)
from marketplace.protocols.summarize.messages import Point, Request, SealedPoint
from marketplace.protocols.summarize.plan import (
    BUDGET_SUMMARY_KEY,
    BUDGET_VALIDATION_KEY,
    MIN_EPS,
    NOT_COVERED,
    LedgerRelease,
    SummarizePlan,
)
from marketplace.roles import CURATOR, Send
from marketplace.schema import SchemaError

log = logging.getLogger(
    "marketplace.protocols.summarize.curator"
)  # same logger: the runner reads round progress from it

VALIDATION, SUMMARY, AUCTION = "consumer:D_v", "D_s", "auction"

MWEM_RELEASES = {"mwem_paper": "average", "mwem_call_average": "call_average", "mwem_last": "last"}
"""Scenario name of each MWEM release -> h2's own name for it."""
GAUSSIAN_MECHANISM = "gaussian mean embedding"
AUCTION_MECHANISM = {
    "composed": "auction: composed selection (per round)",
    "two_sided": "auction: two-sided requests (per round, given the state)",
    "paper": "auction: the paper's coins (per round, given the state)",
}
NOT_COMPOSED = (
    "the per-round figure holds only given the curator's state, which depends on other owners' data, so "
    "the rounds do not compose: the ledger's total does not bound what an owner learns over the run "
    "(an exact audit finds a loss of 5.6 over 4 rounds at eps_auc = 1, against the ledger's 4); use the default "
    "composed auction"
)
TWO_SIDED_AUCTION_WARNING = "the two-sided auction: " + NOT_COMPOSED
PAPER_AUCTION_WARNING = (
    "the paper's auction: 'not asked' is not eps_auc-DP (rank 1 is always asked), so each round is "
    "only (eps_auc, 1 - e^-eps_auc)-DP and the delta composes; moreover " + NOT_COMPOSED
)
AUCTION_WARNING = {"two_sided": TWO_SIDED_AUCTION_WARNING, "paper": PAPER_AUCTION_WARNING}
FIRST_RELEASE = "D_s's first private release"
"""How the plan tells apart D_s's first MWEM release (empty seed set) from the later ones."""
AUCTION_COINS = "the auction's coins (whom it asks each round, how many, and in what order)"
"""What the auction ledger's coins decide: they come from the curator's noise stream, so the ledger's
``noise`` says who else could reproduce them (:func:`marketplace.privacy.noise.coins_note`)."""

VALIDATION_RELATION = replace_one(
    "a row of D_v", scope="g~, the release of D_v's mean embedding, as every owner receives it"
)
SUMMARY_RELATION = replace_one(
    "a point of D_s",
    scope="each g_l release given D_s. Which points enter D_s depends on every owner's data (the "
    "selection is not private), so this is not an end-to-end bound towards an owner's points; D_s itself goes to the "
    "consumer in the clear",
)
AUCTION_RELATION = {
    "composed": replace_one_distinct(
        "a point of another owner",
        scope="the whole selection of every round (who is asked, how many, the order, and "
        "so the tau rule's later requests) for any change of one owner's points that keeps its number of distinct "
        "points, given the rounds' directions g_l; adaptive basic composition over the rounds, and everything an "
        "owner observes of the auction is post-processing of the selections. Not covered: a replacement that creates "
        "or "
        "removes a duplicate among the owner's points (the owner then runs out of points at another round, and the "
        "loss is unbounded), the g_l themselves, which depend on which points enter D_s (the D_s ledger's scope), and "
        "owners' compute-time side channels",
    ),
    "two_sided": replace_one_distinct(
        "a point of another owner",
        scope="one round given the curator's state only: whether an owner is asked, and how "
        "many owners are, changes by at most e^eps when one other owner's bid changes. The state (earlier requests, "
        "tau "
        "counters, unsent points) depends on other owners' data, so the rounds do NOT compose: the total is no bound "
        "on an owner's view over several rounds",
    ),
    "paper": replace_one_distinct(
        "a point of another owner",
        scope="one round given the curator's state only, with delta for 'not asked'. The "
        "state depends on other owners' data, so the rounds do NOT compose: the total is no bound on an owner's view "
        "over several rounds",
    ),
}


@dataclass(frozen=True)
class PrivateSchedule:
    """The resolved privacy settings of a run (defaults filled in from d and p)."""

    eps_validation: float
    eps_first_round: float
    eps_later_rounds: float
    t_init: int
    t_sub: int
    eps_auction: float
    tau: int
    theorem: str
    delta_validation: float
    delta_summary: float
    secure: bool
    release: str = "gaussian"
    auction: str = "composed"
    requests_per_round: int | str = 1
    gaussian_accountant: str = "exact"
    rho_validation: float | None = None
    """gaussian: the zCDP cost of the release of g~."""
    rho_per_round: float | None = None
    """gaussian: the zCDP cost of each private release of g_l (rounds 2..p)."""

    @classmethod
    def resolve(
        cls, privacy: SummarizePrivacy, *, features: int, rounds: int, seed_set_size: int = 1
    ) -> PrivateSchedule:
        """The run's schedule: defaults filled in from d (``features``) and p (``rounds``), and, with
        ``privacy.total_epsilon``, the per-iteration eps (MWEM) or per-round rho (``gaussian``)
        derived from it. ``seed_set_size`` decides whether D_s's first release is public (MWEM)."""
        t_sub = privacy.t_sub
        mwem = cls(
            eps_validation=privacy.eps_validation,
            eps_first_round=privacy.eps_first_round,
            eps_later_rounds=privacy.eps_later_rounds or 0.01 / math.sqrt(rounds * t_sub),
            t_init=privacy.t_init or math.floor(features**1.5),  # 140 -> 1656, as in the paper
            t_sub=t_sub,
            eps_auction=privacy.eps_auction,
            tau=privacy.tau,
            theorem=privacy.theorem,
            delta_validation=privacy.delta_validation,
            delta_summary=privacy.delta_summary,
            secure=privacy.secure,
            release=privacy.release,
            auction=privacy.auction,
            requests_per_round=privacy.requests_per_round,
            gaussian_accountant="zcdp" if privacy.secure else privacy.gaussian_accountant,
        )
        if privacy.release != "gaussian":
            if privacy.total_epsilon is not None:
                return mwem.scaled_to(privacy.total_epsilon, rounds, seed_set_size=seed_set_size)
            return mwem
        target_v, target_s = mwem.mwem_totals(rounds)  # the same guarantee as the MWEM releases
        total_s = target_s.eps if privacy.total_epsilon is None else privacy.total_epsilon
        for key, total, delta in (
            ("delta_validation", target_v.eps, privacy.delta_validation),
            ("delta_summary", total_s if rounds > 1 else 1.0, privacy.delta_summary),
        ):
            if not total > 0:  # the Gaussian would have to be (0, delta)-DP: no zCDP budget reaches it
                raise SchemaError(
                    f"summarize.privacy.{key}",
                    "a delta at which the MWEM schedule the gaussian release matches costs some eps (at this "
                    "delta its total eps is 0: lower the delta or raise the eps per iteration)",
                    repr(delta),
                )
        # a one-round run releases no g_l (round 1 is on the public seed set): nothing to calibrate
        rho_per_round = mwem.calibrate_rho(total_s, privacy.delta_summary) / (rounds - 1) if rounds > 1 else None
        return dataclasses.replace(
            mwem,
            rho_validation=mwem.calibrate_rho(target_v.eps, privacy.delta_validation),
            rho_per_round=rho_per_round,
        )

    def summary_calls(self, rounds: int, *, seed_set_size: int) -> list[tuple[float, int]]:
        """The MWEM calls that a whole run records on the ``D_s`` ledger, as (eps per iteration,
        iterations), every later round releasing (the worst case). With a public seed set, the first
        release (T_init at ``eps_first_round``) holds no owner's point and is on no ledger; with an
        empty seed set, round 1 releases nothing and round 2's first private release runs T_init."""
        if seed_set_size > 0:
            return [(self.eps_later_rounds, (rounds - 1) * self.t_sub)] if rounds > 1 else []
        calls = [(self.eps_first_round, self.t_init)] if rounds > 1 else []
        return calls + ([(self.eps_later_rounds, (rounds - 2) * self.t_sub)] if rounds > 2 else [])

    def summary_total(self, rounds: int, *, seed_set_size: int) -> Guarantee:
        """What the ``D_s`` ledger states after a whole run of the MWEM schedule (every later round
        releasing), by the ledger's own accountant."""
        releases = self.mwem_summary_releases(rounds, seed_set_size=seed_set_size)
        return self.ledgers()[SUMMARY].check_plan(release.step() for release in releases)

    def scaled_to(self, total_eps: float, rounds: int, *, seed_set_size: int) -> PrivateSchedule:
        """This MWEM schedule with ``eps_first_round`` and ``eps_later_rounds`` multiplied by one
        common factor c (their ratio kept), c the largest for which the ``D_s`` ledger's total after
        a whole run is at most ``total_eps`` (found by bisection to a relative 1e-13; the total is
        increasing in c under every theorem), so the ledger states ``total_eps`` up to rounding."""

        def total(c: float) -> float:
            scaled = dataclasses.replace(
                self, eps_first_round=c * self.eps_first_round, eps_later_rounds=c * self.eps_later_rounds
            )
            return scaled.summary_total(rounds, seed_set_size=seed_set_size).eps

        lo, hi = 0.0, 1.0
        while total(hi) <= total_eps:
            lo, hi = hi, 2 * hi
        for _ in range(400):
            mid = 0.5 * (lo + hi)
            if not lo < mid < hi or hi - lo <= 1e-13 * hi:
                break
            lo, hi = (mid, hi) if total(mid) <= total_eps else (lo, mid)
        return dataclasses.replace(
            self, eps_first_round=lo * self.eps_first_round, eps_later_rounds=lo * self.eps_later_rounds
        )

    def calibrate_rho(self, total_eps: float, delta: float) -> float:
        """The total rho of Gaussian releases that costs ``total_eps`` at ``delta``, by the ledgers'
        own accountant: exact (the largest mu with eps(mu, delta) <= total_eps; rho = mu^2 / 2) or zCDP."""
        if self.gaussian_accountant == "exact":
            return calibrate_mu(total_eps, delta) ** 2 / 2
        return calibrate_zcdp(total_eps, delta)

    def mwem_totals(self, rounds: int) -> tuple[Guarantee, Guarantee]:
        """What the MWEM schedule spends on D_v and on D_s over a whole run (no budget applied),
        round 1's release being of the public seed set (p - 1 later rounds of T_sub iterations on D_s):
        what the Gaussian release is calibrated to."""
        mwem = dataclasses.replace(self, release="mwem_call_average")
        ledgers = mwem.ledgers()
        mwem.plan(ledgers, rounds, seed_set_size=1)
        return ledgers[VALIDATION].total(), ledgers[SUMMARY].total()

    def accounts(
        self, *, budget_validation: float | None = None, budget_summary: float | None = None
    ) -> dict[str, Account]:
        """One account per protected dataset (its ledger), with the configured budgets."""
        return {
            VALIDATION: Account(
                name=VALIDATION,
                neighbouring=VALIDATION_RELATION,
                theorem=self.theorem,
                delta=self.delta_validation,
                gaussian=self.gaussian_accountant,
                budget=None if budget_validation is None else (budget_validation, self.delta_validation),
                budget_keys=(BUDGET_VALIDATION_KEY,),
            ),
            SUMMARY: Account(
                name=SUMMARY,
                neighbouring=SUMMARY_RELATION,
                theorem=self.theorem,
                delta=self.delta_summary,
                gaussian=self.gaussian_accountant,
                budget=None if budget_summary is None else (budget_summary, self.delta_summary),
                budget_keys=(BUDGET_SUMMARY_KEY,),
            ),
            AUCTION: Account(
                name=AUCTION, neighbouring=AUCTION_RELATION[self.auction], theorem="basic", coins=AUCTION_COINS
            ),
        }

    def ledgers(
        self, *, budget_validation: float | None = None, budget_summary: float | None = None
    ) -> dict[str, PrivacyLedger]:
        """Empty ledgers, one per protected dataset, with the configured budgets."""
        accounts = self.accounts(budget_validation=budget_validation, budget_summary=budget_summary)
        plan = ReleasePlan(party="the run", what="-", relation=REPLACE_ONE, accounts=tuple(accounts.values()))
        return {name: plan.ledger(name) for name in accounts}

    def auction_round(self, n_ranked: int) -> tuple[float, float]:
        """The per-round guarantee of the auction for ``n_ranked`` ranked owners (what one round of
        :class:`PrivAuction` records), without drawing anything."""
        probe = PrivAuction(
            owners=("probe",),
            eps_auc=self.eps_auction,
            tau=self.tau,
            rng=np.random.default_rng(0),
            rule=self.auction,
            requests=self.requests_per_round,
        )
        schedule = probe.schedule(n_ranked)
        return schedule.eps, schedule.delta

    def _h2_releases(
        self, account: str, eps: float, iterations: int, *, first: bool = False
    ) -> tuple[Release, Release]:
        """``iterations`` MWEM iterations at ``eps`` on ``account``'s data: its ``h2.select`` and
        ``h2.measure`` releases (``first``: D_s's first private release, recorded under the same
        names as the later ones at another cost, so named apart in the plan)."""
        select, measure = iteration_steps(IterationCost.of(eps), iterations)
        common: dict[str, Any] = dict(account=account, to=("owners",), sensitivity=SENSITIVITY, count=iterations)
        if first:
            return (
                LedgerRelease(
                    name=f"{H2_SELECT} ({FIRST_RELEASE})",
                    records=H2_SELECT,
                    mechanism="exponential",
                    norm="utility",
                    eps=select.eps,
                    **common,
                ),
                LedgerRelease(
                    name=f"{H2_MEASURE} ({FIRST_RELEASE})",
                    records=H2_MEASURE,
                    mechanism="laplace",
                    eps=measure.eps,
                    **common,
                ),
            )
        return (
            Release(name=H2_SELECT, mechanism="exponential", norm="utility", eps=select.eps, **common),
            Release(name=H2_MEASURE, mechanism="laplace", eps=measure.eps, **common),
        )

    def _gaussian_release(self, account: str, rho: float, count: int) -> Release:
        """``count`` Gaussian releases of the mean embedding of ``account``'s data, each rho-zCDP
        (accounted exactly, or in zCDP in secure mode, whose discrete Gaussian OpenDP certifies so)."""
        return Release(
            name=GAUSSIAN_MECHANISM,
            account=account,
            to=("owners",),
            mechanism="gaussian",
            sensitivity=SUM_L2_SENSITIVITY,
            norm="L2",
            rho=rho,
            gaussian=not self.secure,
            count=count,
        )

    def mwem_summary_releases(self, rounds: int, *, seed_set_size: int) -> tuple[Release, ...]:
        """The MWEM releases of D_s over a whole run (``summary_calls``, every later round releasing)."""
        calls = self.summary_calls(rounds, seed_set_size=seed_set_size)
        return tuple(
            release
            for i, (eps, iterations) in enumerate(calls)
            for release in self._h2_releases(SUMMARY, eps, iterations, first=seed_set_size == 0 and i == 0)
        )

    def releases(self, rounds: int, *, seed_set_size: int, owners: int = 1) -> tuple[Release, ...]:
        """Every release of a whole run, each with its cost and the most times it runs, charged to
        the ``auction``, ``D_s`` and ``consumer:D_v`` accounts: the one place their costs are set.

        Rounds whose D_s holds only public seed points cost nothing; with an empty seed set the
        first round has no release at all, and round 2's first private MWEM release runs T_init
        iterations at ``eps_first_round`` (``summary_calls``). The worst case is assumed: every later
        round releases, and every auction round ranks all ``owners``."""
        out: list[Release] = []
        eps, delta = self.auction_round(owners)
        if eps > 0:
            out.append(
                Release(
                    name=AUCTION_MECHANISM[self.auction],
                    account=AUCTION,
                    to=("owners",),
                    mechanism=f"auction ({self.auction})",
                    sensitivity=1.0,
                    norm="utility",
                    eps=eps,
                    delta=delta,
                    count=rounds,
                )
            )
        if self.release == "gaussian":
            if rounds > 1:
                out.append(self._gaussian_release(SUMMARY, self.rho_per_round or 0.0, rounds - 1))
            out.append(self._gaussian_release(VALIDATION, self.rho_validation or 0.0, 1))
        else:
            out += self.mwem_summary_releases(rounds, seed_set_size=seed_set_size)
            out += self._h2_releases(VALIDATION, self.eps_validation, self.t_init)
        return tuple(out)

    def plans(
        self,
        *,
        rounds: int,
        seed_set_size: int,
        owners: int,
        owner: str = "every owner",
        consumer: str = "consumer",
        scenario: str = "",
        budget_validation: float | None = None,
        budget_summary: float | None = None,
    ) -> tuple[SummarizePlan, SummarizePlan]:
        """The release plans of a run, (an owner's, the consumer's), from :meth:`accounts` and
        :meth:`releases`: every owner's is the same but for its name and ``what``.

        An owner's declared cost is the composed auction's selections over the run's R rounds (the
        ``auction`` account, for the rounds' directions g_l fixed) and the g_l broadcasts of D_s (the
        ``D_s`` account, which bounds what they reveal of D_s with D_s given), composed, under the
        relation the auction holds under (a replacement by a point that duplicates none of the
        owner's others). It is not a bound on all that others learn of the owner's data: not covered
        (``not_covered``) are the points it sells, handed to the consumer in the clear (the sale, a
        declared disclosure its terms, not its DP budget, consent to); what the choice of a sold point
        tells of the owner's unsold points (it sends its best remaining point by the bid, so each of
        the others bid lower under that round's direction); and which points enter D_s, which depends
        on every owner's data (with the selections and directions fixed, one changed point of the
        owner can change up to 4 points of D_s), so the ``D_s`` figure is no bound towards one of the
        owner's points. The auction rules whose rounds do not compose (:data:`AUCTION_WARNING`) have
        no finite cost: their plans list the releases (the curator records them, the budgets are
        checked against them) and declare an unbounded release, which a ledger declines."""
        accounts = self.accounts(budget_validation=budget_validation, budget_summary=budget_summary)
        releases = self.releases(rounds, seed_set_size=seed_set_size, owners=owners)
        owner_accounts = (accounts[AUCTION], accounts[SUMMARY])
        owner_releases = tuple(r for r in releases if r.account in (AUCTION, SUMMARY))
        unbounded = AUCTION_WARNING.get(self.auction, "")
        owner_plan = SummarizePlan(
            party=owner,
            what=f"summarize: {owner}'s points ({scenario})",
            relation=REPLACE_ONE_DISTINCT,
            accounts=owner_accounts,
            releases=owner_releases,
            unbounded=unbounded,
            state_rho=True,  # each pure auction round and MWEM step is eps^2/2-zCDP: a zCDP figure beside the eps
            min_eps=MIN_EPS,
        )
        if not unbounded:
            totals = owner_plan.totals()
            owner_plan = dataclasses.replace(
                owner_plan,
                what=f"summarize ({scenario}): {owner}'s data: the auction's selections over {rounds} rounds given "
                f"their directions (eps {totals[AUCTION].eps:.6g}) and the g_l releases of D_s given D_s (eps "
                f"{totals[SUMMARY].eps:.6g})",
                not_covered=NOT_COVERED,
            )
        consumer_plan = SummarizePlan(
            party=consumer,
            what=f"summarize: g~, the release of D_v ({scenario})",
            relation=REPLACE_ONE,
            accounts=(accounts[VALIDATION],),
            releases=tuple(r for r in releases if r.account == VALIDATION),
        )
        return owner_plan, consumer_plan

    def plan(self, ledgers: dict[str, PrivacyLedger], rounds: int, *, seed_set_size: int, owners: int = 1) -> None:
        """Spend the whole planned run (:meth:`releases`) on ``ledgers``: raises ``BudgetExceeded`` if
        it cannot fit."""
        releases = self.releases(rounds, seed_set_size=seed_set_size, owners=owners)
        for name, account in self.accounts().items():  # one plan per ledger: D_v's and D_s's releases share names
            plan = SummarizePlan(
                party="the run",
                what="-",
                relation=REPLACE_ONE,
                accounts=(account,),
                releases=tuple(r for r in releases if r.account == name),
            )
            for release in plan.releases:
                plan.spend(ledgers[name], release.name)


class PrivateSummarizeCurator(SummarizeCurator):
    role_name = "curator"

    def __init__(self, *, schedule: PrivateSchedule, seed: int | np.random.SeedSequence, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.schedule = schedule
        self.rng = make_rng(seed=seed, secure=schedule.secure)
        # what the run may release (the plans every owner's and the consumer's cost is declared from):
        # the ledgers are the plans' accounts, every spend one of their releases, each calibrated to its cost
        self.owner_plan, self.consumer_plan = schedule.plans(
            rounds=self.rounds, seed_set_size=len(kwargs["seed_set"]), owners=len(self.owners)
        )
        self.plans = {VALIDATION: self.consumer_plan, SUMMARY: self.owner_plan, AUCTION: self.owner_plan}
        # no budget on the run's ledgers: the plans were checked against the budgets before the run
        self.account_ledgers = {name: plan.ledger(name, budget=False) for name, plan in self.plans.items()}
        self.auction = PrivAuction(
            owners=self.owners,
            eps_auc=schedule.eps_auction,
            tau=schedule.tau,
            rng=self.rng,
            rule=schedule.auction,
            requests=schedule.requests_per_round,
        )
        self.pool = Pool(self.owners)
        seed_set = kwargs["seed_set"]
        self.summary_rows_phi: list[np.ndarray] = list(self.features.transform(seed_set)) if len(seed_set) else []
        self.private_rows = 0  # rows of D_s that came from owners
        self.mwem_state: MwemState | None = None
        self.last_release: tuple[int, np.ndarray] | None = None  # (q, g_l): reused while D_s is unchanged
        self.awaiting: set[str] = set()
        self.asked_per_round: list[int] = []
        self.empty_rounds = 0
        """Rounds that ended without a point (no asked owner delivered one and the pool was empty)."""

    # --- releases --------------------------------------------------------------------------
    def _release_target(self, phi: np.ndarray) -> np.ndarray:
        s = self.schedule
        if s.release == "gaussian":
            return self._gaussian(VALIDATION, phi)
        _, release = self._h2(VALIDATION, phi, state=None, T=s.t_init)
        return release

    def _release_summary(self) -> np.ndarray:
        if self.last_release is not None and self.last_release[0] == len(self.summary_rows_phi):
            return self.last_release[1]  # the last round added no point: D_s is unchanged, so is its release
        release = self._new_summary_release()
        self.last_release = (len(self.summary_rows_phi), release)
        return release

    def _new_summary_release(self) -> np.ndarray:
        s = self.schedule
        if not self.summary_rows_phi:
            return np.zeros(self.features.n_features)
        rows = np.asarray(self.summary_rows_phi)
        first = self.mwem_state is None
        if not self.private_rows:  # the seed set alone is public: released exactly, or by MWEM on no ledger
            if s.release == "gaussian":
                return rows.mean(axis=0)
            self.mwem_state, release = h2_release(
                rows,
                T=s.t_init if first else s.t_sub,
                eps=s.eps_first_round if first else s.eps_later_rounds,
                rng=self.rng,
                secure=s.secure,
                release=MWEM_RELEASES[s.release],
            )
            return release
        if s.release == "gaussian":
            return self._gaussian(SUMMARY, rows)
        self.mwem_state, release = self._h2(
            SUMMARY, rows, state=self.mwem_state, T=s.t_init if first else s.t_sub, first=first
        )
        return release

    def _gaussian(self, account: str, rows: np.ndarray) -> np.ndarray:
        """One Gaussian release of ``rows``' mean embedding, recorded on ``account``'s ledger as its
        plan declares it (before any noise is drawn) and calibrated to the plan's rho."""
        plan = self.plans[account]
        release = plan.release(GAUSSIAN_MECHANISM)
        plan.spend(self.account_ledgers[account], release.name, 1)
        noisy = gaussian_mean_release(rows, rho=release.rho or 0.0, rng=self.rng, secure=self.schedule.secure)
        return plan.released(release.name, noisy)

    def _h2(
        self, account: str, rows: np.ndarray, *, state: MwemState | None, T: int, first: bool = False
    ) -> tuple[MwemState, np.ndarray]:
        """T MWEM iterations on ``rows`` (h2), recorded on ``account``'s ledger as its plan declares
        them (T ``h2.select`` and T ``h2.measure``, before any noise is drawn), each step calibrated to
        the plan's eps. ``first``: D_s's first private release when it has no public seed set."""
        plan, ledger = self.plans[account], self.account_ledgers[account]
        names = (H2_SELECT, H2_MEASURE)
        if first and account == SUMMARY and not self.seed_size:
            names = (f"{H2_SELECT} ({FIRST_RELEASE})", f"{H2_MEASURE} ({FIRST_RELEASE})")
        select, measure = (plan.release(name) for name in names)
        cost = IterationCost(select=select.eps or 0.0, measure=measure.eps or 0.0)
        for release in (select, measure):
            plan.spend(ledger, release.name, T)
        made = h2_release(
            rows,
            state=state,
            T=T,
            cost=cost,
            rng=self.rng,
            secure=self.schedule.secure,
            release=MWEM_RELEASES[self.schedule.release],
        )
        # the T iterations' output (the release and the MWEM state the next call continues, both
        # post-processing of the noisy selections and measurements) leaves once, as the measurement's
        return plan.released(measure.name, made)

    # --- auction -----------------------------------------------------------------------------
    def _maybe_choose(self) -> list[Send]:
        if self.phase != SummarizePhase.BIDDING or len(self.bids) < len(self.active):
            return []
        offers = {o: (b.value if b.available else None) for o, b in self.bids.items()}
        if all(v is None for v in offers.values()) and not len(self.pool):
            return self._finish("every owner has run out of points")
        # an owner whose price the consumer can no longer pay is not ranked: public prices and what was
        # paid so far (a function of earlier rounds' selections) decide it, never a bid
        offers = {o: (v if v is not None and self.purse.affordable(o) else None) for o, v in offers.items()}
        if all(v is None for v in offers.values()) and not len(self.pool):
            return self._finish(self.purse.spent_reason())
        ranked = any(v is not None for v in offers.values())
        selection = AUCTION_MECHANISM[self.schedule.auction]
        asked = self.purse.within_budget(self.auction.decide(offers, self._selection_released)) if ranked else []
        if ranked and any(release.name == selection for release in self.owner_plan.releases):
            # every round that ranked anybody is charged the run's per-round guarantee (the schedule
            # for all K owners, what the plan assumed); a round with fewer owners ranked is no worse.
            # A plan without the release: a round costs nothing (eps_auction 0, or everyone asked)
            self.owner_plan.spend(self.account_ledgers[AUCTION], selection, 1)
        self.asked_per_round.append(len(asked))
        self.requests_since_record += len(asked)
        self.awaiting = set(asked)
        self.phase = SummarizePhase.ACQUIRING
        if not self.awaiting:
            return self._select_from_pool()
        return [Send(o, Request(round=self.round)) for o in asked]  # in the auction's random order

    def _selection_released(self, asked: list[str]) -> list[str]:
        """The round's selection (the owners the auction asks, in the order the requests go out), as
        it leaves the curator: the output of the auction's release, made by the curator across every
        owner and charged to each owner's ``auction`` account, so it passes once per round through one
        coupling key, ``("curator", <the auction's release name>)``
        (:func:`marketplace.privacy.coupling.released`, directly: the owner plan the curator holds is
        every owner's, and the release is one draw for all of them, not one per owner). Outside the
        coupled differential test it is returned as it is."""
        return coupling.released(CURATOR, AUCTION_MECHANISM[self.schedule.auction], asked)

    def _on_point(self, message: Envelope) -> list[Send]:
        point: Point | SealedPoint = message.body
        sender = message.sender
        if self.phase != SummarizePhase.ACQUIRING or sender not in self.awaiting or point.round != self.round:
            raise ProtocolError(
                party=sender, kind=message.kind, reason="no point was requested from this owner for this round"
            )
        self.ledger.see(sender, raw=isinstance(point, Point))
        self.awaiting.discard(sender)
        problem = self._verify(sender, point)
        refusal: list[Send] = []
        if problem:
            self.flagged[sender] = problem
            if sender in self.active:
                self.active.remove(sender)
            log.warning("owner %s flagged and excluded: %s", sender, problem)
            refusal.append(self._refusal(message, problem))
        else:
            self.purse.pay(sender)
            phi = self._phi(point)
            self.pool.add(
                PoolEntry(
                    owner=sender,
                    serial=point.row,
                    phi=phi,
                    claimed=self.bids[sender].value,
                    round=self.round,
                    content=payload(point),
                    ident=self.content_key(point),
                )
            )
        return refusal + (self._select_from_pool() if not self.awaiting else [])

    def awaits_from(self, peer: str) -> bool:
        return self.phase == SummarizePhase.ACQUIRING and peer in self.awaiting

    def _asked_now(self) -> tuple[str, ...]:
        return tuple(self.awaiting) if self.phase == SummarizePhase.ACQUIRING else ()

    def _exclude_unreadable(self, peer: str) -> list[Send]:
        self.ledger.see(peer, raw=not self.less_trusted)
        self.awaiting.discard(peer)
        self.flagged[peer] = f"round {self.round}: sent a point that could not be read"
        if peer in self.active:
            self.active.remove(peer)
        log.warning("owner %s flagged and excluded: its point could not be read", peer)
        return [self._unreadable_refusal(peer), *(self._select_from_pool() if not self.awaiting else [])]

    def _open_round(self) -> list[Send]:
        if self.round >= self.rounds and self.empty_rounds:
            return self._finish(
                f"all rounds done ({self.empty_rounds} of {self.rounds} added no point: no owner asked in it "
                "delivered one and the pool was empty)"
            )
        return super()._open_round()

    def _open_round_again(self) -> list[Send]:
        """No owner asked in this round delivered a point and the pool is empty: the round ends without
        one, and the run goes on to its next round, or ends if this was the last.

        The round is not run again with a fresh draw, as the non-private curator does: every owner's
        lifetime ledger was charged R eps_auc before the run (the plan's R rounds, each at the
        composed auction's per-round figure), and a fresh draw would be a selection beyond those R
        that nobody paid for, so the ``auction`` ledger would record more than was charged. Nor
        does it ask the next owner of the round's ranking: the composed auction draws a set of
        owners whose law is eps_auc-DP as a whole, it has no ranking-ordered fallback, and who
        ranks next depends on the bids, so that ask would be a second selection of the round outside
        its eps_auc. Counting the round against the planned R keeps the guarantee exact: at most R
        draws, each charged; the run then ends with fewer points. D_s is unchanged, so the next
        round reuses the last release of g_l (no new cost)."""
        self.empty_rounds += 1
        return self._open_round()

    def _select_from_pool(self) -> list[Send]:
        entry = self.pool.best(self._direction())
        if entry is None:
            return self._open_round_again()
        self.pool.remove(entry)
        self.summary_rows_phi.append(entry.phi)
        self.private_rows += 1
        self._add_to_summary(entry.owner, entry.serial, entry.phi, entry.content)
        return self._open_round()

    def _round_privacy(self) -> dict[str, float]:
        """Each ledger's eps after this round (its releases included), as the ledger composes it."""
        return {f"eps[{name}]": float(ledger.total().eps) for name, ledger in self.account_ledgers.items()}

    def _progress_after_loss(self, peer: str) -> list[Send]:
        if self.phase == SummarizePhase.ACQUIRING:
            self.awaiting.discard(peer)
            return self._select_from_pool() if not self.awaiting else []
        return super()._progress_after_loss(peer)

    def ledgers(self) -> tuple[PrivacyLedger, ...]:
        """One ledger per account: D_v (the consumer's), D_s (the summary) and the auction (the owners')."""
        return tuple(self.account_ledgers.values())

    def result(self) -> dict[str, Any]:
        out = super().result()
        out["privacy"] = {name: ledger.to_dict() for name, ledger in self.account_ledgers.items()}
        declared = [r for r in self.owner_plan.releases if r.name == AUCTION_MECHANISM[self.schedule.auction]]
        eps, delta = (declared[0].eps, declared[0].delta) if declared else self.schedule.auction_round(len(self.owners))
        out["auction"] = {
            "rule": self.schedule.auction,
            "requests_per_round": self.schedule.requests_per_round,
            "asked_per_round_mean": float(np.mean(self.asked_per_round)) if self.asked_per_round else 0.0,
            "pool_left": len(self.pool),
            "eps_auction": self.schedule.eps_auction,
            "per_round": {"eps": eps, "delta": delta},
            "tau": self.schedule.tau,
        }
        if self.schedule.auction in AUCTION_WARNING:
            out["auction"]["warning"] = AUCTION_WARNING[self.schedule.auction]
        out["schedule"] = self.schedule.__dict__.copy()
        return out
