"""The resolved privacy schedule of private `summarize` and the release plans declared from it.

:class:`PrivateSchedule` turns the scenario's ``summarize.privacy`` settings into every figure a run
spends: the per-round eps of the releases of D_v and D_s, the auction's, and (:meth:`PrivateSchedule.plans`)
the owners' and the consumer's release plans, which the budget check, the lifetime charge and the
curator's ledgers all read. It lives apart from the curator's role
(:mod:`marketplace.protocols.summarize.private_curator`, which uses it) so that reading a scenario,
which checks the plans, imports no role.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from marketplace.privacy.accountant import Guarantee, PrivacyLedger, calibrate_zcdp
from marketplace.privacy.gdp import calibrate_mu
from marketplace.privacy.neighbouring import REPLACE_ONE, REPLACE_ONE_DISTINCT, replace_one, replace_one_distinct
from marketplace.privacy.plan import Account, Release, ReleasePlan
from marketplace.protocols.summarize import PrivAuction
from marketplace.protocols.summarize.config import SummarizePrivacy
from marketplace.protocols.summarize.gaussian_release import SUM_L2_SENSITIVITY
from marketplace.protocols.summarize.h2 import H2_MEASURE, H2_SELECT, SENSITIVITY, IterationCost, iteration_steps
from marketplace.protocols.summarize.plan import (
    BUDGET_SUMMARY_KEY,
    BUDGET_VALIDATION_KEY,
    MIN_EPS,
    NOT_COVERED,
    LedgerRelease,
    SummarizePlan,
)
from marketplace.schema import SchemaError

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
