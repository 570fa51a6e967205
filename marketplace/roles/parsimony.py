"""The curator's parsimony ledger: every raw data point it has seen, by where it came from (and,
apart, every h1 embedding a less-trusted curator saw instead of a point)."""

from __future__ import annotations

from collections import defaultdict


class ParsimonyLedger:
    """Counts raw points the curator has seen (the consumer's D_v included; rejected points too).

    rho = points seen / (|D_s| + |D_v|): 1 means the curator saw nothing beyond what it had to.
    A less-trusted curator sees embeddings instead; ``rho_embeddings`` is the same ratio for them.
    """

    def __init__(self) -> None:
        self.by_party: dict[str, int] = defaultdict(int)
        self.embeddings_by_party: dict[str, int] = defaultdict(int)

    def see(self, party: str, count: int = 1, *, raw: bool = True) -> None:
        (self.by_party if raw else self.embeddings_by_party)[party] += count

    @property
    def points_seen(self) -> int:
        return sum(self.by_party.values())

    def report(self, summary_size: int, validation_size: int) -> dict[str, object]:
        denom = summary_size + validation_size
        return {
            "points_seen": self.points_seen,
            "summary_size": summary_size,
            "validation_size": validation_size,
            "rho": self.points_seen / denom if denom else None,
            "by_party": dict(sorted(self.by_party.items())),
            "embeddings_seen": sum(self.embeddings_by_party.values()),
            "rho_embeddings": sum(self.embeddings_by_party.values()) / denom if denom else None,
        }
