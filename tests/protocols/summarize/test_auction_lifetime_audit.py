"""The exact audit of the private auction over an owner's lifetime: several requests, one after the other.

The same owners (the same data) serve two or three successive `summarize` requests. Each request
runs its own fresh :class:`PrivAuction` (its own coins, state, rounds, eps_auc and tau), and an
owner's lifetime ledger charges each request's ``auction`` total R_k eps_k under "replace-one
keeping the owner's number of distinct points", composed by basic composition. So every other
owner's joint view across the requests (its request bits and the number asked, every round of every
request), and the coalition's joint transcript, must satisfy, for every neighbouring pair of the
single-request audit's family (``test_auction_rounds_audit.py``: one point of one owner replaced by
a better, a worse or a middling one that duplicates none of its others),

    P[view | D] <= (E_1^R_1 ... E_K^R_K) P[view | D'],  E_k <= e^eps_k the request's dyadic multiplier,

hence a loss within the sum of the requests' ledgers. Every lifetime path is enumerated with its
exact probability (``lifetime_paths`` in ``auction_paths.py``: the code's ``outcomes`` and
``advance``, exact rationals).

**The adaptive (honest) case.** An owner never offers a sent point again, so a request starts from
the points its owners have left after the earlier requests (``carry=True``): which points those are
depends on the earlier requests' selections, hence on every owner's data, and the second request's
world depends on the first's outcome. The enumeration follows that exactly (3 or 4 owners with 1 to
3 points each, 2 rounds per request, 2 or 3 requests; owners run out of points across requests).
The non-adaptive case (every request on the full data, ``carry=False``) is audited as well.

The audit finds the sum attained (up to E < e): one owner's replaced point moves another owner's
joint view by the full R_1 eps_1 + R_2 eps_2, in the adaptive case too, so no single request's
figure bounds a lifetime.

**Negative control.** A replacement that changes an owner's number of distinct points is outside
the relation over a lifetime as well: some joint view is possible under one dataset only.

**Left out.** The rounds' directions are fixed per round and per request (drawn once, a different
direction every round in one test), not chosen from earlier requests' outcomes; which point enters
D_s and the g_l releases are the ``D_s`` ledgers' (charged on top), not this audit's. Every point
sent is gone for good, whether or not it entered D_s (the owner's rule). The owners are the same in
every request (none joins, leaves or declines in between); the request order within a round is a
uniform permutation independent of the data, the same factor under both datasets, and is left out.
Worlds are small: exact enumeration is exponential in the rounds.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from auction_paths import (
    bids,
    draws_follow,
    ledger_eps,
    lifetime_paths,
    max_loss,
    own_view,
    ratio_bounded,
    replacements,
    transcript,
    view_laws,
    world,
)

from marketplace.protocols.summarize.auction import PrivAuction
from marketplace.protocols.summarize.request_schedule import MULT_BITS, dyadic_exp

Plan = tuple[tuple[float, int, int, int], ...]  # per request: (eps_auc, tau, rounds, requests per round)

# Three owners, 2 or 3 points each: over two requests of two rounds they run out of points.
SMALL = {"a": [0.9, 0.5, 0.2], "b": [0.8, 0.6], "c": [0.7, 0.3]}
# Four owners as in the single-request audit; d holds one point only (it can be sold in request 1).
CONSTANT = {"a": [0.9, 0.5, 0.2], "b": [0.8, 0.6, 0.1], "c": [0.7, 0.3], "d": [0.4]}


def auctions(owners, plan: Plan, seed: int = 0) -> list[tuple[PrivAuction, int]]:
    """One fresh auction per request (the enumeration copies it; the generator is not drawn from)."""
    return [
        (PrivAuction(owners=tuple(owners), eps_auc=e, tau=t, rng=np.random.default_rng(seed), requests=m), rounds)
        for e, t, rounds, m in plan
    ]


def charged(plan: Plan, owners: int) -> tuple[float, Fraction]:
    """What the lifetime ledger charges (the requests' ``auction`` totals added up) and the exact
    multiplier E_1^R_1 ... E_K^R_K of the composed rule."""
    stated = [ledger_eps(rule="composed", eps=e, tau=t, requests=m, owners=owners, rounds=r) for e, t, r, m in plan]
    assert stated == pytest.approx([r * e for e, _, r, _ in plan])
    bound = math.prod((Fraction(dyadic_exp(e), 1 << MULT_BITS) ** r for e, _, r, _ in plan), start=Fraction(1))
    return sum(stated), bound


def lifetime_audit(base: dict, neighbour: dict, plan: Plan, *, changed: str, carry: bool) -> dict:
    """The exact laws, under both datasets, of every other owner's joint view and of the coalition's
    joint transcript over the requests."""
    total = sum(r for _, _, r, _ in plan)
    views = {o: own_view(o) for o in base if o != changed} | {"coalition": transcript}
    laws = [
        view_laws(lifetime_paths(auctions(base, plan), world(d, total), carry=carry), views) for d in (base, neighbour)
    ]
    return {name: (laws[0][name], laws[1][name]) for name in views}


def worst_over_the_family(base: dict, plan: Plan, *, carry: bool, family=None) -> float:
    """Checks every pair of the family and every view; returns the largest loss found."""
    stated, bound = charged(plan, len(base))
    worst = 0.0
    for owner, i, v, neighbour in family or replacements(base):
        for name, (law, law2) in lifetime_audit(base, neighbour, plan, changed=owner, carry=carry).items():
            assert ratio_bounded(law, law2, bound), (owner, i, v, name)
            loss = max_loss(law, law2)
            assert loss <= stated, (owner, i, v, name, loss, stated)
            worst = max(worst, loss)
    return worst


@pytest.mark.parametrize("carry", [True, False], ids=["adaptive", "non-adaptive"])
@pytest.mark.parametrize(
    "plan",
    [
        ((1.0, 3, 2, 1), (1.0, 3, 2, 1)),  # the same request twice
        ((1.0, 2, 2, 1), (0.5, 3, 2, 1)),  # other eps_auc and tau in the second request
        ((1.0, 3, 2, 2), (0.5, 3, 2, 1)),  # two requests a round, then one
        ((1.0, 2, 2, 1), (0.5, 2, 1, 1), (1.0, 3, 2, 1)),  # three requests, other rounds too
    ],
    ids=["same-twice", "other-eps-tau", "two-then-one-asked", "three-requests"],
)
def test_every_joint_view_over_the_requests_is_within_the_sum_of_their_ledgers(plan, carry):
    worst = worst_over_the_family(SMALL, plan, carry=carry)
    assert worst > 0.5 * max(e for e, *_ in plan)  # the audit sees a real difference: the views depend on the bids


def test_the_sum_is_attained_so_no_single_requests_figure_bounds_a_lifetime():
    """Four owners, the same request twice (eps_auc = 1, tau = 3: nobody is due, one owner asked a
    round), adaptive: some replacement (d's only point by a better one, for instance) moves the
    coalition's joint transcript by 4 ln E, the two ledgers' 2 + 2 up to E < e, where one request's
    ledger states 2."""
    plan = ((1.0, 3, 2, 1), (1.0, 3, 2, 1))
    stated, bound = charged(plan, len(CONSTANT))
    assert stated == pytest.approx(4.0) and math.log(bound) <= stated
    worst = worst_over_the_family(CONSTANT, plan, carry=True)
    assert worst == pytest.approx(math.log(bound), abs=1e-12) and worst > 3.99


def test_directions_that_change_every_round_and_every_request():
    """Per-round bid values (a different direction every round of every request), drawn once from a
    fixed seed, and replacements by random per-round values, over two requests with other eps_auc,
    tau and rounds, adaptive and not."""
    rng = np.random.default_rng(7)
    plan = ((1.0, 2, 2, 1), (0.5, 3, 3, 1))
    total = sum(r for _, _, r, _ in plan)
    names = ("a", "b", "c")
    base = {o: [tuple(rng.uniform(0, 1, total).round(3)) for _ in range(2 + (k % 2))] for k, o in enumerate(names)}
    family = []
    for trial in range(9):
        owner = names[trial % 3]
        i = int(rng.integers(len(base[owner])))
        new = tuple(rng.uniform(-0.5, 1.5, total).round(3))
        family.append((owner, i, new, {**base, owner: [*base[owner][:i], new, *base[owner][i + 1 :]]}))
    for carry in (True, False):
        assert worst_over_the_family(base, plan, carry=carry, family=family) > 0.5


@pytest.mark.parametrize("carry", [True, False], ids=["adaptive", "non-adaptive"])
def test_a_replacement_that_changes_an_owners_distinct_points_is_outside_the_relation_over_a_lifetime(carry):
    """Replacing a's 0.5 by a copy of its 0.9 leaves a one point to offer: over two requests of two
    rounds, some joint view is possible under one dataset only, for every observer: an unbounded
    loss, whatever the ledgers add up to."""
    base = {"a": [0.9, 0.5], "b": [0.8, 0.6], "c": [0.7, 0.3]}
    duplicated = {**base, "a": [0.9]}
    plan = ((1.0, 2, 2, 1), (1.0, 3, 2, 1))
    for name, (law, law2) in lifetime_audit(base, duplicated, plan, changed="a", carry=carry).items():
        assert max_loss(law, law2) == math.inf, name


# --- the world model: the second request starts from the points left after the first -------------


def test_a_sent_point_is_never_offered_in_a_later_request():
    """With ``carry``, no owner is ever asked more often than it has points, over every lifetime path,
    and some path asks d for its only point in request 1, so d has no bid in request 2 (it is never
    asked there). Without it, d can be asked in both requests: the two models differ."""
    plan = ((1.0, 3, 2, 1), (1.0, 3, 2, 1))
    w = world(CONSTANT, 4)
    carried = dict(lifetime_paths(auctions(CONSTANT, plan), w))
    fresh = dict(lifetime_paths(auctions(CONSTANT, plan), w, carry=False))
    assert sum(carried.values()) == 1 and sum(fresh.values()) == 1
    for path in carried:
        asked = Counter(o for s in path for o in s)
        assert all(asked[o] <= len(pts) for o, pts in CONSTANT.items()), path
    sold_first = [path for path in carried if any("d" in s for s in path[:2])]
    assert sold_first and all("d" not in s for path in sold_first for s in path[2:])
    assert any(any("d" in s for s in path[:2]) and any("d" in s for s in path[2:]) for path in fresh)
    assert carried != fresh


def test_the_enumerated_lifetime_law_is_what_decide_draws():
    """The audit's exact law of the joint transcript over two requests against 5,000 simulated
    lifetimes: each request a new ``PrivAuction`` calling ``decide``, the owners' sent points removed
    for good (points carried over to the next request). Chi-square over every transcript with an
    expected count of at least 5, the rest pooled; a fixed seed."""
    plan = ((1.0, 2, 2, 1), (0.5, 3, 2, 1))
    runs, w = 5_000, world(SMALL, 4)
    law = dict(lifetime_paths(auctions(SMALL, plan), w))
    rng = np.random.default_rng(77)
    counts: Counter = Counter()
    for _ in range(runs):
        unsent = {o: list(pts) for o, pts in w.items()}
        path: list[frozenset[str]] = []
        for eps, tau, rounds, m in plan:
            auction = PrivAuction(owners=tuple(SMALL), eps_auc=eps, tau=tau, rng=rng, requests=m)
            for _ in range(rounds):
                offer, which = bids(unsent, len(path))
                asked = frozenset(auction.decide(offer))
                path.append(asked)
                for o in asked:
                    del unsent[o][which[o]]
        counts[tuple(path)] += 1
    assert draws_follow(law, counts, runs)  # and never a lifetime the audit calls impossible
