"""The `summarize` protocol's registration (entry point ``summarize`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.summarize.config import SummarizeConfig

PROTOCOL = ProtocolSpec(
    name="summarize",
    config=SummarizeConfig,
    exchange="marketplace.protocols.summarize.exchange",
    messages="marketplace.protocols.summarize.messages",
    report_schema="marketplace.protocols.summarize:report.schema.json",
    summary="Summarize: a private summary of the owners' data that matches the consumer's target, point by point",
)
