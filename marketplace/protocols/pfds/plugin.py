"""The `pfds` protocol's registration (entry point ``pfds`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.pfds.config import PfdsConfig

PROTOCOL = ProtocolSpec(
    name="pfds",
    config=PfdsConfig,
    exchange="marketplace.exchanges.pfds",
    messages="marketplace.messages.kinds_pfds",
    report_schema="marketplace.protocols.pfds:report.schema.json",
    summary="Private federated data sharing: owners share private trees and synthetic records for model training",
)
