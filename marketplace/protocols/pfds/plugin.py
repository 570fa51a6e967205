"""The `pfds` protocol's registration (entry point ``pfds`` of the ``marketplace.protocols`` group)."""

from marketplace.plugins import ProtocolSpec
from marketplace.protocols.pfds.config import PfdsConfig

PROTOCOL = ProtocolSpec(
    name="pfds",
    config=PfdsConfig,
    exchange="marketplace.protocols.pfds.exchange:PfdsExchange",
    scenario="marketplace.protocols.pfds.rules:PfdsRules",
    messages="marketplace.protocols.pfds.messages",
    report_schema="marketplace.protocols.pfds:report.schema.json",
    data_sources=("marketplace.protocols.pfds.source",),
    # what of an owner's result may reach another party: its DP releases (tree leaves, synthetic rows)
    # with their ledger, and what it received; its row count, its model (fitted on its own rows, no DP
    # release) and its timings stay with it
    owner_publishes=(
        "shares",
        "privacy",
        "tree_leaves",
        "synthetic_rows",
        "trees_received",
        "datasets_received",
        "shared_rows",
        "end_status",
    ),
    summary="DP trees and DP synthetic labelled records from every sharer, and models trained on them",
)
