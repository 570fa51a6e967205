"""Exact multi-round enumeration of the private auction, for the audit in ``test_auction_audit.py``.

A *world* gives each owner a few points; a point's bid value in round l is ``values[l]`` (a fixed
number per round: the rounds' directions are fixed, as in the theorem of ``docs/privacy.md``). An
owner's bid is its best unsent point (ties to the lower point index); being asked removes that
point. Every round's law of the asked set comes from the real :class:`PrivAuction`
(:meth:`~PrivAuction.outcomes`, exact rationals), and the auction's own :meth:`~PrivAuction.advance`
moves it on, so the tau rule and the schedules are the code's, not a copy. The request order is a
uniform permutation of the asked set, independent of everything else, so it is the same factor in
both worlds and is left out of the views.
"""

from __future__ import annotations

import copy
import math
from collections import defaultdict
from collections.abc import Callable, Iterator
from fractions import Fraction

from marketplace.protocols.summarize.auction import PrivAuction

World = dict[str, list[tuple[float, ...]]]  # owner -> its points, each a tuple of per-round values
Path = tuple[frozenset[str], ...]  # the asked set of each round


def point(value: float | tuple[float, ...], rounds: int) -> tuple[float, ...]:
    """A point's per-round values (a single number: the same every round)."""
    return tuple(value) if isinstance(value, tuple) else (float(value),) * rounds


def world(points: dict[str, list[float | tuple[float, ...]]], rounds: int) -> World:
    return {o: [point(v, rounds) for v in vs] for o, vs in points.items()}


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


def paths(auction: PrivAuction, w: World, rounds: int) -> Iterator[tuple[Path, Fraction]]:
    """Every selection path over ``rounds`` rounds with its exact probability (they sum to 1)."""

    def walk(a: PrivAuction, unsent: dict[str, list[tuple[float, ...]]], rnd: int, path: Path, p: Fraction):
        if rnd == rounds:
            yield path, p
            return
        offer, which = bids(unsent, rnd)
        for asked, q in a.outcomes(offer).items():
            nxt = copy.deepcopy(a)
            nxt.advance(offer, asked)
            left = {
                o: [pt for k, pt in enumerate(pts) if not (o in asked and k == which[o])] for o, pts in unsent.items()
            }
            yield from walk(nxt, left, rnd + 1, path + (asked,), p * q)

    yield from walk(copy.deepcopy(auction), {o: list(pts) for o, pts in w.items()}, 0, (), Fraction(1))


def view_law(auction: PrivAuction, w: World, rounds: int, view: Callable[[Path], object]) -> dict[object, Fraction]:
    """The exact law of ``view(path)``."""
    law: dict[object, Fraction] = defaultdict(Fraction)
    for path, p in paths(auction, w, rounds):
        law[view(path)] += p
    return dict(law)


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
