"""What reading a `summarize` scenario asks of the protocol (:class:`marketplace.plugins.ScenarioRules`):
its checks and each party's release plan, from the resolved privacy schedule
(:mod:`marketplace.protocols.summarize.private_schedule`). Apart from the exchange, and importing no
role, so that reading a scenario stays cheap; the exchange answers with the same functions, and its
private curator is built with the same cached :func:`schedule_of`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from marketplace.plugins import ScenarioRules
from marketplace.roles import CONSUMER
from marketplace.scenario.config import ScenarioConfig

if TYPE_CHECKING:
    from marketplace.protocols.summarize.plan import SummarizePlan


@functools.lru_cache(maxsize=16)
def schedule_of(privacy: Any, features: int, rounds: int, seed_set_size: int) -> Any:
    """The run's resolved :class:`PrivateSchedule`: tens of milliseconds (the Gaussian release's
    calibration), so resolved once per setting rather than once per owner and request."""
    from marketplace.protocols.summarize.private_schedule import PrivateSchedule

    return PrivateSchedule.resolve(privacy, features=features, rounds=rounds, seed_set_size=seed_set_size)


@functools.lru_cache(maxsize=16)
def _private_plans(
    privacy: Any, features: int, rounds: int, seed_set_size: int, owners: int, scenario: str
) -> tuple[Any, Any]:
    """The plans of a private run, an owner's with ``{owner}`` for its name: one per setting (10,000
    owners share it)."""
    return schedule_of(privacy, features, rounds, seed_set_size).plans(
        rounds=rounds,
        seed_set_size=seed_set_size,
        owners=owners,
        owner="{owner}",
        scenario=scenario,
        budget_validation=privacy.budget_validation,
        budget_summary=privacy.budget_summary,
    )


def release_plan(config: ScenarioConfig, party: str) -> SummarizePlan:
    """Every release of ``party``'s data (an owner's id, or ``"consumer"``) that a run of ``config``
    may make, declared once (:meth:`PrivateSchedule.plans
    <marketplace.protocols.summarize.private_schedule.PrivateSchedule.plans>`, which says what an
    owner's cost covers and what it does not): the auction's R selections and D_s's g_l releases for
    an owner, g~ for the consumer. Its budget check names ``summarize.privacy.budget_summary`` or
    ``budget_validation``. The non-private form has no finite cost: it broadcasts D_s's exact mean
    embedding, asks the exact best bidder and sends D_v's mean embedding in the clear; a ledger
    declines it."""
    from marketplace.privacy.neighbouring import REPLACE_ONE, REPLACE_ONE_DISTINCT
    from marketplace.protocols.summarize.plan import NON_PRIVATE_CONSUMER, NON_PRIVATE_OWNER, SummarizePlan

    s = config.summarize
    if not s.privacy.enabled:
        if party == CONSUMER:
            return SummarizePlan(
                party=party,
                what=f"summarize: g~, the release of D_v ({config.name})",
                relation=REPLACE_ONE,
                unbounded=NON_PRIVATE_CONSUMER,
            )
        return SummarizePlan(
            party=party,
            what=f"summarize: {party}'s points ({config.name})",
            relation=REPLACE_ONE_DISTINCT,
            unbounded=NON_PRIVATE_OWNER,
        )
    owner_plan, consumer_plan = _private_plans(
        s.privacy, s.features, s.rounds, config.data.seed_set.size, config.parties.owners, config.name
    )
    if party == CONSUMER:
        return consumer_plan
    return dataclasses.replace(owner_plan, party=party, what=owner_plan.what.replace("{owner}", party))


def check_plan(config: ScenarioConfig) -> None:
    """Refuse, before anything starts, a private run whose settings cannot be resolved into a
    schedule (a delta at which the Gaussian release would have no eps to match: a SchemaError naming
    it). The budgets are checked against each party's :func:`release_plan` by the runtime
    (:meth:`ReleasePlan.check <marketplace.privacy.plan.ReleasePlan.check>`)."""
    s = config.summarize
    if s.privacy.enabled:
        schedule_of(s.privacy, s.features, s.rounds, config.data.seed_set.size)


class SummarizeRules(ScenarioRules):
    """What reading a `summarize` scenario asks of the protocol: this module's functions."""

    check_plan = staticmethod(check_plan)
    release_plan = staticmethod(release_plan)
