"""The neighbouring relations a ledger's budget, and a declared cost, may be stated under, and how
a ledger restates a cost declared under another relation than its own. Pure: no file is read.
"""

from __future__ import annotations

from marketplace.privacy.lifetime.cost import Cost, LedgerInputError, fail, restate
from marketplace.privacy.neighbouring import ADD_REMOVE_ONE, REPLACE_ONE, REPLACE_ONE_DISTINCT

RELATION_WORDS = (ADD_REMOVE_ONE, REPLACE_ONE, REPLACE_ONE_DISTINCT)
"""The relations a ledger's budget, and a declared cost, may be stated under
(:mod:`marketplace.privacy.neighbouring`); :func:`.cost.restate` says which converts to which."""


def relation_kind(text: str) -> str | None:
    """The relation a ledger's relation text states (one of :data:`RELATION_WORDS`), or None when
    the text starts with none of them. The longest match wins: "replace-one keeping the owner's
    number of distinct points (...)" is that narrower relation, never plain replace-one."""
    for word in sorted(RELATION_WORDS, key=len, reverse=True):
        if text == word or text.startswith(word + " "):
            return word
    return None


def restated(cost: Cost, relation: str | None, owner: str, ledger_relation: str) -> Cost | str | None:
    """``cost``, stated under ``relation`` (None: the ledger's own), restated under the relation of
    ``owner``'s ledger (its text ``ledger_relation``): a Cost, None when it already is, or why it
    cannot be (a reason, for the decline)."""
    if relation is None:
        return None
    if relation not in RELATION_WORDS:
        raise fail("relation", "LifetimeLedger.reserve", f"one of {list(RELATION_WORDS)} or None", relation)
    try:
        again = restate(cost, relation, relation_kind(ledger_relation))
    except LedgerInputError as err:
        hint = (
            " (a ledger created with lifetime.relation: replace-one-distinct takes it)"
            if relation == REPLACE_ONE_DISTINCT
            else ""
        )
        return f"{owner}: this ledger's budget is stated under {ledger_relation!r}, and {err}{hint}"
    return None if again is cost else again
