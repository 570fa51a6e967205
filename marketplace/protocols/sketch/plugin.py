"""The `sketch` protocol's registration (entry point ``sketch`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.sketch.config import SketchConfig

PROTOCOL = ProtocolSpec(
    name="sketch",
    config=SketchConfig,
    exchange="marketplace.protocols.sketch.exchange:SketchExchange",
    scenario="marketplace.protocols.sketch.rules:SketchRules",
    messages="marketplace.protocols.sketch.messages",
    report_schema="marketplace.protocols.sketch:report.schema.json",
    commands="marketplace.protocols.sketch.commands:add_parser",
    # what of an owner's result may reach another party: whether it released, and its ledger's account
    # of that release (its row count and timings stay with it: the count is what the noisy count hides)
    owner_publishes=("released", "privacy", "end_status"),
    summary="one mergeable DP sketch per owner; statistics estimated from it by M²M at no extra privacy cost",
)
