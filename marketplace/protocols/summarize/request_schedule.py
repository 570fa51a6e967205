"""Whom the private auction asks in one round: request schedules over bid ranks, exact samplers for
them, and the per-round guarantee an owner gets from what it can observe.

An owner observes, each round, one bit: whether a request reaches it. It does not see the others'
bits, but it can time the round: the next ``round_open`` comes once every asked owner's point is
in, so the *number* of owners asked is observable too. A schedule gives P[the owner at rank r is
asked] = a_r for the owners ranked best first.

**The two-sided schedule (opt-in; one round, given the curator's state).** Under the summarize
protocol's neighbouring relation (one point of one other owner is replaced, so that owner's bid
moves and every other owner's rank moves by at most one place), both outcomes of the bit must stay
within e^eps between adjacent ranks:

    a_r <= e^eps a_{r+1}   and   (1 - a_{r+1}) <= e^eps (1 - a_r)     for r = 1 .. n-1,

together with the trivial directions, which hold because a_r does not increase with r. The most
selective schedule with a given top probability a_1 takes each bound with equality, whichever is
larger: a_{r+1} = max(e^-eps a_r, 1 - e^eps (1 - a_r)). Near 1 the chance of *not* being asked grows
by e^eps per rank; once a_r falls below e^eps / (1 + e^eps) the chance of being asked shrinks by
e^-eps per rank. a_1 is chosen so that the a_r add up to exactly m, the requests per round, and the
m owners are drawn by systematic sampling (one uniform U; rank r is asked when U + k lands in
[a_1 + ... + a_{r-1}, a_1 + ... + a_r) for some integer k). That asks exactly m owners every round,
each with its marginal a_r: the number asked carries no information, and no round is empty.

**Exact arithmetic.** Every a_r is an integer number of units of 2^-B (B >= 128), and the chain is
computed with the multipliers rounded in the safe direction (e^-eps rounded up, e^eps rounded
down), so the bounds above hold exactly for the integers; :func:`two_sided_schedule` re-checks them
against e^eps itself before the schedule is used. U is drawn as a B-bit integer, so each rank's
inclusion probability is exactly its share of the 2^B grid. No tail probability underflows to 0 (a
float schedule would give rank 800 at eps = 1 a probability of exactly 0, and the ratio to rank 799
would be infinite). This is why the guarantee below is pure: delta = 0.

**The paper's schedule (opt-in).** P[rank r asked] = e^{-eps (r - 1)}, independent coins: rank 1
always. "Asked" is within e^eps between adjacent ranks, "not asked" is not: it has probability 0 at
rank 1 and 1 - e^-eps at rank 2. The honest per-round guarantee is (eps, 1 - e^-eps);
:func:`paper_schedule` computes it exactly from the probabilities the coins really have (a float
coin ``u < p`` with u on the 2^-53 grid has probability ceil(p 2^53) / 2^53). The number of owners
asked is random here, and its joint law with the bit gives the same delta (checked in the tests
without the tau rule).

**The composed rule (the default).** Both schedules above bound one owner's bit *given the
curator's state*; the state (who was asked before, hence the tau counters, the unsent points and the
number asked) depends on the other owners' data, so their rounds do not compose. The composed rule
makes the whole selection of a round private instead: among the n ranked owners it asks a set S of
exactly m, with P[S] proportional to E^{|S & Top_c|}, where Top_c are the c best ranks (c = m) and
E <= e^eps is dyadic. The normaliser depends on (n, c, m) only, and a change of one owner's bid
swaps at most one owner in or out of Top_c, so every set's probability moves by at most a factor E:
the round's whole selection is eps-DP given the earlier ones, and the rounds compose
(``docs/privacy.md`` has the theorem). :func:`composed_schedule` samples it exactly with integers.

The uniform schedule (eps below :data:`MIN_EPS`) asks m owners uniformly at random: 0-DP.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import numpy as np

from marketplace.checks import fail
from marketplace.privacy.rng import is_secure

__all__ = [
    "MAX_EPS",
    "MIN_EPS",
    "RequestSchedule",
    "composed_schedule",
    "dyadic_exp",
    "paper_requests",
    "paper_schedule",
    "two_sided_schedule",
    "uniform_below",
]

MIN_EPS = 1e-6
"""Below this the two-sided schedule is the uniform one (every owner equally likely, 0-DP)."""
MAX_EPS = 30.0
"""Above this the schedule is built for 30: at e^-30 ~ 1e-13 the auction already is the greedy rule."""
UNIT_BITS = 128
MULT_BITS = 64
CHAIN_MARGIN = 1e-8
"""The chain is built for eps (1 - CHAIN_MARGIN) and checked against eps: room for the last unit."""
FLOAT_GRID = 2**53


@dataclass(frozen=True)
class RequestSchedule:
    """The request law of one round for ``n`` ranked owners (best first).

    ``rule``: ``composed`` (exactly ``requests`` asked, a set S with probability proportional to
    E^{|S & top ranks|}: ``top`` ranks, ``multiplier`` = E in units of 2^-64 and ``weights`` the
    integer weight of each k = |S & top ranks|), ``two_sided`` (exactly ``requests`` asked,
    systematic sampling on ``thresholds``), ``uniform`` (exactly ``requests`` asked uniformly),
    ``everyone`` (n <= requests), ``paper`` (independent coins with ``coin_probabilities``).
    ``probabilities`` are the marginals P[rank r asked] as floats, for reports. ``eps`` and
    ``delta``: for ``composed``, the guarantee of the round's whole selection given the earlier
    ones; for the others, of one owner's observation given the curator's state (its request bit,
    and how many owners were asked), checked exactly.
    """

    rule: Literal["composed", "two_sided", "uniform", "everyone", "paper"]
    n: int
    requests: int | None
    eps: float
    delta: float
    probabilities: tuple[float, ...]
    thresholds: tuple[int, ...] = ()
    bits: int = 0
    coin_probabilities: tuple[float, ...] = ()
    top: int = 0
    multiplier: int = 0
    weights: tuple[int, ...] = ()

    def exact_requests(self) -> int:
        """``requests``, for a rule that asks an exact number of owners (every rule but ``paper``)."""
        if self.requests is None:
            raise ValueError(f"RequestSchedule: the {self.rule!r} rule asks no fixed number of owners")
        return self.requests

    def sample(self, rng: np.random.Generator) -> list[int]:
        """The ranks (0-based, ascending) asked in one round."""
        return self.sample_many(rng, 1)[0]

    def sample_many(self, rng: np.random.Generator, draws: int) -> list[list[int]]:
        """``draws`` independent rounds (used by :meth:`sample` and by the audit in the tests)."""
        if self.rule == "everyone":
            return [list(range(self.n)) for _ in range(draws)]
        if self.rule == "uniform":
            return [sorted(permutation(rng, self.n)[: self.requests]) for _ in range(draws)]
        if self.rule == "paper":
            heads = uniforms(rng, (draws, self.n)) < np.asarray(self.coin_probabilities)
            return [np.flatnonzero(row).tolist() for row in heads]
        if self.rule == "composed":
            return [self._composed_draw(rng) for _ in range(draws)]
        width = self.bits // 8
        raw = random_bytes(rng, width * draws)
        one = 1 << self.bits
        out = []
        for i in range(draws):
            u = int.from_bytes(raw[i * width : (i + 1) * width], "little")
            out.append([bisect.bisect_right(self.thresholds, u + k * one) for k in range(self.exact_requests())])
        return out

    def _composed_draw(self, rng: np.random.Generator) -> list[int]:
        """k from its integer weights, then a uniform k-subset of the top ranks and a uniform
        (m - k)-subset of the others: every draw is an exact uniform integer or permutation."""
        u = uniform_below(rng, sum(self.weights))
        k = 0
        while u >= self.weights[k]:
            u -= self.weights[k]
            k += 1
        c, m = self.top, self.exact_requests()
        top = permutation(rng, c)[:k]
        rest = [c + r for r in permutation(rng, self.n - c)[: m - k]]
        return sorted(top + rest)

    def set_probability(self, ranks: Iterable[int]) -> Fraction:
        """The exact probability that the ranks asked (0-based) are exactly ``ranks``."""
        chosen = sorted(set(int(r) for r in ranks))
        if any(r < 0 or r >= self.n for r in chosen):
            raise fail(ValueError, "ranks", "RequestSchedule.set_probability", f"ranks in [0, {self.n})", chosen)
        if self.rule == "paper":
            coins = [_realized_coin(p) for p in self.coin_probabilities]
            return math.prod((coins[r] if r in chosen else 1 - coins[r] for r in range(self.n)), start=Fraction(1))
        if len(chosen) != self.requests:
            return Fraction(0)
        if self.rule == "everyone":
            return Fraction(1)
        if self.rule == "uniform":
            return Fraction(1, math.comb(self.n, self.requests))
        if self.rule == "composed":
            k = sum(r < self.top for r in chosen)
            return Fraction(self.multiplier**k << (MULT_BITS * (self.requests - k)), sum(self.weights))
        return self.set_distribution().get(tuple(chosen), Fraction(0))

    def set_distribution(self) -> dict[tuple[int, ...], Fraction]:
        """The exact law of the set of ranks asked (0-based, ascending), every set of positive
        probability. Enumerates sets, so meant for small n (audits and tests); the two-sided
        schedule's law comes from the thresholds: one set per interval of U between breakpoints."""
        if self.rule == "two_sided":
            one = 1 << self.bits
            cuts = sorted({0, *(t % one for t in self.thresholds)})
            law: dict[tuple[int, ...], Fraction] = {}
            for lo, hi in zip(cuts, [*cuts[1:], one]):
                chosen = tuple(bisect.bisect_right(self.thresholds, lo + k * one) for k in range(self.exact_requests()))
                law[chosen] = law.get(chosen, Fraction(0)) + Fraction(hi - lo, one)
            return law
        if self.n > 20:
            raise fail(
                ValueError,
                "n",
                "RequestSchedule.set_distribution",
                "at most 20 ranked owners (it enumerates sets)",
                self.n,
            )
        sizes = range(self.n + 1) if self.rule == "paper" else (self.exact_requests(),)
        law = {}
        for size in sizes:
            for chosen in itertools.combinations(range(self.n), size):
                p = self.set_probability(chosen)
                if p:
                    law[chosen] = p
        return law


# --- randomness: the run's generator in simulation, the OS in secure mode -------------------------


def random_bytes(rng: np.random.Generator, n: int) -> bytes:
    """n uniform bytes: from the OS (``secrets``) when ``rng`` is a secure generator, else from ``rng``."""
    return secrets.token_bytes(n) if is_secure(rng) else rng.bytes(n)


def permutation(rng: np.random.Generator, n: int) -> list[int]:
    """A uniform permutation of range(n) (exact: integer Fisher–Yates, OS entropy in secure mode)."""
    if is_secure(rng):
        order = list(range(n))
        secrets.SystemRandom().shuffle(order)
        return order
    return [int(i) for i in rng.permutation(n)]


def uniform_below(rng: np.random.Generator, n: int) -> int:
    """A uniform integer in [0, n), exactly: uniform bits, rejecting values >= n (OS entropy in
    secure mode)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise fail(ValueError, "n", "uniform_below", "an int >= 1", n)
    bits = (n - 1).bit_length()
    width = (bits + 7) // 8
    while True:
        u = int.from_bytes(random_bytes(rng, width), "little") & ((1 << bits) - 1) if bits else 0
        if u < n:
            return u


def dyadic_exp(eps: float) -> int:
    """E in units of 2^-64 with E <= e^eps (math.exp rounded down by a margin of 2^-50, then
    floored): the multiplier that keeps every ratio a hair inside e^eps."""
    return math.floor(math.exp(eps) * (1 - 2.0**-50) * (1 << MULT_BITS))


def uniforms(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Uniform floats on the 2^-53 grid (OS entropy in secure mode)."""
    if is_secure(rng):
        words = np.frombuffer(secrets.token_bytes(8 * math.prod(shape)), dtype="<u8").reshape(shape)
        return (words >> np.uint64(11)).astype(np.float64) * 2.0**-53
    return rng.random(shape)


# --- the two-sided schedule --------------------------------------------------------------------


def _multipliers(eps: float) -> tuple[int, int]:
    """(C, c) in units of 2^-64: C <= e^eps and c >= e^-eps, for the chain built at eps (1 - margin)."""
    chain_eps = eps * (1.0 - CHAIN_MARGIN)
    scale = 1 << MULT_BITS
    C = max(scale, math.floor(math.exp(chain_eps) * (1 - 2.0**-50) * scale))
    c = min(scale, math.ceil(math.exp(-chain_eps) * (1 + 2.0**-50) * scale))
    return C, c


def _chain(a1: int, n: int, C: int, c: int, one: int) -> list[int]:
    """a_1 .. a_n in units of 1/one: a_{r+1} = max(ceil(c a_r), one - floor(C (one - a_r)))."""
    out = [a1]
    prev = a1
    for _ in range(n - 1):
        down = -((-c * prev) >> MULT_BITS)
        up = one - ((C * (one - prev)) >> MULT_BITS)
        nxt = max(down, up)
        if nxt == prev:  # a fixed point (e.g. a few units at the tail): the rest are equal
            out.extend([prev] * (n - len(out)))
            break
        out.append(nxt)
        prev = nxt
    return out


def _check_two_sided(a: list[int], eps: float, one: int) -> bool:
    """Exact check of both bounds (and both directions) between adjacent ranks, against a
    dyadic E <= e^eps: a_r <= E a_{r+1}, a_{r+1} <= E a_r, and the same for 1 - a."""
    E = dyadic_exp(eps)
    if any(x < 1 or x > one for x in a):
        return False
    for x, y in zip(a, a[1:]):
        for p, q in ((x, y), (y, x), (one - x, one - y), (one - y, one - x)):
            if (p << MULT_BITS) > E * q:
                return False
    return True


def _capacity(a: list[int], r: int, E: int, one: int) -> int:
    """How many units a_r can grow while every bound with its neighbours still holds."""
    cap = one - a[r]
    for j in (r - 1, r + 1):
        if 0 <= j < len(a):
            cap = min(
                cap,
                (E * a[j] >> MULT_BITS) - a[r],  # a_r <= E a_j
                one - a[r] - -(-((one - a[j]) << MULT_BITS) // E),
            )  # one - a_j <= E (one - a_r)
    return max(cap, 0)


def _check_arguments(n: object, eps: object, requests: object, where: str) -> None:
    """The checks every exactly-m schedule makes of its arguments (the error names ``where``)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise fail(ValueError, "n", where, "an int >= 0", n)
    if isinstance(requests, bool) or not isinstance(requests, int) or requests < 1:
        raise fail(ValueError, "requests", where, "an int >= 1", requests)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps >= 0):
        raise fail(ValueError, "eps", where, "a finite number >= 0", eps)


@functools.lru_cache(maxsize=4096)
def two_sided_schedule(n: int, eps: float, requests: int) -> RequestSchedule:
    """The two-sided schedule for ``n`` ranked owners, exactly ``requests`` asked per round (see the
    module doc). Per-round guarantee: (min(eps, MAX_EPS), 0), or (0, 0) below ``MIN_EPS``."""
    where = "two_sided_schedule"
    _check_arguments(n, eps, requests, where)
    m = min(requests, n)
    if m == n:
        return RequestSchedule("everyone", n, m, 0.0, 0.0, (1.0,) * n)
    if eps < MIN_EPS:
        return RequestSchedule("uniform", n, m, 0.0, 0.0, (m / n,) * n)
    eps = min(float(eps), MAX_EPS)
    C, c = _multipliers(eps)
    E = dyadic_exp(eps)
    bits = UNIT_BITS
    while True:
        one = 1 << bits
        target = m * one
        lo, hi = 0, one  # sum(chain(lo)) <= target < sum(chain(hi)) (the chain from one is all ones)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if sum(_chain(mid, n, C, c, one)) <= target:
                lo = mid
            else:
                hi = mid
        a = _chain(lo, n, C, c, one)
        residual = target - sum(a)
        for r in sorted(range(n), key=lambda i: -_capacity(a, i, E, one)):  # absorb the rounding
            if residual == 0:
                break
            grow = min(residual, _capacity(a, r, E, one))
            a[r] += grow
            residual -= grow
        if residual == 0 and sum(a) == target and _check_two_sided(a, eps, one):
            break
        bits *= 2  # finer units leave more room; never needed in the tests, kept for safety
        if bits > 1 << 14:
            raise RuntimeError(f"two_sided_schedule(n={n}, eps={eps}, requests={requests}): no exact schedule found")
    thresholds = tuple(np.cumsum(np.array(a, dtype=object)).tolist())
    probabilities = tuple(float(Fraction(x, one)) for x in a)
    return RequestSchedule("two_sided", n, m, eps, 0.0, probabilities, thresholds=thresholds, bits=bits)


# --- the composed rule ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def composed_schedule(n: int, eps: float, requests: int, top: int | None = None) -> RequestSchedule:
    """The default rule for ``n`` ranked owners: exactly m = min(``requests``, n) asked, the set S
    with probability E^{|S & Top_c|} / Z, Top_c the ``top`` best ranks (default c = m) and E the
    dyadic number <= e^eps of :func:`dyadic_exp`. Z = sum_k C(c, k) C(n - c, m - k) E^k depends on
    (n, c, m) only, never on bids. Guarantee of the round's whole selection, given the earlier
    ones: (min(eps, MAX_EPS), 0), or (0, 0) below ``MIN_EPS`` (uniform) and when n <= m (everyone).

    >>> s = composed_schedule(3, math.log(2), 1)
    >>> [round(p, 6) for p in s.probabilities]   # rank 1 with weight ~2, the others 1 each
    [0.5, 0.25, 0.25]
    """
    where = "composed_schedule"
    _check_arguments(n, eps, requests, where)
    m = min(requests, n)
    if top is None:
        top = m
    if isinstance(top, bool) or not isinstance(top, int) or not 1 <= top <= max(n, 1):
        raise fail(ValueError, "top", where, f"an int in [1, n = {n}]", top)
    if m == n:
        return RequestSchedule("everyone", n, m, 0.0, 0.0, (1.0,) * n)
    if eps < MIN_EPS:
        return RequestSchedule("uniform", n, m, 0.0, 0.0, (m / n,) * n)
    eps = min(float(eps), MAX_EPS)
    E = dyadic_exp(eps)
    c = top
    weights = tuple(
        math.comb(c, k) * math.comb(n - c, m - k) * E**k << (MULT_BITS * (m - k))  # 0 where k is impossible
        for k in range(min(c, m) + 1)
    )
    total = sum(weights)
    # marginals: a top rank is in S with P = sum_k w_k k / (c total); another rank, sum_k w_k (m - k) / ((n - c) total)
    in_top = Fraction(sum(w * k for k, w in enumerate(weights)), c * total)
    in_rest = Fraction(sum(w * (m - k) for k, w in enumerate(weights)), (n - c) * total) if n > c else Fraction(0)
    probabilities = tuple(float(in_top) if r < c else float(in_rest) for r in range(n))
    return RequestSchedule("composed", n, m, eps, 0.0, probabilities, top=c, multiplier=E, weights=weights)


# --- the paper's schedule ----------------------------------------------------------------------


def paper_requests(n: int, eps: float) -> np.ndarray:
    """P[rank r asked] = exp(-eps (r - 1)) for r = 1..n (the paper's PRIVAUCTION; rank 1: 1).

    >>> paper_requests(3, math.log(2)).round(6).tolist()
    [1.0, 0.5, 0.25]
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise fail(ValueError, "n", "paper_requests", "an int >= 0", n)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not (math.isfinite(eps) and eps >= 0):
        raise fail(ValueError, "eps", "paper_requests", "a finite number >= 0", eps)
    return np.exp(-float(eps) * np.arange(n, dtype=np.float64))


def _realized_coin(p: float) -> Fraction:
    """P[u < p] for numpy's u = k / 2^53, k uniform in [0, 2^53)."""
    return Fraction(min(math.ceil(Fraction(p) * FLOAT_GRID), FLOAT_GRID), FLOAT_GRID)


@functools.lru_cache(maxsize=4096)
def paper_schedule(n: int, eps: float) -> RequestSchedule:
    """The paper's independent coins for ``n`` ranked owners, with the exact per-round delta at
    ``eps`` of the request bit between adjacent ranks (both outcomes, both directions): about
    1 - e^-eps, from rank 1 (never left out) against rank 2."""
    coins = paper_requests(n, eps)
    realized = [_realized_coin(float(p)) for p in coins]
    E_low = Fraction(math.floor(math.exp(eps) * (1 - 2.0**-50) * FLOAT_GRID), FLOAT_GRID)  # <= e^eps: delta rounds up
    delta = Fraction(0)
    for x, y in zip(realized, realized[1:]):
        for p, q in ((x, y), (y, x), (1 - x, 1 - y), (1 - y, 1 - x)):
            delta = max(delta, p - E_low * q)
    delta_float = float(delta)
    if Fraction(delta_float) < delta:  # round up, never down
        delta_float = math.nextafter(delta_float, 1.0)
    return RequestSchedule(
        "paper",
        n,
        None,
        float(eps),
        delta_float,
        tuple(float(p) for p in realized),
        coin_probabilities=tuple(float(p) for p in coins),
    )
