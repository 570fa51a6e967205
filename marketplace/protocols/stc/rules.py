"""What reading an `stc` scenario asks of the protocol (:class:`marketplace.plugins.ScenarioRules`):
its checks, each party's release plan (:mod:`marketplace.protocols.stc.plan`) and the public box a
request for a schema-described marketplace leaves out. Apart from the exchange, and importing no role,
so that reading a scenario stays cheap; the exchange answers with the same functions.
"""

from __future__ import annotations

from typing import Any

from marketplace.parties import party_ids
from marketplace.plugins import ScenarioRules
from marketplace.protocols.stc.plan import release_plan, summary_release
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError


def check_plan(config: ScenarioConfig) -> None:
    """The box must be given. Whether each owner's one release fits its budget is its release
    plan's check (:func:`marketplace.protocols.stc.plan.release_plan`), but for a rho budget (notion
    zcdp), which no ledger holds: checked here, against the plan's rho."""
    s = config.stc
    if config.protocol != "stc":
        return
    if s.domain is None:
        raise SchemaError(
            "stc.domain",
            "the public box {low: [...], high: [...]} of the data"
            + (
                " (in a marketplace described by its public schema, a request served there without one gets "
                "the schema's feature ranges)"
                if config.data.schema_only
                else ""
            ),
            "nothing",
        )
    privacy = s.privacy
    if privacy.notion == "zcdp" and privacy.budget is not None:
        # a rho budget is not an (eps, delta) budget a ledger (and so the release plan's check)
        # holds: it is checked here, against the rho the plan declares
        rho = release_plan(config, party_ids(config)[1]).release(summary_release(s)).rho or 0.0
        if rho > privacy.budget:
            raise SchemaError(
                "stc.privacy.budget",
                f"a budget of at least the release's rho = {rho:g}",
                f"{privacy.budget:g}: each owner's one release would exceed it",
            )


def public_defaults(section: dict[str, Any] | None, schema: Any) -> dict[str, Any]:
    """The ``stc:`` section of a request (raw, as written) for a marketplace described by its public
    schema ``schema`` (a :class:`~marketplace.data.public_schema.DataSchema`, or its raw mapping):
    the public box ``domain`` taken from the schema's feature ranges (``low``: every lower bound,
    ``high``: every upper bound) when the request gives none. The ranges are public, so the scaling
    the noise is calibrated for stays public. A domain the request gives is kept as it is. The
    section given is not changed: a new one is returned."""
    from marketplace.data.public_schema import DataSchema
    from marketplace.schema import build

    filled = dict(section or {})
    if not isinstance(schema, DataSchema):
        schema = build(DataSchema, dict(schema), "data.schema")
    if not filled.get("domain"):
        filled["domain"] = {"low": [float(v) for v in schema.lower], "high": [float(v) for v in schema.upper]}
    return filled


class StcRules(ScenarioRules):
    """What reading an `stc` scenario asks of the protocol: this module's functions."""

    check_plan = staticmethod(check_plan)
    release_plan = staticmethod(release_plan)
    public_defaults = staticmethod(public_defaults)
