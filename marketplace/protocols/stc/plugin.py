"""The `stc` protocol's registration (entry point ``stc`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.stc.config import StcConfig

PROTOCOL = ProtocolSpec(
    name="stc",
    config=StcConfig,
    exchange="marketplace.exchanges.stc",
    messages="marketplace.messages.kinds_stc",
    report_schema="marketplace.protocols.stc:report.schema.json",
    summary="Source-target clustering: owners release private summaries, the consumer picks k target points to label",
)
