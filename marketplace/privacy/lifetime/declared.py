"""What one party's part of a run may release about its own data, declared from public settings.

Before a run, every owner (and a consumer that keeps a ledger) is told by the run's protocol what
the run may release about its data at most: :class:`Declared`, a :class:`~.cost.Cost` under a
neighbouring relation, or no finite cost at all (a protocol that hands rows over in the clear). A
protocol's exchange module declares it with ``owner_cost(config, party)`` and ``consumer_cost(config)``;
either returns None when the party releases nothing derived from its data in that run.

The declaration reads the scenario only, never the data: whether a ledger admits a run therefore
depends on public information and the ledger's state alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from marketplace.privacy.lifetime.cost import Cost
from marketplace.privacy.lifetime.ledger import RELATION_WORDS


@dataclass(frozen=True)
class Declared:
    """A run's declared release of one party's data: ``what`` it is (for the ledger's history),
    its ``cost`` under ``relation``, or ``cost=None`` with ``unbounded`` saying why no finite DP cost
    bounds it (a ledger then declines the run)."""

    what: str
    cost: Cost | None
    relation: str
    unbounded: str = ""

    def __post_init__(self) -> None:
        if self.relation not in RELATION_WORDS:
            raise ValueError(
                f"The 'relation' of a Declared cost must be one of {list(RELATION_WORDS)}. "
                f"Got {self.relation!r} instead."
            )
        if (self.cost is None) == (not self.unbounded):
            raise ValueError(
                "A Declared release states a cost, or (cost=None) why it has none in 'unbounded'; "
                f"got cost={self.cost!r}, unbounded={self.unbounded!r}"
            )

    @classmethod
    def unbounded_release(cls, what: str, why: str, relation: str = "add/remove-one") -> Declared:
        """A release that no finite DP cost bounds (``why`` says what leaves in the clear)."""
        return cls(what=what, cost=None, relation=relation, unbounded=why)
