"""What a run of ``stc`` releases about each party's data, declared once: its release plan.

Each owner releases one private summary S' of its source set (:mod:`.release`, NAS or NNA) to the
curator, which checks it and forwards it to the consumer: under notion ``dp`` eps-DP with Laplace
noise (calibrated to the release's L1 sensitivity), under ``zcdp`` rho-zCDP with Gaussian noise (L2
sensitivity), recorded as a Gaussian mechanism (its (eps, delta) as ``stc.privacy.gaussian_accountant``
says) or, in ``secure`` mode (a discrete Gaussian, certified in zCDP only), as plain rho-zCDP; under
add/remove-one of a point of S, on the owner's own ledger (its (eps, delta) stated at delta =
:data:`REPORT_DELTA` under zcdp). The consumer's target points T are sent to the curator and owners
in the clear: no finite cost bounds them.

``stc.privacy.budget`` is an eps budget under notion dp, which the owner's ledger holds (the plan's
check refuses a plan past it), and a rho budget under zcdp, which no ledger holds (an account's
budget is an (eps, delta)): :func:`marketplace.protocols.stc.exchange.check_plan` checks that one,
against the rho declared here.

The sensitivity of a release grows with the number n and width d of the target points it answers
(T, or its coreset), which are public but not settings: the plan from the settings alone
(:func:`release_plan`) states it for n = 1 target point of the box's width (``stc.domain``), and
:func:`at_target` states it for the points the owner was sent, which is what the owner's noise is
calibrated to. Everything that needs a release's eps or rho reads it from here: the budget check
before a run, the owner's lifetime charge, its ledger entry and its noise.

What the curator, the consumer and the other owners receive of an owner's data is declared here too
(:data:`VIEW`): the owner's summary S' is its one release; T, which the curator and the other owners
receive, is the consumer's, not the owner's; everything else is public (settings, or computed from
the summaries and T).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from marketplace.privacy.neighbouring import add_remove_one
from marketplace.privacy.plan import Account, Release, ReleasePlan
from marketplace.privacy.view import REPORT, RUNTIME, Seen
from marketplace.roles import CONSUMER, CURATOR

ACCOUNT = "owner"
"""The owner's one ledger (named after the owner in a report)."""
BUDGET_KEY = "stc.privacy.budget"
REPORT_DELTA = 1e-6
"""delta at which a zCDP ledger states its (eps, delta) equivalent (rho itself is the guarantee)."""
CLEAR = "the consumer's target points are sent to the curator and owners in the clear"


def summary_release(settings: Any) -> str:
    """The name the ledger records for an owner's one summary (``stc.nas`` or ``stc.nna``)."""
    return f"stc.{settings.release}"


def _sensitivity(settings: Any, n: int, d: int) -> float:
    from marketplace.protocols.stc.release import nas_sensitivity, nna_sensitivity

    norm = "L1" if settings.privacy.notion == "dp" else "L2"
    if settings.release == "nas":
        return nas_sensitivity(n=n, d=d, t=settings.t, norm=norm)
    return nna_sensitivity(d=d, norm=norm)


def owner_plan(party: str, settings: Any, scenario_name: str, *, target: tuple[int, int] | None = None) -> ReleasePlan:
    """The plan of owner ``party`` under ``settings`` (the ``stc:`` section): its one summary, with
    the sensitivity for ``target`` = (n, d) target points (default: one point of the box's width)."""
    p = settings.privacy
    relation = add_remove_one(f"a row of {party}'s source set S")
    if p.notion == "dp":
        account = Account(
            name=ACCOUNT,
            dataset=party,
            neighbouring=relation,
            theorem="basic",
            budget=None if p.budget is None else (p.budget, 0.0),
            budget_keys=(BUDGET_KEY,),
        )
        cost: dict[str, Any] = {"eps": p.epsilon}
    else:
        # a rho budget is no (eps, delta) budget a ledger holds: stc's check_plan checks it
        account = Account(
            name=ACCOUNT,
            dataset=party,
            neighbouring=relation,
            theorem="zcdp",
            delta=REPORT_DELTA,
            gaussian=p.gaussian_accountant,
        )
        # continuous Gaussian noise: accounted exactly; secure mode's discrete Gaussian: as zCDP
        cost = {"rho": p.rho, "gaussian": not p.secure}
    norm = "L1" if p.notion == "dp" else "L2"
    if target is None:
        domain = settings.domain
        target = (1, len(domain.low) if domain is not None else 1)
        norm += ", at 1 target point: the owner calibrates to the points it is sent"
    summary = Release(
        name=summary_release(settings),
        account=ACCOUNT,
        to=(CURATOR, CONSUMER),
        mechanism="laplace" if p.notion == "dp" else "gaussian_zcdp",
        sensitivity=_sensitivity(settings, *target),
        norm=norm,
        **cost,
    )
    return ReleasePlan(
        party=party,
        what=f"stc: one summary of {party}'s source set ({scenario_name})",
        relation="add/remove-one",
        accounts=(account,),
        releases=(summary,),
    )


def at_target(plan: ReleasePlan, settings: Any, n: int, d: int) -> ReleasePlan:
    """``plan`` with its summary's sensitivity for the n x d target points the owner was sent (its
    cost unchanged)."""
    name, norm = summary_release(settings), "L1" if settings.privacy.notion == "dp" else "L2"
    releases = tuple(
        dataclasses.replace(r, sensitivity=_sensitivity(settings, n, d), norm=norm) if r.name == name else r
        for r in plan.releases
    )
    return dataclasses.replace(plan, releases=releases)


def release_plan(config: Any, party: str) -> ReleasePlan:
    """The releases of ``party``'s data in a run of ``config``: an owner's one summary; the
    consumer's target points, in the clear (unbounded)."""
    if party == CONSUMER:
        return ReleasePlan(
            party=party, what=f"stc: the target points ({config.name})", relation="add/remove-one", unbounded=CLEAR
        )
    return owner_plan(party, config.stc, config.name)


# --- what each other party receives of an owner's data -------------------------------------------

_TARGET = (
    "the consumer's target points T (or their coreset), which it sends in the clear (its own plan "
    "declares them unbounded): nothing of an owner's data"
)

VIEW: tuple[Seen, ...] = (
    *RUNTIME,
    *REPORT,
    # the other owners: the curator's request, the same for every owner
    Seen("owners", "stc_request.points", "public", _TARGET + ", forwarded by the curator"),
    # the curator: the consumer's T, and the owner's one summary
    Seen("curator", "stc_target.points", "public", _TARGET),
    Seen(
        "curator", "stc_release.centers", "release", "the owner's private summary S' of its source set: noisy centres"
    ),
    Seen("curator", "stc_release.method", "public", "the release's method (nna or nas), from the settings"),
    Seen("curator", "stc_release.notion", "public", "the privacy notion (dp or zcdp), from the settings"),
    Seen("curator", "stc_release.cost", "public", "what the release cost (eps or rho), from the plan"),
    # the consumer: every owner's summary
    Seen("consumer", "stc_releases.centers", "release", "every owner's private summary S', stacked in owner order"),
    Seen("consumer", "stc_releases.counts", "public", "how many centres each owner's summary holds, read from it"),
    Seen("consumer", "stc_releases.owners", "public", "the owners whose summaries are forwarded"),
    # the consumer: the protocol's sections of the run report
    Seen(
        "consumer",
        "report.choice",
        "public",
        "the k points of T the consumer chose, from T and the owners' summaries",
    ),
    Seen(
        "consumer",
        "report.metrics",
        "public",
        "the choice's figures the consumer computes from T and the owners' summaries (its estimated "
        "cost, the costs of the summaries alone and of its choice alone, how many centres it got), k "
        "and T's size; in a deployment the cost under the true source set, its size and the references are absent",
    ),
)
"""What each other party receives of an owner's data (:mod:`marketplace.privacy.view`): the other
owners and the curator the consumer's T, the curator and the consumer the owner's summary S' (its
one release), and the consumer the report of the choice it made from them."""
