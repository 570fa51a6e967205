"""The consumer of ``noisy_count``: say hello, then keep the total the curator sends."""

from __future__ import annotations

from typing import Any

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.roles import CONSUMER, Role, Send
from marketplace_example.messages import CountTotal, NoisyCountMessage


class NoisyCountConsumer(Role):
    """Receives ``count_total``; sends nothing of its own data."""

    role_name = "consumer"

    def __init__(self, *, scenario_name: str) -> None:
        super().__init__()
        self.party_id = CONSUMER
        self.scenario_name = scenario_name
        self.total: float | None = None
        self.owners: list[str] = []
        self.end_status = ""

    def start(self) -> list[Send]:
        return [self.hello("noisy_count")]

    def handle(self, message: Envelope[NoisyCountMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case CountTotal(total=total, owners=owners):
                if self.total is not None:
                    raise ProtocolError(party=message.sender, kind="count_total", reason="the total already arrived")
                self.total, self.owners = total, list(owners)
                return []
            case Shutdown(reason=reason):
                if self.total is None:
                    self.failure = f"run ended before the total arrived: {reason}"
                return self.acknowledge_shutdown(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="the noisy_count consumer does not accept this kind"
        )

    def result(self) -> dict[str, Any]:
        return {"total": self.total, "owners": self.owners, "end_status": self.end_status}
