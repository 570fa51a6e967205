"""The `sketch` protocol's registration (entry point ``sketch`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.sketch.config import SketchConfig

PROTOCOL = ProtocolSpec(
    name="sketch",
    config=SketchConfig,
    exchange="marketplace.protocols.sketch.exchange:SketchExchange",
    messages="marketplace.protocols.sketch.messages",
    report_schema="marketplace.protocols.sketch:report.schema.json",
    commands="marketplace.protocols.sketch.commands:add_parser",
    summary="one mergeable DP sketch per owner; statistics estimated from it by M²M at no extra privacy cost",
)
