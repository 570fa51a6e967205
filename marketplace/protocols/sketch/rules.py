"""What reading a `sketch` scenario asks of the protocol (:class:`marketplace.plugins.ScenarioRules`):
its checks, each party's release plan (:mod:`marketplace.protocols.sketch.plan`) and the public box a
request for a schema-described marketplace leaves out. Apart from the exchange, and importing no role,
so that reading a scenario stays cheap; the exchange answers with the same functions.
"""

from __future__ import annotations

import math
from typing import Any

from marketplace.plugins import ScenarioRules
from marketplace.protocols.sketch.plan import release_plan
from marketplace.scenario.config import ScenarioConfig
from marketplace.schema import SchemaError


def check_plan(config: ScenarioConfig) -> None:
    """Refuse, before anything starts, a scenario without a public box, or that asks for a logistic
    regression on an unsketched label. Whether each owner's one release fits its budget is its
    release plan's check (:func:`marketplace.protocols.sketch.plan.release_plan`)."""
    s = config.sketch
    if not s.lower:
        raise SchemaError(
            "sketch.lower",
            "the public box of the records: one lower bound per attribute "
            "(and sketch.upper), never fitted on the data"
            + (
                " (in a marketplace described by its public schema, a request served there without a box "
                "gets the schema's feature ranges)"
                if config.data.schema_only
                else ""
            ),
            "nothing",
        )
    if s.queries.logistic_regression and not s.include_label:
        raise SchemaError(
            "sketch.queries.logistic_regression",
            "sketch.include_label: true (the label must be sketched)",
            "include_label false",
        )


def public_defaults(section: dict[str, Any] | None, schema: Any) -> dict[str, Any]:
    """The ``sketch:`` section of a request (raw, as written) for a marketplace described by its
    public schema ``schema`` (a :class:`~marketplace.data.public_schema.DataSchema`, or its raw
    mapping): the public box ``lower``/``upper`` taken from the schema's feature ranges when the
    request leaves both out or empty. The ranges are public (nobody's rows went into them), so the
    box stays public. A box the request gives is the consumer's own public choice (a narrower one
    clips the owners' records to it, or refuses them under ``clip: false``) and is kept, but it must
    give one bound per column of the schema on each side: one that does not raises
    :class:`~marketplace.schema.SchemaError` naming the field, the schema's columns and the request's
    bounds. The section given is not changed: a new one is returned."""
    from marketplace.data.public_schema import DataSchema
    from marketplace.schema import build

    filled = dict(section or {})
    if not isinstance(schema, DataSchema):
        schema = build(DataSchema, dict(schema), "data.schema")
    if not filled.get("lower") and not filled.get("upper"):
        filled["lower"] = [float(v) for v in schema.lower]
        filled["upper"] = [float(v) for v in schema.upper]
        return filled
    for key, bounds in (("lower", schema.lower), ("upper", schema.upper)):
        _check_width(key, filled.get(key), [float(v) for v in bounds], schema.feature_names)
    return filled


def _check_width(key: str, given: Any, ranges: list[float], columns: tuple[str, ...]) -> None:
    """Refuse ``sketch.<key>`` unless it is one finite number per column of the schema (``ranges`` are the
    schema's own bounds, quoted in the error as what leaving the box out gives)."""
    try:
        fits = (
            isinstance(given, list | tuple)
            and len(given) == len(columns)
            and all(math.isfinite(float(v)) for v in given)
        )
    except (TypeError, ValueError):
        fits = False
    if fits:
        return
    shown = "[" + ", ".join(f"{v:g}" for v in ranges) + "]"
    raise SchemaError(
        f"sketch.{key}",
        f"one {key} bound per column of the marketplace's schema ({len(columns)}: {', '.join(columns)}), "
        f"or no box at all (the sketch then takes the schema's ranges, {key} {shown})",
        repr(given) if not isinstance(given, list) else "[" + ", ".join(str(v) for v in given) + "]",
    )


class SketchRules(ScenarioRules):
    """What reading a `sketch` scenario asks of the protocol: this module's functions."""

    check_plan = staticmethod(check_plan)
    release_plan = staticmethod(release_plan)
    public_defaults = staticmethod(public_defaults)
