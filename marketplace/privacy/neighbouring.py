"""Neighbouring relations: what "one record's difference" means for a privacy ledger.

An (eps, delta) figure is only meaningful next to the pair of datasets it compares. The protocols
here use three relations, and their eps values are not comparable across them (a replace-one change
is an add and a remove, so a mechanism that is eps-DP under add/remove-one is 2 eps-DP under
replace-one in general):

* ``replace-one``: the datasets have the same size and differ in one record (summarize: D_v and
  D_s, whose releases bound every replacement);
* ``replace-one keeping the owner's number of distinct points``: replace-one, restricted to the
  replacements after which the owner whose point changed has as many distinct points as before
  (summarize's auction: an owner offers identical records once, so a replacement that creates or
  removes a duplicate changes when it runs out of points, which the auction's theorem does not
  cover and which leaks without bound). It compares fewer pairs than replace-one: a replace-one
  guarantee implies it, but not the reverse, so a figure stated under it is never charged as a
  replace-one (or add/remove-one) figure;
* ``add/remove-one``: one dataset is the other with one record added (sketch, stc, pfds).

Every :class:`~marketplace.privacy.accountant.PrivacyLedger` carries one, and reports show it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "ADD_REMOVE_ONE",
    "BUDGET_RELATIONS",
    "REPLACE_ONE_DISTINCT_NAME",
    "REPLACE_ONE",
    "REPLACE_ONE_DISTINCT",
    "RELATIONS",
    "Neighbouring",
    "add_remove_one",
    "budget_relation_name",
    "budget_relation_text",
    "replace_one",
    "replace_one_distinct",
]

REPLACE_ONE: Final = "replace-one"
REPLACE_ONE_DISTINCT: Final = "replace-one keeping the owner's number of distinct points"
ADD_REMOVE_ONE: Final = "add/remove-one"
Relation = Literal["replace-one", "replace-one keeping the owner's number of distinct points", "add/remove-one"]
"""The type of :attr:`Neighbouring.relation`: one of :data:`RELATIONS`."""
RELATIONS = (REPLACE_ONE, REPLACE_ONE_DISTINCT, ADD_REMOVE_ONE)
REPLACE_ONE_DISTINCT_NAME = "replace-one-distinct"
"""The name a scenario's ``lifetime.relation`` and a market's ``market.relation`` give
:data:`REPLACE_ONE_DISTINCT`: a replacement by a point that duplicates none of the owner's other points."""
BUDGET_RELATIONS = (ADD_REMOVE_ONE, REPLACE_ONE, REPLACE_ONE_DISTINCT_NAME)
"""The relations a lifetime budget (``lifetime.relation``, ``market.relation``) is stated under, by name
(:func:`budget_relation_text` gives the relation each names)."""


def budget_relation_text(name: str) -> str:
    """The relation a budget relation's name (one of :data:`BUDGET_RELATIONS`) stands for, as a ledger's
    relation text starts with it (``replace-one-distinct`` is :data:`REPLACE_ONE_DISTINCT`; the other
    names are their relations). Any other text is returned as it is."""
    return REPLACE_ONE_DISTINCT if name == REPLACE_ONE_DISTINCT_NAME else name


def budget_relation_name(relation: str) -> str:
    """The name a budget gives ``relation`` (the inverse of :func:`budget_relation_text`)."""
    return REPLACE_ONE_DISTINCT_NAME if relation == REPLACE_ONE_DISTINCT else relation


@dataclass(frozen=True)
class Neighbouring:
    """A neighbouring relation: ``relation`` (one of :data:`RELATIONS`), ``record`` (what one record
    is, e.g. "a row of D_v"), and ``scope`` (what the guarantee covers, and what it does not)."""

    relation: Relation
    record: str
    scope: str = ""

    def __post_init__(self) -> None:
        if self.relation not in RELATIONS:
            raise ValueError(
                f"The 'relation' parameter of Neighbouring must be one of {list(RELATIONS)}. "
                f"Got {self.relation!r} instead."
            )
        if not isinstance(self.record, str) or not self.record:
            raise ValueError(
                f"The 'record' parameter of Neighbouring must be a non-empty string. Got {self.record!r} instead."
            )

    def to_dict(self) -> dict[str, Any]:
        out = {"relation": self.relation, "record": self.record}
        if self.scope:
            out["scope"] = self.scope
        return out

    def short(self) -> str:
        """For tables: "replace-one (a row of D_v)"."""
        return f"{self.relation} ({self.record})"


def replace_one(record: str, scope: str = "") -> Neighbouring:
    return Neighbouring(REPLACE_ONE, record, scope)


def replace_one_distinct(record: str, scope: str = "") -> Neighbouring:
    """Replace-one, restricted to replacements that keep the owner's number of distinct points."""
    return Neighbouring(REPLACE_ONE_DISTINCT, record, scope)


def add_remove_one(record: str, scope: str = "") -> Neighbouring:
    return Neighbouring(ADD_REMOVE_ONE, record, scope)
