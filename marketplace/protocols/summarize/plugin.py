"""The `summarize` protocol's registration (entry point ``summarize`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.summarize.config import SummarizeConfig

PROTOCOL = ProtocolSpec(
    name="summarize",
    config=SummarizeConfig,
    exchange="marketplace.protocols.summarize.exchange:SummarizeExchange",
    scenario="marketplace.protocols.summarize.rules:SummarizeRules",
    messages="marketplace.protocols.summarize.messages",
    report_schema="marketplace.protocols.summarize:report.schema.json",
    # what of an owner's result may reach another party: how many points it handed over and rounds it
    # saw (the curator sent and counted both) and its sale; its row count, which rows it handed over
    # and its timings stay with it
    owner_publishes=("points_sent", "rounds_seen", "sale", "end_status"),
    curator_publishes="marketplace.protocols.summarize.publication:curator_published",
    summary=(
        "a summary of real points from the owners matched to the consumer's target in MMD, optionally DP towards "
        "every owner"
    ),
)
