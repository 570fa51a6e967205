"""The owner of ``noisy_count``: answer the curator's one request with a Laplace-noised count.

The count of rows of class ``label`` changes by at most 1 when one row is added to or removed from
the owner's data (L1 sensitivity 1), so the count plus Lap(1/epsilon) is epsilon-DP for the
owner's rows under add/remove-one. The spend is recorded on the owner's ledger *before* any noise
is drawn: a spend over the budget releases nothing. A second request is refused, since the budget
covers one release.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.privacy.accountant import BudgetExceeded, PrivacyLedger
from marketplace.privacy.mechanisms import Laplace
from marketplace.privacy.neighbouring import add_remove_one
from marketplace.privacy.rng import make_rng
from marketplace.roles import Role, Send
from marketplace_example.config import NoisyCountConfig
from marketplace_example.messages import CountRelease, CountRequest, NoisyCountMessage

SENSITIVITY = 1.0
"""How much one added or removed row can change a count."""


def owner_ledger(party: str, settings: NoisyCountConfig) -> PrivacyLedger:
    """The owner's ledger: pure DP steps composed by basic composition, with the budget if set."""
    budget = None if settings.budget is None else (settings.budget, 0.0)
    return PrivacyLedger(party, neighbouring=add_remove_one(f"a row of {party}'s data"), theorem="basic", budget=budget)


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
        seed: int | np.random.SeedSequence,
    ) -> None:
        super().__init__()
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.labels = np.asarray(data.y)
        self.settings = settings
        self.rng = make_rng(seed=seed, secure=settings.secure)
        self.ledger = owner_ledger(party_id, settings)
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
        try:  # recorded before the noise is drawn: a refused spend releases nothing
            self.ledger.spend(s.epsilon, mechanism="noisy_count.laplace")
        except BudgetExceeded as err:
            self.fail(str(err))
            return []
        mechanism = Laplace(
            epsilon=s.epsilon, sensitivity=SENSITIVITY, rng=None if s.secure else self.rng, secure=s.secure
        )
        value = mechanism.randomise(float(np.count_nonzero(self.labels == s.label)))
        self.released = True
        return [Send(message.sender, CountRelease(value=value, epsilon=s.epsilon), reply_to=message.msg_id)]

    def result(self) -> dict[str, Any]:
        """The owner's part of the report: its ledger (the true count stays with it)."""
        return {
            "rows": int(len(self.labels)),
            "released": self.released,
            "privacy": self.ledger.to_dict(),
            "end_status": self.end_status,
        }
