"""The consumer of `pfds`: an agent with its own rows that shares nothing.

It receives every sharer's tree and labelled synthetic records through the curator, trains its
model on its own rows plus the synthetic records, and scores it on its own held-out test set.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.protocols.pfds.agent import PfdsAgent
from marketplace.protocols.pfds.models import Fitted, model_error
from marketplace.roles import CONSUMER, Send


class PfdsConsumer(PfdsAgent):
    role_name = "consumer"

    def __init__(self, *, test_X: np.ndarray, test_y: np.ndarray, **common: Any) -> None:
        super().__init__(party_id=CONSUMER, **common)
        self.test_X = np.asarray(test_X, dtype=np.float64)
        self.test_y = np.asarray(test_y)
        self.error: float | None = None

    def start(self) -> list[Send]:
        return [self.hello("pfds")]

    def train(self, shared: list[tuple[np.ndarray, np.ndarray]]) -> Fitted:
        fitted = super().train(shared)
        self.error = model_error(fitted, self.schema, self.test_X, self.test_y) if len(self.test_y) else None
        return fitted

    def result(self) -> dict[str, Any]:
        out = super().result()
        if self.fitted is None and not self.failure:
            out["note"] = "the run ended before training"
        out["error"] = self.error
        return out
