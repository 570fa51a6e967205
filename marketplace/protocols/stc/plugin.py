"""The `stc` protocol's registration (entry point ``stc`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.stc.config import StcConfig

PROTOCOL = ProtocolSpec(
    name="stc",
    config=StcConfig,
    exchange="marketplace.protocols.stc.exchange:StcExchange",
    scenario="marketplace.protocols.stc.rules:StcRules",
    messages="marketplace.protocols.stc.messages",
    report_schema="marketplace.protocols.stc:report.schema.json",
    data_sources=("marketplace.protocols.stc.source",),
    # what of an owner's result may reach another party: the size of its release (its centers, sent to
    # the consumer) and the ledger's account of it; its row count and timings stay with it
    owner_publishes=("release", "privacy", "end_status"),
    summary="k points of the consumer's target set to label, chosen with the owners' private source releases",
)
