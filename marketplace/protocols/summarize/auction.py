"""PRIVAUCTION (Algorithm 3, steps 11-16 of the paper; see ``docs/privacy.md``): whom the curator
asks for a point, and the pool it picks the summary's next point from. A pure decision core: no I/O,
no messages.

One round, as the curator role drives it::

    asked = auction.decide({owner: bid_value_or_None, ...})   # send a Request to each of these
    for each Point that comes back:                           # (curator role)
        if verify(phi, claimed_bid, direction_of_this_round, tol): pool.add(PoolEntry(...))
        else: flag the owner
    winner = pool.best(direction_of_the_round)                # internal: nobody is told
    pool.remove(winner); D_s <- D_s + winner

**Who is asked.** Owners with a bid are ranked best first; equal bids go to the lower owner index
(the order of ``owners``, a fixed public rule). Owners without a bid (``None``: exhausted or gone)
are skipped. First the *tau rule* (below) names the owners that are due; they are asked. The other
ranked owners are asked by the round's request schedule
(:mod:`~marketplace.protocols.summarize.request_schedule`):

* ``rule="composed"`` (the default): exactly ``requests`` of them (default 1; ``"auto"``: as many
  as the paper's coins ask on average), a set S with probability proportional to
  E^{|S & Top_m|}, Top_m the m best ranks, E <= e^eps_auc. The round's *whole* selection (who,
  how many, the order) is eps_auc-DP given the earlier rounds' selections, so rounds compose: the
  ``auction`` ledger's R eps_auc covers an owner's whole view of the auction (``docs/privacy.md``).
* ``rule="two_sided"``: exactly ``requests`` of them, rank r with probability a_r, where both
  "asked" and "not asked" stay within e^eps_auc between adjacent ranks. This bounds one owner's
  bit *given the curator's state* only; the state depends on the other owners' data, so the rounds
  do not compose and an owner's view over several rounds is not bounded by R eps_auc.
* ``rule="paper"``: independent coins, rank r asked with probability exp(-eps_auc (r - 1)), rank 1
  always. Only "asked" is within e^eps_auc; the honest per-round guarantee, again given the state,
  is (eps_auc, 1 - e^-eps_auc).

:attr:`PrivAuction.last` keeps each round's decision and its per-round guarantee, which the
curator records on the ``auction`` ledger.

**The tau rule, and why this one.** The paper (step 14) says, in short: once a data point has been an
owner's chosen bid tau times, the aggregator asks for it. The curator cannot apply that literally: a
bid is a number, and the curator never learns *which* point is behind it until it asks. What it does
know is when it last asked each owner, and an owner's unsent points change only when it is asked (the
point behind the bid leaves). So the rule implemented is:

    an owner is asked when this round is its tau-th bid since the curator last asked it
    (its ``unasked`` count reaches tau); every request, by the schedule or by this rule, resets it.

Compared with the paper's per-point count: when the point behind the bid stayed the same (the usual
case) both fire in the same round; otherwise ours fires no later for any point bid within the
window, except for a point displaced and bid again (ours restarts its count). The cost bound is the
same (at most floor(R / tau) tau-requests per owner over R rounds). It needs no message field and
cannot be gamed: an owner cannot make itself asked more, nor avoid it, by what it reports.
``tau = 1`` asks every bidder every round (private, not parsimonious).

**Privacy of the rule.** Whether the rule fires for owner i is a function of the rounds' earlier
selections (who was asked when) and of which owners still have a bid, which, under a change of one
owner's points that keeps its number of distinct points, is itself a function of those selections.
The due owners are taken out *before* ranking the rest (except under ``paper``), so the number
asked is (due owners) + ``requests``. The draws never see bid values, only ranks. The coins and the
uniform draws come from the given generator (seeded in simulation, OS entropy in ``secure`` mode
via ``make_rng``).

For audits, :meth:`PrivAuction.outcomes` gives the exact law of a round's asked set without
drawing, and :meth:`PrivAuction.advance` applies a chosen outcome as :meth:`~PrivAuction.decide`
would have.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import NamedTuple

import numpy as np

from .bid import bid_value
from .request_schedule import (
    RequestSchedule,
    composed_schedule,
    paper_requests,
    paper_schedule,
    permutation,
    two_sided_schedule,
)

__all__ = [
    "RULES",
    "AuctionRound",
    "Pool",
    "PoolEntry",
    "PrivAuction",
    "paper_expected_requests",
    "request_probabilities",
    "verify",
]


class SealedContent(NamedTuple):
    """A point as a less-trusted curator keeps it for D_s: the sealed bytes it cannot read, and the
    content key and commitment the owner named it by (the consumer checks both when it opens it)."""

    sealed: bytes
    key: bytes
    commitment: bytes


def _fail(kind: type[Exception], name: str, where: str, expected: str, value: object) -> Exception:
    got = f"{value!r} ({type(value).__name__})" if kind is TypeError else repr(value)
    return kind(f"The {name!r} parameter of {where} must be {expected}. Got {got} instead.")


def _eps(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(TypeError, "eps_auc", where, "a real number", value)
    number = float(value)
    if not (math.isfinite(number) and number >= 0):
        raise _fail(ValueError, "eps_auc", where, "a finite number >= 0", value)
    return number


def _count(value: object, name: str, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(TypeError, name, where, "an int", value)
    if value < minimum:
        raise _fail(ValueError, name, where, f"an int >= {minimum}", value)
    return int(value)


def request_probabilities(n_ranked: int, eps_auc: float) -> np.ndarray:
    """The paper's P[the owner at rank r is asked] = exp(-eps_auc (r - 1)) for r = 1..n_ranked.

    >>> request_probabilities(3, math.log(2)).round(6).tolist()
    [1.0, 0.5, 0.25]
    """
    n = _count(n_ranked, "n_ranked", "request_probabilities", 0)
    return paper_requests(n, _eps(eps_auc, "request_probabilities"))


@functools.lru_cache(maxsize=4096)
def paper_expected_requests(n_ranked: int, eps_auc: float) -> int:
    """How many of ``n_ranked`` owners the paper's coins ask on average, rounded, at least 1 (at
    most n_ranked): what ``requests_per_round="auto"`` asks, so both rules are equally parsimonious."""
    if n_ranked <= 0:
        return 1
    return int(min(n_ranked, max(1, round(float(request_probabilities(n_ranked, eps_auc).sum())))))


# --- who is asked ----------------------------------------------------------------------------

RULES = ("composed", "two_sided", "paper")
"""The request rules; the first is the default."""


@dataclass(frozen=True)
class AuctionRound:
    """What :meth:`PrivAuction.decide` decided in one round (for reports and tests; never sent)."""

    round: int
    ranking: tuple[str, ...]  # owners with a bid, best first
    by_coin: frozenset[str]  # asked by the request schedule
    by_tau: frozenset[str]  # due under the tau rule this round (under "paper" it may overlap by_coin)
    order: tuple[str, ...] = ()  # the asked owners in the order their requests go out (random)
    schedule: RequestSchedule | None = None  # None when nobody was ranked (no schedule ran)

    @property
    def asked(self) -> frozenset[str]:
        return self.by_coin | self.by_tau

    @property
    def guarantee(self) -> tuple[float, float]:
        """(eps, delta) of this round for every owner's observation (0, 0 without a schedule)."""
        return (0.0, 0.0) if self.schedule is None else (self.schedule.eps, self.schedule.delta)


class PrivAuction:
    """The request decisions of PRIVAUCTION across rounds (schedule + tau rule, see module doc).

    >>> auction = PrivAuction(owners=("a", "b", "c"), eps_auc=30.0, tau=2, rng=np.random.default_rng(0))
    >>> auction.decide({"a": 0.1, "b": 0.3, "c": None})   # b ranks first; c has no bid
    ['b']
    >>> sorted(auction.decide({"a": 0.1, "b": 0.3, "c": None}))   # a's second bid unasked: tau = 2
    ['a', 'b']
    """

    def __init__(
        self,
        *,
        owners: tuple[str, ...],
        eps_auc: float,
        tau: int,
        rng: np.random.Generator,
        rule: str = "composed",
        requests: int | str = 1,
    ) -> None:
        where = "PrivAuction"
        owners = tuple(owners)
        if not owners or not all(isinstance(o, str) and o for o in owners) or len(set(owners)) != len(owners):
            raise _fail(ValueError, "owners", where, "a non-empty tuple of distinct, non-empty owner ids", owners)
        if not isinstance(rng, np.random.Generator):
            raise _fail(TypeError, "rng", where, "a numpy.random.Generator (see marketplace.privacy.rng.make_rng)", rng)
        if rule not in RULES:
            raise _fail(ValueError, "rule", where, f"one of {list(RULES)}", rule)
        if requests != "auto":
            requests = _count(requests, "requests", where, 1)
        self.owners = owners
        self.eps_auc = _eps(eps_auc, where)
        self.tau = _count(tau, "tau", where, 1)
        self.rng = rng
        self.rule = rule
        self.requests = requests
        self.index = {o: i for i, o in enumerate(owners)}  # the public tie-break order
        self.round = 0
        self._unasked = {o: 0 for o in owners}  # bids since this owner was last asked
        self.last: AuctionRound | None = None

    @property
    def unasked(self) -> dict[str, int]:
        """Per owner, how many bids it has made since the curator last asked it (a copy)."""
        return dict(self._unasked)

    def ranking(self, bids: Mapping[str, float | None]) -> tuple[str, ...]:
        """Owners with a bid, best first; equal bids go to the lower owner index."""
        offers = self._checked(bids)
        return tuple(sorted(offers, key=lambda o: (-offers[o], self.index[o])))

    def schedule(self, n_ranked: int) -> RequestSchedule:
        """The request schedule for ``n_ranked`` owners under this auction's rule."""
        if self.rule == "paper":
            return paper_schedule(n_ranked, self.eps_auc)
        m = paper_expected_requests(n_ranked, self.eps_auc) if self.requests == "auto" else self.requests
        if self.rule == "composed":
            return composed_schedule(n_ranked, self.eps_auc, m)
        return two_sided_schedule(n_ranked, self.eps_auc, m)

    def _plan(
        self, bids: Mapping[str, float | None]
    ) -> tuple[tuple[str, ...], frozenset[str], tuple[str, ...], RequestSchedule | None]:
        """(ranking, owners due under tau, the owners the schedule draws from, best first, the schedule)."""
        ranking = self.ranking(bids)
        due = frozenset(o for o in ranking if self._unasked[o] + 1 >= self.tau)
        ranked = ranking if self.rule == "paper" else tuple(o for o in ranking if o not in due)
        return ranking, due, ranked, (self.schedule(len(ranked)) if ranked else None)

    def decide(
        self, bids: Mapping[str, float | None], released: Callable[[list[str]], list[str]] | None = None
    ) -> list[str]:
        """The owners to ask for their current point this round, in the (random) order the requests
        should go out, so that the order says nothing about ranks.

        ``bids`` maps owner ids to bid values, ``None`` (or a missing key) for an owner without a
        bid. A seeded generator makes the decisions reproducible. ``released``, if given, is where
        the round's selection leaves the auction (the caller's release plan, or the coupling of the
        differential test): the auction goes on from what it returns, so that a selection given back
        by a coupled run moves the tau rule's counters as that run's did.
        """
        ranking, due, ranked, schedule = self._plan(bids)
        by_coin = frozenset(ranked[r] for r in schedule.sample(self.rng)) if schedule else frozenset()
        asked = by_coin | due
        order = sorted(asked, key=self.index.__getitem__)
        order = [order[i] for i in permutation(self.rng, len(order))] if len(order) > 1 else order
        if released is not None:
            given = list(released(list(order)))
            if given != order:  # another selection: the coins are those that drew it
                order = given
                by_coin = frozenset(order) & frozenset(ranked) if self.rule == "paper" else frozenset(order) - due
        self._commit(ranking, due, by_coin, tuple(order), schedule)
        return order

    def outcomes(self, bids: Mapping[str, float | None]) -> dict[frozenset[str], Fraction]:
        """The exact law of this round's asked set (due owners included) under ``bids``, given the
        auction's state, without drawing or changing anything. The request order is a uniform
        permutation of the asked set, independent of everything else, so it is left out.
        Enumerates sets: meant for audits with few owners."""
        _, due, ranked, schedule = self._plan(bids)
        if schedule is None:
            return {due: Fraction(1)}
        law: dict[frozenset[str], Fraction] = {}
        for ranks, p in schedule.set_distribution().items():
            asked = due | frozenset(ranked[r] for r in ranks)
            law[asked] = law.get(asked, Fraction(0)) + p
        return law

    def advance(self, bids: Mapping[str, float | None], asked: Iterable[str]) -> None:
        """Move to the next round as if :meth:`decide` had drawn ``asked`` under ``bids`` (for
        audits that follow every outcome of :meth:`outcomes`)."""
        ranking, due, ranked, schedule = self._plan(bids)
        asked = frozenset(asked)
        if not due <= asked or not asked <= frozenset(ranking):
            raise _fail(
                ValueError,
                "asked",
                "PrivAuction.advance",
                f"the owners due under tau {sorted(due)} and only owners with a bid {sorted(ranking)}",
                sorted(asked),
            )
        self._commit(
            ranking,
            due,
            asked - due if self.rule != "paper" else asked & frozenset(ranked),
            tuple(sorted(asked, key=self.index.__getitem__)),
            schedule,
        )

    def _commit(
        self,
        ranking: tuple[str, ...],
        due: frozenset[str],
        by_coin: frozenset[str],
        order: tuple[str, ...],
        schedule: RequestSchedule | None,
    ) -> None:
        asked = by_coin | due
        self.round += 1
        for o in ranking:
            self._unasked[o] = 0 if o in asked else self._unasked[o] + 1
        self.last = AuctionRound(
            round=self.round, ranking=ranking, by_coin=by_coin, by_tau=due, order=order, schedule=schedule
        )

    def _checked(self, bids: Mapping[str, float | None]) -> dict[str, float]:
        if not isinstance(bids, Mapping):
            raise _fail(TypeError, "bids", "PrivAuction.decide", "a mapping owner -> bid value or None", bids)
        offers: dict[str, float] = {}
        for owner, value in bids.items():
            if owner not in self.index:
                raise _fail(
                    ValueError,
                    f"bids[{owner!r}]",
                    "PrivAuction.decide",
                    f"keyed by one of the owners {self.owners}",
                    owner,
                )
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise _fail(ValueError, f"bids[{owner!r}]", "PrivAuction.decide", "a finite real number or None", value)
            offers[owner] = float(value)
        return offers


# --- the pool ----------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class PoolEntry:
    """A point the curator received: whose, the serial its owner sent it as (the k-th point that owner
    handed over in the run, never its row), its h1 features, the bid it was sent for, the round of
    that bid, its content for D_s ((x, y), or the point sealed for the consumer with its content key
    and commitment when the curator is less trusted) and ``ident``, its identity
    (:mod:`~marketplace.protocols.summarize.identity`). Identified by (owner, ident): the serial is the
    owner's own label, used only to break ties in a fixed order."""

    owner: str
    serial: int
    phi: np.ndarray
    claimed: float
    round: int
    content: tuple[np.ndarray, int] | SealedContent
    ident: str = ""
    key: tuple[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (self.owner, self.ident or f"serial {int(self.serial)}"))


class Pool:
    """Every verified point received and not yet in D_s, kept across rounds (step 15).

    :meth:`best` ranks the pool under the *current* round's direction (phi . direction, recomputed),
    not by the bids the points were sent for. A point, once added, can never be added again, even
    after it left the pool (owners never offer a point twice; a repeat is a protocol error).
    """

    def __init__(self, owners: Iterable[str]) -> None:
        self.index = {o: i for i, o in enumerate(owners)}
        self._entries: dict[tuple[str, str], PoolEntry] = {}
        self._seen: set[tuple[str, str]] = set()
        self._stack: tuple[list[PoolEntry], np.ndarray] | None = None  # sorted entries, their phi

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, entry: PoolEntry) -> bool:
        return self._entries.get(entry.key) is entry

    def __iter__(self) -> Iterator[PoolEntry]:
        return iter(self._sorted()[0])

    def seen(self, owner: str, ident: str) -> bool:
        """True when (owner, ident) was ever added (it may have left the pool since)."""
        return (owner, ident) in self._seen

    def add(self, entry: PoolEntry) -> None:
        if entry.owner not in self.index:
            raise ValueError(f"pool entry from {entry.owner!r}, which is not one of the owners {tuple(self.index)}")
        if entry.key in self._seen:
            raise ValueError(
                f"{entry.owner!r}'s point {entry.key[1]} was already received; a point is never offered twice"
            )
        phi = np.asarray(entry.phi)
        if phi.ndim != 1 or (self._entries and phi.shape != next(iter(self._entries.values())).phi.shape):
            raise ValueError(f"pool entry phi must be 1-D like the pool's; got shape {phi.shape}")
        self._seen.add(entry.key)
        self._entries[entry.key] = entry
        self._stack = None

    def remove(self, entry: PoolEntry) -> None:
        """Take a point out of the pool (it enters D_s, or its owner's points are discarded)."""
        if entry not in self:
            raise KeyError(f"{entry.owner!r} point {entry.key[1]} is not in the pool")
        del self._entries[entry.key]
        self._stack = None

    def best(self, direction: np.ndarray) -> PoolEntry | None:
        """The point with the highest phi . direction; ties go to (owner index, serial). None if empty."""
        entries, phis = self._sorted()
        if not entries:
            return None
        direction = np.asarray(direction, dtype=np.float64)
        if direction.shape != phis.shape[1:] or not np.isfinite(direction).all():
            raise ValueError(
                f"direction must be a finite vector of shape {phis.shape[1:]}; got shape {direction.shape}"
            )
        return entries[int(np.argmax(phis @ direction))]  # argmax: first maximum, i.e. the tie-break

    def _sorted(self) -> tuple[list[PoolEntry], np.ndarray]:
        if self._stack is None:
            entries = sorted(self._entries.values(), key=lambda e: (self.index[e.owner], e.serial))
            phis = np.array([np.asarray(e.phi, dtype=np.float64) for e in entries]) if entries else np.zeros((0, 0))
            self._stack = (entries, phis)
        return self._stack


def verify(entry_phi: np.ndarray, claimed: float, direction: np.ndarray, tol: float) -> bool:
    """Does the point's bid, recomputed under the direction of the round it was bid in, match the
    claim? Relative tolerance ``tol`` (absolute below 1), as in the non-private curator.

    >>> verify(np.array([1.0, 2.0]), 5.0, np.array([1.0, 2.0]), 1e-9)
    True
    >>> verify(np.array([1.0, 2.0]), 5.1, np.array([1.0, 2.0]), 1e-9)
    False
    """
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not (math.isfinite(tol) and tol >= 0):
        raise _fail(ValueError, "tol", "verify", "a finite number >= 0", tol)
    if isinstance(claimed, bool) or not isinstance(claimed, numbers.Real) or not math.isfinite(claimed):
        return False
    actual = bid_value(entry_phi, direction)
    return math.isfinite(actual) and abs(actual - claimed) <= tol * max(1.0, abs(claimed))
