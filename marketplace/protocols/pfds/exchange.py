"""The `pfds` exchange (docs/design.md §4): roles from the scenario, the plan's checks, and the runtime's entry.

What a run releases about each party's rows, and what each release costs, is declared once in
:mod:`marketplace.protocols.pfds.plan` (:func:`release_plan` picks each party's): the budget check, the lifetime charge
(``owner_cost``, ``consumer_cost``: the :class:`~marketplace.plugins.Exchange` defaults), the sharers'
ledgers and the noise of each level are read from it.

The world of a run (the table's folds and the agents' shares, ``world.validation`` the consumer's and
``world.test`` the test fold; ``data.partition`` and ``data.consumer`` do not apply) is built by
:mod:`marketplace.protocols.pfds.world`, the report by :mod:`marketplace.protocols.pfds.report`, its
terminal display by :mod:`marketplace.protocols.pfds.display` and its sweep columns, table and plot by
:mod:`marketplace.protocols.pfds.sweeps`.
"""

from __future__ import annotations

from typing import Any

from marketplace import seeds
from marketplace.data.dataset import Dataset, World
from marketplace.parties import owner_position
from marketplace.plugins import Exchange
from marketplace.privacy.noise import NoiseOrigin
from marketplace.privacy.view import Seen
from marketplace.protocols.pfds.display import head_rows, tables
from marketplace.protocols.pfds.plan import declared_view
from marketplace.protocols.pfds.report import nothing_released, report, report_without_references
from marketplace.protocols.pfds.rules import check_plan, release_plan
from marketplace.protocols.pfds.sweeps import plot_sweep, sweep_headline, sweep_row, sweep_table
from marketplace.protocols.pfds.world import (
    labels_of,
    make_world,
    schema_of,
    sharers_of,
    tree_seeds,
)
from marketplace.roles import CONSUMER, CURATOR, Role
from marketplace.scenario.config import ScenarioConfig

# --- roles ---------------------------------------------------------------------------------


def build_role(
    config: ScenarioConfig, party: str, world: World, owner_data: Dataset | None, noise: NoiseOrigin | None = None
) -> Role:
    from marketplace.protocols.pfds.consumer import PfdsConsumer
    from marketplace.protocols.pfds.curator import PfdsCurator
    from marketplace.protocols.pfds.owner import PfdsReceiver, PfdsSharer

    sharers, receivers = sharers_of(config)
    schema = schema_of(config)
    c = config.pfds
    if party == CURATOR:
        return PfdsCurator(scenario_name=config.name, sharers=sharers, receivers=receivers, schema=schema)
    common = dict(
        scenario_name=config.name,
        schema=schema,
        sharers=sharers,
        model=c.model,
        model_seed=seeds.derive_int(config.seed, f"pfds.model.{party}"),
    )
    if party == CONSUMER:
        return PfdsConsumer(
            X=world.validation.X,
            y=labels_of(schema, world.validation),
            test_X=world.test.X,
            test_y=labels_of(schema, world.test),
            **common,
        )
    data = owner_data if owner_data is not None else world.owners[owner_position(config, party)]
    if data.X.shape[1] != schema.d:
        raise ValueError(f"{party}: data has {data.X.shape[1]} columns, the public schema has {schema.d} attributes")
    if party in receivers:
        return PfdsReceiver(party_id=party, X=data.X, y=labels_of(schema, data), **common)
    return PfdsSharer(
        party_id=party,
        X=data.X,
        y=labels_of(schema, data),
        plan=release_plan(config, party),
        h_max=c.h_max,
        t=c.t,
        p=c.p,
        max_leaves=c.max_leaves,
        attribute_choice=c.attribute_choice,
        consistency=c.consistency,
        neighbours=c.neighbours,
        secure=c.secure,
        **tree_seeds(config, party, noise),
        **common,
    )


def progress(config: ScenarioConfig, curator: Role) -> tuple[int, int]:
    return curator.progress(), 2


# --- what each owner gives up (docs/privacy.md, "pfds") ------------------------------------------


def owner_exposure(config: ScenarioConfig, report: dict[str, Any]) -> dict[str, list]:
    """Per owner: a sharer's tree and synthetic records go through the curator to every other
    agent (the consumer and every other owner), all bounded by the sharer's own ledger
    (``privacy.<owner>``); a receiving owner sends nothing derived from its rows."""
    from marketplace.reporting.per_owner import Exposure

    sharers, receivers = sharers_of(config)
    release = "this sharer's DP decision tree and noisy node counts, and the synthetic records drawn from them"
    out = {
        owner: [Exposure(observer, release, (owner,)) for observer in ("consumer", "curator", "other owners")]
        for owner in sharers
    }
    nothing = "nothing derived from this owner's rows: it receives only (pfds.sharers)"
    out |= {
        owner: [Exposure(observer, nothing) for observer in ("consumer", "curator", "other owners")]
        for owner in receivers
    }
    return out


class PfdsExchange(Exchange):
    """The runtime's entry to ``pfds`` (:class:`marketplace.plugins.Exchange`): this module's functions."""

    def secure_noise(self, config: ScenarioConfig) -> bool:
        """Whether the run draws its noise in ``secure`` mode (``pfds.secure``)."""
        return bool(config.pfds.secure)

    build_role = staticmethod(build_role)
    check_plan = staticmethod(check_plan)
    progress = staticmethod(progress)
    report = staticmethod(report)
    report_without_references = staticmethod(report_without_references)
    head_rows = staticmethod(head_rows)
    tables = staticmethod(tables)
    sweep_row = staticmethod(sweep_row)
    sweep_table = staticmethod(sweep_table)
    plot_sweep = staticmethod(plot_sweep)
    nothing_released = staticmethod(nothing_released)
    owner_exposure = staticmethod(owner_exposure)
    release_plan = staticmethod(release_plan)
    make_world = staticmethod(make_world)
    sweep_headline = sweep_headline

    def declared_view(self, config: Any) -> tuple[Seen, ...]:
        """What the curator, the consumer and the other owners receive of a sharer's rows
        (:func:`marketplace.protocols.pfds.plan.declared_view`)."""
        return declared_view(config)
