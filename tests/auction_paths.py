"""Exact multi-round enumeration of the private auction, for the audit in ``test_auction_audit.py``.

A *world* gives each owner a few points; a point's bid value in round l is ``values[l]`` (a fixed
number per round: the rounds' directions are fixed, as in the theorem of ``docs/privacy.md``). An
owner's bid is its best unsent point (ties to the lower point index); being asked removes that
point. Every round's law of the asked set comes from the real :class:`PrivAuction`
(:meth:`~PrivAuction.outcomes`, exact rationals), and the auction's own :meth:`~PrivAuction.advance`
moves it on, so the tau rule and the schedules are the code's, not a copy. The request order is a
uniform permutation of the asked set, independent of everything else, so it is the same factor in
both worlds and is left out of the views.

Several requests (the lifetime audit, ``test_auction_lifetime_audit.py``): :func:`lifetime_paths`
runs them one after the other on the same owners, each with its own fresh :class:`PrivAuction` (its
own state, rounds, eps_auc and tau). The round index of a point's values runs on across requests,
so a request's directions are its own. With ``carry`` (the default) a request starts from the
points left after the previous ones (a sent point is never offered again): its world depends on the
earlier requests' selections, as in the marketplace.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction

from marketplace.protocols.summarize.auction import PrivAuction
from marketplace.protocols.summarize.config import SummarizePrivacy
from marketplace.protocols.summarize.private_curator import AUCTION, PrivateSchedule

World = dict[str, list[tuple[float, ...]]]  # owner -> its points, each a tuple of per-round values
Path = tuple[frozenset[str], ...]  # the asked set of each round


def point(value: float | tuple[float, ...], rounds: int) -> tuple[float, ...]:
    """A point's per-round values (a single number: the same every round)."""
    return tuple(value) if isinstance(value, tuple) else (float(value),) * rounds


def world(points: dict[str, list[float | tuple[float, ...]]], rounds: int) -> World:
    return {o: [point(v, rounds) for v in vs] for o, vs in points.items()}


def ledger_eps(*, rule: str, eps: float, tau: int, requests: int, owners: int, rounds: int) -> float:
    """The ``auction`` ledger's total eps for such a run (one request), as the curator plans it."""
    privacy = SummarizePrivacy(enabled=True, auction=rule, eps_auction=eps, tau=tau, requests_per_round=requests)
    schedule = PrivateSchedule.resolve(privacy, features=10, rounds=rounds)
    ledgers = schedule.ledgers()
    schedule.plan(ledgers, rounds, seed_set_size=0, owners=owners)
    return ledgers[AUCTION].total().eps


def replacements(base: dict, values=(2.0, -1.0, 0.55)) -> list[tuple[str, int, float, dict]]:
    """The audits' neighbouring pairs: one point of one owner replaced by a better, a worse and a
    middling one (none duplicates another of the owner's points when the base has no duplicates
    and none of the values: the owner keeps its number of distinct points)."""
    out = []
    for owner, pts in base.items():
        for i in range(len(pts)):
            for v in values:
                out.append((owner, i, v, {**base, owner: [*pts[:i], v, *pts[i + 1 :]]}))
    return out


def bids(unsent: dict[str, list[tuple[float, ...]]], rnd: int) -> tuple[dict[str, float | None], dict[str, int]]:
    """Each owner's bid (its best unsent point's value this round) and the index of that point."""
    values: dict[str, float | None] = {}
    which: dict[str, int] = {}
    for o, pts in unsent.items():
        if not pts:
            values[o] = None
            continue
        i = max(range(len(pts)), key=lambda k: (pts[k][rnd], -k))
        values[o], which[o] = pts[i][rnd], i
    return values, which


def fork(auction: PrivAuction) -> PrivAuction:
    """A copy of ``auction`` to follow one outcome from: its state deep-copied, but its generator (never
    drawn from by ``outcomes`` and ``advance``) and its last round's record (frozen, and replaced
    rather than changed) shared, which deep-copying each branch spent most of the enumeration on."""
    return copy.deepcopy(auction, {id(auction.rng): auction.rng, id(auction.last): auction.last})


def paths(auction: PrivAuction, w: World, rounds: int) -> Iterator[tuple[Path, Fraction]]:
    """Every selection path over ``rounds`` rounds with its exact probability (they sum to 1)."""
    return lifetime_paths([(auction, rounds)], w)


def lifetime_paths(
    requests: Sequence[tuple[PrivAuction, int]], w: World, *, carry: bool = True
) -> Iterator[tuple[Path, Fraction]]:
    """Every selection path over successive requests, each ``(auction, rounds)`` run from a fresh
    copy of its auction, with its exact probability (they sum to 1). A path lists every round's
    asked set, request after request (the requests' round counts are public, so the boundaries are
    known). ``carry``: a request starts from the points left unsent by the earlier ones (the honest
    lifetime case); ``False``: every request starts from ``w`` again (the non-adaptive case)."""
    total = sum(rounds for _, rounds in requests)
    if any(len(pt) < total for pts in w.values() for pt in pts):
        raise ValueError(f"every point needs a value for each of the {total} rounds of the requests")

    def fresh() -> dict[str, list[tuple[float, ...]]]:
        return {o: list(pts) for o, pts in w.items()}

    def walk(k: int, a: PrivAuction, unsent: dict[str, list[tuple[float, ...]]], rnd: int, path: Path, p: Fraction):
        if rnd == sum(r for _, r in requests[: k + 1]):  # request k is over
            if k + 1 == len(requests):
                yield path, p
                return
            yield from walk(k + 1, fork(requests[k + 1][0]), unsent if carry else fresh(), rnd, path, p)
            return
        offer, which = bids(unsent, rnd)
        for asked, q in a.outcomes(offer).items():
            nxt = fork(a)
            nxt.advance(offer, asked)
            left = {
                o: [pt for i, pt in enumerate(pts) if not (o in asked and i == which[o])] for o, pts in unsent.items()
            }
            yield from walk(k, nxt, left, rnd + 1, path + (asked,), p * q)

    yield from walk(0, fork(requests[0][0]), fresh(), 0, (), Fraction(1))


def view_law(auction: PrivAuction, w: World, rounds: int, view: Callable[[Path], object]) -> dict[object, Fraction]:
    """The exact law of ``view(path)``."""
    law: dict[object, Fraction] = defaultdict(Fraction)
    for path, p in paths(auction, w, rounds):
        law[view(path)] += p
    return dict(law)


def view_laws(
    enumerated: Iterator[tuple[Path, Fraction]], views: Mapping[str, Callable[[Path], object]]
) -> dict[str, dict[object, Fraction]]:
    """The exact laws of several views from one enumeration of the paths."""
    laws: dict[str, dict[object, Fraction]] = {name: defaultdict(Fraction) for name in views}
    for path, p in enumerated:
        for name, view in views.items():
            laws[name][view(path)] += p
    return {name: dict(law) for name, law in laws.items()}


def own_view(owner: str) -> Callable[[Path], tuple[tuple[bool, int], ...]]:
    """What one owner observes: its own request bit and how many owners were asked, every round."""
    return lambda path: tuple((owner in asked, len(asked)) for asked in path)


def transcript(path: Path) -> Path:
    """What a coalition of every other owner observes at most: the whole selection transcript."""
    return path


def max_loss(law: dict[object, Fraction], law_prime: dict[object, Fraction]) -> float:
    """max over views of |ln P[view | D] - ln P[view | D']| (inf if a view is possible in one only)."""
    loss = 0.0
    for v in set(law) | set(law_prime):
        p, q = law.get(v, Fraction(0)), law_prime.get(v, Fraction(0))
        if not p or not q:
            return math.inf
        loss = max(loss, abs(math.log(p / q)))
    return loss


def ratio_bounded(law: dict[object, Fraction], law_prime: dict[object, Fraction], bound: Fraction) -> bool:
    """P[v | D] <= bound P[v | D'] and the reverse for every view v, in exact arithmetic."""
    views = set(law) | set(law_prime)
    return all(
        law.get(v, Fraction(0)) <= bound * law_prime.get(v, Fraction(0))
        and law_prime.get(v, Fraction(0)) <= bound * law.get(v, Fraction(0))
        for v in views
    )


def draws_follow(law: Mapping, counts: Mapping, runs: int) -> bool:
    """Whether ``runs`` simulated draws (``counts``: outcome -> how often) follow the exact ``law``: no draw
    the law calls impossible, and a chi-square test over the outcomes expected at least 5 times (the rest
    pooled) that does not reject at 1e-3."""
    from scipy.stats import chisquare

    if not set(counts) <= set(law):
        return False
    big = [p for p in law if law[p] * runs >= 5]
    observed = [counts.get(p, 0) for p in big]
    expected = [float(law[p]) * runs for p in big]
    rest = 1 - sum(law[p] for p in big)
    if rest:
        observed.append(runs - sum(observed))
        expected.append(float(rest) * runs)
    return chisquare(observed, expected).pvalue > 1e-3
