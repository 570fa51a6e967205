"""The consumer's side of `summarize`: hand D_v (features only) to the curator, receive the summary,
and measure it against its own data: exact-kernel MMD^2 to D_v and linear-SVM accuracy on its test set."""

from __future__ import annotations

from typing import Any

from marketplace.data.dataset import Dataset
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Bye, Hello, ValidationSet
from marketplace.protocols.summarize import mmd2, svm_accuracy
from marketplace.roles import CONSUMER, Role, Send


class SummarizeConsumer(Role):
    role_name = "consumer"

    def __init__(self, *, scenario_name: str, validation: Dataset, test: Dataset, gamma: float, svm_c: float, svm_seed: int) -> None:
        super().__init__()
        self.party_id = CONSUMER
        self.scenario_name = scenario_name
        self.validation = validation
        self.test = test
        self.gamma = gamma
        self.svm_c = svm_c
        self.svm_seed = svm_seed
        self.metrics: dict[str, float] | None = None
        self.summary_size = 0
        self.end_status = ""

    def start(self) -> list[Send]:
        return [
            Send("curator", Hello(role="consumer", protocol="summarize", scenario=self.scenario_name)),
            Send("curator", ValidationSet(X=self.validation.X)),
        ]

    def handle(self, message: Envelope) -> list[Send]:
        if message.kind == "summary":
            if self.metrics is not None:
                raise ProtocolError(party=message.sender, kind="summary", reason="the summary already arrived")
            body = message.body
            if body.X.shape[0] and body.X.shape[1] != self.validation.X.shape[1]:
                raise ProtocolError(party=message.sender, kind="summary", reason=f"expected {self.validation.X.shape[1]} features, got {body.X.shape[1]}")
            self.summary_size = len(body.X)
            self.metrics = evaluate_summary(body.X, body.y, self.validation, self.test, gamma=self.gamma, svm_c=self.svm_c, svm_seed=self.svm_seed)
            return []
        if message.kind == "shutdown":
            self.end_status = message.body.status
            if self.metrics is None:
                self.failure = f"run ended before a summary arrived: {message.body.reason}"
            self.done = True
            return [Send(message.sender, Bye(), reply_to=message.msg_id)]
        raise ProtocolError(party=message.sender, kind=message.kind, reason="the consumer does not accept this kind")

    def result(self) -> dict[str, Any]:
        return {"metrics": self.metrics, "summary_size": self.summary_size, "end_status": self.end_status}


def evaluate_summary(X, y, validation: Dataset, test: Dataset, *, gamma: float, svm_c: float, svm_seed: int) -> dict[str, float | None]:
    """Exact-kernel MMD^2 of a summary to D_v, and accuracy on the test set of a linear SVM trained on it."""
    if len(X) == 0:
        return {"mmd2": None, "accuracy": None}
    return {
        "mmd2": float(mmd2(X, validation.X, gamma)),
        "accuracy": float(svm_accuracy(X, y, test.X, test.y, C=svm_c, seed=svm_seed)),
    }
