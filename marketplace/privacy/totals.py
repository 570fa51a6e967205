"""How a ledger's steps add up to one (eps, delta), and which accountant produced each part of it.

Steps with the same (eps, delta) form a homogeneous group, composed by the ledger's theorem (or
basic composition when that is smaller); zCDP steps are summed in rho; Gaussian steps are kept
apart, since they compose exactly (:mod:`.gdp`). :meth:`StepGroups.compose_parts` returns the total
and its parts, each an accountant label with the steps it covers, so that a report names only the
theorems actually used (:func:`accountant_text`). :class:`~marketplace.privacy.ledger.PrivacyLedger`
states the rules in full.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from marketplace.privacy.composition import (
    MAX_OPTIMAL_STEPS,
    Guarantee,
    advanced,
    compose_delta,
    optimal,
    zcdp_of_pure,
    zcdp_to_dp,
)
from marketplace.privacy.gdp import gaussian_eps
from marketplace.privacy.steps import Step

EXACT_GAUSSIAN = "exact Gaussian (privacy-loss distribution of the composed Gaussian mechanism)"
BASIC = "basic composition"
ADVANCED = "advanced composition (Dwork-Rothblum-Vadhan)"
OPTIMAL = "optimal composition (Kairouz-Oh-Viswanath)"
ZCDP = "zCDP -> (eps, delta) by Canonne-Kamath-Steinke"
NO_BOUND = "no finite bound (no slack delta left for its zCDP or Gaussian steps)"
NOTHING_SPENT = "nothing spent"
ACCOUNTANTS = (EXACT_GAUSSIAN, BASIC, ADVANCED, OPTIMAL, ZCDP, NO_BOUND, NOTHING_SPENT)
"""What :meth:`PrivacyLedger.accountant` says produced a figure (one of these, or several joined)."""


@dataclass(frozen=True)
class StepGroups:
    """Steps aggregated: counts per (eps, delta), the summed rho of zCDP steps, and the summed rho
    of Gaussian steps (kept apart: they compose exactly)."""

    counts: tuple[tuple[tuple[float, float], int], ...] = ()
    rho: float = 0.0
    gauss_rho: float = 0.0

    def plus(self, steps: Iterable[Step]) -> StepGroups:
        counts, rho, gauss_rho = dict(self.counts), self.rho, self.gauss_rho
        for s in steps:
            if s.count == 0:
                continue
            if s.rho is not None:  # a Gaussian step is a rho step (Step.__post_init__)
                if s.gaussian:
                    gauss_rho += s.count * s.rho
                else:
                    rho += s.count * s.rho
            else:
                key = s.eps_delta()
                counts[key] = counts.get(key, 0) + s.count
        return StepGroups(tuple(counts.items()), rho, gauss_rho)

    def own_delta(self) -> float:
        return sum(k * delta0 for (_, delta0), k in self.counts)

    def compose_parts(self, theorem: str, slack: float, gaussian: str = "exact") -> tuple[Guarantee, Parts]:
        """The total, and which accountant produced each part of it (see :class:`PrivacyLedger`)."""
        counts = dict(self.counts)
        rho_cover = (("zcdp",) if self.rho > 0 else ()) + (("gaussian",) if self.gauss_rho > 0 else ())
        conservative = compose_groups(counts, self.rho + self.gauss_rho, theorem, slack, rho_cover)
        if self.gauss_rho == 0 or gaussian == "zcdp":
            return conservative
        if slack <= 0:
            return conservative  # a Gaussian has no (eps, 0) guarantee: infinite either way
        mu = math.sqrt(2 * self.gauss_rho)
        if not counts and self.rho == 0:
            return Guarantee(gaussian_eps(mu=mu, delta=slack), slack), ((EXACT_GAUSSIAN, ("gaussian",)),)
        rest, parts = compose_groups(counts, self.rho, theorem, slack / 2, ("zcdp",) if self.rho > 0 else ())
        exact = Guarantee(rest.eps + gaussian_eps(mu=mu, delta=slack / 2), rest.delta + slack / 2)
        if exact.eps <= conservative[0].eps and exact.delta <= conservative[0].delta:
            return exact, (*parts, (EXACT_GAUSSIAN, ("gaussian",)))
        return conservative


Parts = tuple[tuple[str, tuple], ...]
"""(accountant label, the steps it covers) per part of a total: a cover holds ``("eps", (eps0,
delta0))`` for a group of identical (eps, delta) steps, ``"zcdp"`` and ``"gaussian"``."""


def covers(step: Step, cover: tuple) -> bool:
    """Whether ``step`` is among the steps a part's ``cover`` stands for."""
    if step.gaussian:
        return "gaussian" in cover
    if step.rho is not None:
        return "zcdp" in cover
    return ("eps", (step.eps, step.delta)) in cover


def accountant_text(parts: Parts, steps: Iterable[Step]) -> str:
    """The accountant of a total in words: the one label when a single kind covers everything,
    else each part with the steps it covers, and how the parts were added."""
    if not parts:
        return NOTHING_SPENT
    if len(parts) == 1 or all(label == BASIC for label, _ in parts):
        return parts[0][0]  # basic composition of parts composed by basic composition is basic composition
    steps = [s for s in steps if s.count > 0]
    described = []
    for label, cover in parts:
        counts: dict[str, int] = {}
        for step in steps:
            if covers(step, cover):
                counts[step.mechanism] = counts.get(step.mechanism, 0) + step.count
        described.append(f"{label} for " + ", ".join(f"{n} x {m}" for m, n in counts.items()))
    return "; ".join(described) + "; the parts added by basic composition"


def compose_groups(
    groups: dict[tuple[float, float], int], rho: float, theorem: str, slack: float, rho_cover: tuple = ("zcdp",)
) -> tuple[Guarantee, Parts]:
    """See :class:`PrivacyLedger`: groups by the theorem (or basic), then basic across groups.
    ``rho_cover``: the steps the summed ``rho`` stands for (zCDP and/or Gaussian steps)."""
    if theorem == "zcdp":
        return compose_groups_zcdp(groups, rho, slack, rho_cover)
    n_shares = len(groups) + (rho > 0)
    share = slack / n_shares if n_shares else 0.0
    eps = delta = 0.0
    parts: list[tuple[str, tuple]] = []
    for (eps0, delta0), k in groups.items():
        best, label = Guarantee(k * eps0, compose_delta(delta0, k)), BASIC
        if theorem == "advanced" and share > 0:
            candidate = advanced(eps0, k, share, delta0=delta0)
            if candidate < best:
                best, label = candidate, ADVANCED
        elif theorem == "optimal" and k * delta0 + share > 0 and k <= MAX_OPTIMAL_STEPS:
            candidate = Guarantee(*optimal(eps0, k, min(k * delta0 + share, 1 - 1e-16), delta0=delta0))
            if candidate < best:
                best, label = candidate, OPTIMAL
        eps, delta = eps + best.eps, delta + best.delta
        parts.append((label, (("eps", (eps0, delta0)),)))
    if rho > 0:
        eps += zcdp_to_dp(rho, share, method="cks") if share > 0 else math.inf
        delta += share
        parts.append((ZCDP if share > 0 else NO_BOUND, rho_cover))
    return Guarantee(eps, delta), tuple(parts)


def compose_groups_zcdp(
    groups: dict[tuple[float, float], int], rho_steps: float, slack: float, rho_cover: tuple
) -> tuple[Guarantee, Parts]:
    """Under ``theorem="zcdp"``: pure steps and zCDP steps in zCDP, converted once with the whole
    slack (or pure steps by basic composition, when that is smaller and nothing else is in zCDP);
    approximate-DP steps added by basic composition."""
    eps = delta = pure_basic = 0.0
    rho = rho_steps
    approximate: list[tuple[str, tuple]] = []
    pure: list[tuple] = []
    for (eps0, delta0), k in groups.items():
        if delta0 > 0:
            eps, delta = eps + k * eps0, delta + compose_delta(delta0, k)
            approximate.append((BASIC, (("eps", (eps0, delta0)),)))
        else:
            rho += k * zcdp_of_pure(eps0)
            pure_basic += k * eps0
            pure.append(("eps", (eps0, delta0)))
    if rho == 0:
        return Guarantee(eps, delta), tuple(approximate)
    converted = zcdp_to_dp(rho, slack, method="cks") if slack > 0 else math.inf
    if rho_steps == 0 and pure_basic <= converted:
        return Guarantee(eps + pure_basic, delta), (*approximate, (BASIC, tuple(pure)))
    cover = (*pure, *(rho_cover if rho_steps > 0 else ()))
    return Guarantee(eps + converted, delta + slack), (*approximate, (ZCDP if slack > 0 else NO_BOUND, cover))
