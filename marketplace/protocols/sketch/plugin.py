"""The `sketch` protocol's registration (entry point ``sketch`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.sketch.config import SketchConfig

PROTOCOL = ProtocolSpec(
    name="sketch",
    config=SketchConfig,
    exchange="marketplace.exchanges.sketch",
    messages="marketplace.messages.kinds_sketch",
    report_schema="marketplace.protocols.sketch:report.schema.json",
    commands="marketplace.consumer.sketch_cli:add_parser",
    summary="Sketches: owners release private sketches of their data, the consumer answers statistical queries",
)
