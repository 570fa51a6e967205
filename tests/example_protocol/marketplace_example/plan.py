"""What a run of ``noisy_count`` releases about each party's data, declared once: its release plan.

Each owner releases one count of its rows of class ``label`` plus Laplace noise. One added or
removed row changes that count by at most 1 (L1 sensitivity 1), so the release is epsilon-DP for
the owner's rows under add/remove-one of a row. The consumer sends nothing derived from data of its
own. The runtime checks the plan against ``noisy_count.budget`` before a run starts and charges it
to an owner's lifetime ledger; the owner's role records its release on the plan's ledger and draws
its noise at the plan's epsilon and sensitivity, so the cost is written here and nowhere else.
"""

from __future__ import annotations

from typing import Any

from marketplace.privacy.neighbouring import add_remove_one
from marketplace.privacy.plan import Account, Release, ReleasePlan
from marketplace.privacy.view import RUNTIME, Seen
from marketplace.roles import CONSUMER, CURATOR

NAME = "noisy_count"
COUNT = "noisy_count.laplace"
"""The owner's one release, by the name its ledger records."""

VIEW: tuple[Seen, ...] = (
    *RUNTIME,
    Seen("owners", "count_request.label", "public", "the scenario's label"),
    Seen("curator", "count_release.value", "release", "the owner's noisy count"),
    Seen("curator", "count_release.epsilon", "public", "what the release cost, from the plan"),
    Seen("consumer", "count_total.total", "public", "the sum of the owners' noisy counts"),
    Seen("consumer", "count_total.owners", "public", "the owners whose releases it adds up"),
    Seen("consumer", "report", "public", "the run report: the total, the owners' ledgers and the run's counts"),
)
"""What each other party receives of an owner's data (:mod:`marketplace.privacy.view`): its release
reaches the curator, and the consumer only what is computed from releases."""


def release_plan(config: Any, party: str) -> ReleasePlan:
    """The releases of ``party``'s data in a run of ``config``: one Laplace count for an owner,
    nothing for the consumer."""
    if party == CONSUMER:
        return ReleasePlan(party=party, what=f"{NAME}: nothing ({config.name})", relation="add/remove-one")
    s = config.noisy_count
    owner = Account(
        name="owner",
        dataset=party,
        neighbouring=add_remove_one(f"a row of {party}'s data"),
        theorem="basic",
        budget=None if s.budget is None else (s.budget, 0.0),
        budget_keys=(f"{NAME}.budget",),
    )
    count = Release(
        name=COUNT,
        account="owner",
        to=(CURATOR, CONSUMER),
        mechanism="laplace",
        sensitivity=1.0,
        eps=s.epsilon,
    )
    return ReleasePlan(
        party=party,
        what=f"{NAME}: one noisy count of {party}'s rows ({config.name})",
        relation="add/remove-one",
        accounts=(owner,),
        releases=(count,),
    )
