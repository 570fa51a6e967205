"""What another party is told when an owner's agent declines a session: a declared reason, never the
text of whatever error the owner met.

A decline crosses from the owner to the server, and the server puts it in the consumer's report. An
error raised while the owner reads its own file (:class:`OwnDataError`) is about its data: which line
and column break the schema, how many values are out of range, the file's own path. Those stay in the
agent's log, which only the owner reads; the other parties learn that the owner's data does not fit
the market's schema, and nothing of where or how. A ledger's decline (:class:`BudgetDeclined`, sale
terms included) is about the owner's ledger and terms, not its data, and its words go as they are: the
consumer needs them to know what to change. Any other error goes by its kind only.
"""

from __future__ import annotations

from marketplace.data.own_files import OwnDataError
from marketplace.privacy.lifetime.cost import BudgetDeclined
from marketplace.scenario import ScenarioError

OWN_DATA_REFUSED = "its own data does not fit the market's schema (its agent's log says where)"

__all__ = ["OWN_DATA_REFUSED", "declared_reason"]


def declared_reason(err: BaseException) -> str:
    """The reason an owner's agent gives the other parties for declining a session over ``err``: fixed
    for its own data, the ledger's words for a budget or terms decline, the scenario's error for a
    request it cannot read (the request is the consumer's own), and the error's kind otherwise."""
    if isinstance(err, OwnDataError):
        return OWN_DATA_REFUSED
    if isinstance(err, BudgetDeclined | ScenarioError):
        return f"{type(err).__name__}: {err}"
    return f"{type(err).__name__} (its agent's log has the details)"
