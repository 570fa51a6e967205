"""The owner of ``noisy_count``: answer the curator's one request with a Laplace-noised count.

What the owner may release is its release plan (:mod:`marketplace_example.plan`): one count, at the
plan's epsilon and sensitivity, recorded on the plan's ledger *before* any noise is drawn, so a
spend over the budget releases nothing. A second request is refused, since the plan declares one
release.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.privacy.accountant import BudgetExceeded, PrivacyLedger
from marketplace.privacy.mechanisms import Laplace
from marketplace.privacy.plan import ReleasePlan
from marketplace.privacy.rng import make_rng
from marketplace.roles import Role, Send
from marketplace_example.config import NoisyCountConfig
from marketplace_example.messages import CountRelease, CountRequest, NoisyCountMessage
from marketplace_example.plan import COUNT


class NoisyCountOwner(Role):
    """One data owner: its rows never leave it; one noisy count does."""

    role_name = "owner"

    def __init__(
        self,
        *,
        party_id: str,
        scenario_name: str,
        data: Dataset,
        settings: NoisyCountConfig,
        plan: ReleasePlan,
        seed: int | np.random.SeedSequence,
    ) -> None:
        super().__init__()
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.labels = np.asarray(data.y)
        self.settings = settings
        self.rng = make_rng(seed=seed, secure=settings.secure)
        self.plan = plan
        self.ledger = plan.ledger("owner")
        self.released = False
        self.end_status = ""

    def start(self) -> list[Send]:
        return [self.hello("noisy_count")]

    def handle(self, message: Envelope[NoisyCountMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case CountRequest():
                return self._release(message)
            case Shutdown():
                return self.acknowledge_shutdown(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="a noisy_count owner does not accept this kind"
        )

    def _release(self, message: Envelope) -> list[Send]:
        s = self.settings
        if self.released:
            raise ProtocolError(
                party=message.sender, kind="count_request", reason="this owner has already released its count"
            )
        if message.body.label != s.label:
            raise ProtocolError(
                party=message.sender,
                kind="count_request",
                reason=f"expected a request for label {s.label} (the scenario's), got {message.body.label}",
            )
        release = self.plan.release(COUNT)
        try:  # recorded before the noise is drawn: a refused spend releases nothing
            self.plan.spend(self.ledger, COUNT)
        except BudgetExceeded as err:
            self.fail(str(err))
            return []
        mechanism = Laplace(
            epsilon=release.eps, sensitivity=release.sensitivity, rng=None if s.secure else self.rng, secure=s.secure
        )
        value = self.plan.released(COUNT, mechanism.randomise(float(np.count_nonzero(self.labels == s.label))))
        self.released = True
        return [Send(message.sender, CountRelease(value=value, epsilon=release.eps), reply_to=message.msg_id)]

    def ledgers(self) -> tuple[PrivacyLedger, ...]:
        """The owner's one ledger: the party marks it with where the owner's noise comes from."""
        return (self.ledger,)

    def result(self) -> dict[str, Any]:
        """The owner's part of the report: its ledger (the true count stays with it)."""
        return {
            "rows": int(len(self.labels)),
            "released": self.released,
            "privacy": self.ledger.to_dict(),
            "end_status": self.end_status,
        }
