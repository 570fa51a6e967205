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

import logging
from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.privacy import coupling
from marketplace.privacy.accountant import PrivacyLedger
from marketplace.privacy.rng import make_rng
from marketplace.protocols.summarize import Pool, PoolEntry, PrivAuction, h2_release
from marketplace.protocols.summarize.curator import SummarizeCurator, SummarizePhase, payload
from marketplace.protocols.summarize.gaussian_release import gaussian_mean_release
from marketplace.protocols.summarize.h2 import (
    H2_MEASURE,
    H2_SELECT,
    IterationCost,
    MwemState,
)
from marketplace.protocols.summarize.messages import Point, Request, SealedPoint
from marketplace.protocols.summarize.private_schedule import (  # noqa: F401 (re-exported)
    AUCTION,
    AUCTION_COINS,
    AUCTION_MECHANISM,
    AUCTION_RELATION,
    AUCTION_WARNING,
    FIRST_RELEASE,
    GAUSSIAN_MECHANISM,
    MWEM_RELEASES,
    NOT_COMPOSED,
    PAPER_AUCTION_WARNING,
    SUMMARY,
    SUMMARY_RELATION,
    TWO_SIDED_AUCTION_WARNING,
    VALIDATION,
    VALIDATION_RELATION,
    PrivateSchedule,
)
from marketplace.roles import CURATOR, Send

log = logging.getLogger(
    "marketplace.protocols.summarize.curator"
)  # same logger: the runner reads round progress from it


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

    def _declared_per_owner(self) -> dict[str, Any]:
        """What every owner's lifetime ledger is charged for the run, declared before it: the auction
        over all the planned rounds and D_s's g_l releases, as their ledgers compose them (their sum
        is the owner's declared cost). The run's own ledgers state what its releases spent: less when
        it ends before its last round, which the charge does not wait for."""
        totals = self.owner_plan.totals()
        out: dict[str, Any] = {"rounds": self.rounds}
        for name in (AUCTION, SUMMARY):
            out[name] = {"eps": float(totals[name].eps), "delta": float(totals[name].delta)}
        return out

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
        else:
            out["auction"]["declared"] = self._declared_per_owner()
        out["schedule"] = self.schedule.__dict__.copy()
        return out
