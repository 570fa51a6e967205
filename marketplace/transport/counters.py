"""Message and byte counters per (sender, receiver, kind), kept the same way by every driver."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

HEARTBEAT = "heartbeat"


class Counters:
    """Counts what one party sent and received. Heartbeats are kept apart so that protocol counts
    do not depend on timing (and so are identical across drivers)."""

    def __init__(self) -> None:
        self.sent: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        self.received: dict[tuple[str, str, str], list[int]] = defaultdict(lambda: [0, 0])
        self.rejected: dict[str, int] = defaultdict(int)

    def record_sent(self, sender: str, receiver: str, kind: str, nbytes: int) -> None:
        row = self.sent[(sender, receiver, kind)]
        row[0] += 1
        row[1] += nbytes

    def record_received(self, sender: str, receiver: str, kind: str, nbytes: int) -> None:
        row = self.received[(sender, receiver, kind)]
        row[0] += 1
        row[1] += nbytes

    def record_rejected(self, reason: str) -> None:
        """A frame refused before reaching the role (bad message, duplicate, wrong receiver...)."""
        self.rejected[reason] += 1

    def to_dict(self) -> dict[str, Any]:
        def rows(table: dict[tuple[str, str, str], list[int]]) -> list[dict[str, Any]]:
            return [
                {"sender": s, "receiver": r, "kind": k, "count": c, "bytes": b}
                for (s, r, k), (c, b) in sorted(table.items())
            ]

        return {"sent": rows(self.sent), "received": rows(self.received), "rejected": dict(self.rejected)}
