"""The `pfds` protocol's registration (entry point ``pfds`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.pfds.config import PfdsConfig

PROTOCOL = ProtocolSpec(
    name="pfds",
    config=PfdsConfig,
    exchange="marketplace.protocols.pfds.exchange:PfdsExchange",
    messages="marketplace.protocols.pfds.messages",
    report_schema="marketplace.protocols.pfds:report.schema.json",
    data_sources=("marketplace.protocols.pfds.source",),
    summary="DP trees and DP synthetic labelled records from every sharer, and models trained on them",
)
