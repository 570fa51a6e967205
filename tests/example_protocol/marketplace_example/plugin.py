"""The registration: entry point ``noisy_count`` of the group ``marketplace.protocols``."""

from marketplace.plugins import ProtocolSpec
from marketplace_example.config import NoisyCountConfig

PROTOCOL = ProtocolSpec(
    name="noisy_count",
    config=NoisyCountConfig,
    exchange="marketplace_example.exchange:NoisyCountExchange",
    messages="marketplace_example.messages",
    report_schema="marketplace_example:report.schema.json",
    owner_publishes=("released", "privacy", "end_status"),  # never "rows": the true count is the secret
    summary="Each owner releases a Laplace-noised count of its rows of one class; the curator adds them up",
)
