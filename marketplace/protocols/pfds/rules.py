"""What reading a `pfds` scenario asks of the protocol (:class:`marketplace.plugins.ScenarioRules`):
its checks and each party's release plan, from the settings alone. Apart from the exchange, and
importing no role, so that reading a scenario stays cheap; the exchange answers with the same functions.
"""

from __future__ import annotations

from marketplace.plugins import ScenarioRules
from marketplace.privacy.plan import ReleasePlan
from marketplace.protocols.pfds.plan import nothing_plan, sharer_plan
from marketplace.protocols.pfds.world import is_sharer, partition_attribute, schema_of
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError


def release_plan(config: ScenarioConfig, party: str) -> ReleasePlan:
    """Every release of ``party``'s rows in a run (:mod:`marketplace.protocols.pfds.plan`): a sharer's
    tree levels and counted levels; nothing for an owner that only receives, or for the consumer."""
    return sharer_plan(config, party) if is_sharer(config, party) else nothing_plan(config, party)


def check_plan(config: ScenarioConfig) -> None:
    """Refuse, before anything starts, a run that cannot work. Each sharer's spend is checked against
    ``pfds.budget`` from its release plan (:func:`release_plan`)."""
    from marketplace.protocols.pfds import ClassLabels

    schema = schema_of(config)
    c = config.pfds
    classification = isinstance(schema.label, ClassLabels)
    if classification == (c.model == "linear"):
        task = "classification" if classification else "regression"
        wanted = "'logistic' or 'svm'" if classification else "'linear'"
        raise SchemaError(
            "pfds.model", f"{wanted} for the {task} table {config.data.source.table.dataset!r}", repr(c.model)
        )
    if c.sharers is not None and c.sharers > config.parties.owners:
        raise SchemaError(
            "pfds.sharers", f"at most parties.owners = {config.parties.owners} (the sharers are owners)", str(c.sharers)
        )
    attribute = partition_attribute(config)
    numeric = [a.name for a in schema.attributes if a.kind == "numeric"]
    if attribute not in numeric:
        raise SchemaError(
            "pfds.partition_attribute", f"a numeric attribute of the table ({', '.join(numeric)})", repr(attribute)
        )


class PfdsRules(ScenarioRules):
    """What reading a `pfds` scenario asks of the protocol: this module's functions."""

    check_plan = staticmethod(check_plan)
    release_plan = staticmethod(release_plan)
