"""The consumer's side of `summarize`: hand D_v (features only) to the curator, receive the summary,
and measure it against its own data: exact-kernel MMD^2 to D_v and linear-SVM accuracy on its test set.

With a less-trusted curator the consumer sends h1 of each D_v row and a fresh public key instead of
D_v, and receives the summary as sealed points with the embeddings the curator verified and the
content keys and commitments their owners named them by. It opens each one and keeps it only if h1
of the opened point matches that embedding (within what rounding allows two honest evaluations of
h1 to differ, :meth:`RandomFourierFeatures.transform_error`) and the key and the commitment are
those of the opened point and the secret sealed with it: an owner cannot get a point into the
summary by showing the curator one embedding and sealing another point, nor sell one point twice
under two keys.

The consumer confirms receipt before it evaluates: ``handle`` only checks and keeps the summary,
the ``bye`` that answers the curator's ``shutdown`` says it arrived, and the evaluation (an SVM fit,
exact kernels) runs in :meth:`SummarizeConsumer.finish`, once that ``bye`` has left. The curator's
confirmation of an honest end then never waits on the consumer's computing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.protocols.summarize import RandomFourierFeatures, mmd2, svm_accuracy
from marketplace.protocols.summarize.identity import sealed_point_key, secret_commitment
from marketplace.protocols.summarize.kernel import prefix_mmd2
from marketplace.protocols.summarize.messages import (
    SealedSummary,
    SummarizeMessage,
    Summary,
    ValidationEmbedding,
    ValidationSet,
)
from marketplace.protocols.summarize.sealing import ConsumerKey, SealingError
from marketplace.roles import CONSUMER, Role, Send
from marketplace.warm_imports import wait_for_background_imports


class SummarizeConsumer(Role):
    role_name = "consumer"
    warm_imports = ("sklearn.svm", "sklearn.pipeline", "sklearn.preprocessing", "sklearn.metrics.pairwise")
    """What the summary's evaluation imports (summarize.metrics and kernel), loaded during the rounds."""

    def __init__(
        self,
        *,
        scenario_name: str,
        validation: Dataset,
        test: Dataset,
        gamma: float,
        svm_c: float,
        svm_seed: int,
        features: RandomFourierFeatures | None = None,
        trust: str = "trusted",
        seed_set: np.ndarray | None = None,
        own_evaluation: bool = False,
    ) -> None:
        super().__init__()
        self.party_id = CONSUMER
        self.scenario_name = scenario_name
        self.seed_set = (
            np.zeros((0, validation.X.shape[1])) if seed_set is None else np.asarray(seed_set, dtype=np.float64)
        )
        """The public seed set D_init: the summary with it is what every greedy rule minimizes."""
        self.validation = validation
        self.test = test
        self.gamma = gamma
        self.svm_c = svm_c
        self.svm_seed = svm_seed
        self.less_trusted = trust == "less_trusted"
        if self.less_trusted and features is None:
            raise ValueError(
                "The 'features' parameter of SummarizeConsumer must be the public h1 map when trust is "
                "'less_trusted'. Got None instead."
            )
        self.features = features
        self.key = ConsumerKey.generate() if self.less_trusted else None
        self.metrics: dict[str, float | None] | None = None
        self.received: tuple[np.ndarray, np.ndarray] | None = None
        """The summary as received and checked (X, y), evaluated in :meth:`finish`."""
        self.summary_size = 0
        self.rejected: list[dict[str, Any]] = []
        self.own_evaluation = own_evaluation
        """Whether this consumer is the only party that can evaluate the summary (a marketplace
        described by its public schema: nobody else holds D_v): it then also computes the MMD^2 of
        the summary after each round, for the report's history (:meth:`own_figures`)."""
        self.own: dict[str, Any] | None = None
        self.end_status = ""

    def start(self) -> list[Send]:
        hello = self.hello("summarize")
        if self.less_trusted:
            features, key = self._sealing()
            phi = features.transform(self.validation.X)
            return [hello, Send("curator", ValidationEmbedding(phi=phi, consumer_key=key.public))]
        return [hello, Send("curator", ValidationSet(X=self.validation.X))]

    def handle(self, message: Envelope[SummarizeMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case Summary() | SealedSummary():
                return self._on_summary(message)
            case Shutdown(reason=reason):
                if self.received is None:
                    self.failure = f"run ended before a summary arrived: {reason}"
                return self.acknowledge_shutdown(message)
        raise ProtocolError(party=message.sender, kind=message.kind, reason="the consumer does not accept this kind")

    def _on_summary(self, message: Envelope) -> list[Send]:
        """The summary, in the form this run's trust level calls for, once."""
        wanted = SealedSummary if self.less_trusted else Summary
        if not isinstance(message.body, wanted):
            raise ProtocolError(
                party=message.sender, kind=message.kind, reason=f"this run's summary comes as {wanted.KIND!r}"
            )
        if self.received is not None:
            raise ProtocolError(party=message.sender, kind=message.kind, reason="the summary already arrived")
        body = message.body  # the form this run's trust level calls for (checked above)
        X, y = self._open(message) if isinstance(body, SealedSummary) else (body.X, body.y)
        if X.shape[0] and X.shape[1] != self.validation.X.shape[1]:
            raise ProtocolError(
                party=message.sender,
                kind=message.kind,
                reason=f"expected {self.validation.X.shape[1]} features, got {X.shape[1]}",
            )
        self.summary_size = len(X)
        self.received = (X, y)
        return []

    def finish(self) -> None:
        """Evaluate the summary received (after the ``bye`` that confirmed it has left)."""
        if self.received is None:
            return
        X, y = self.received
        wait_for_background_imports()  # never import scikit-learn beside the loading thread
        self.metrics = metrics = evaluate_summary(
            X, y, self.validation, self.test, gamma=self.gamma, svm_c=self.svm_c, svm_seed=self.svm_seed
        )
        both = np.vstack([self.seed_set, X]) if len(self.seed_set) else X
        metrics["mmd2_with_seed_set"] = float(mmd2(both, self.validation.X, self.gamma)) if len(both) else None
        if self.own_evaluation:
            self.own = self.own_figures()

    def own_figures(self) -> dict[str, Any]:
        """What the report takes from this consumer when nobody else holds D_v: ``mmd2_by_round``,
        the exact-kernel MMD^2 to D_v of the summary after each round (the summary arrives in
        selection order; a sealed point it rejected leaves the summary as it was), and ``absent``,
        the figures it could not compute and why."""
        if self.received is None:  # finish evaluates only a summary that arrived
            raise RuntimeError("no summary arrived: there is nothing to evaluate")
        X, _ = self.received
        rejected = {int(r["position"]) for r in self.rejected}
        rounds = len(X) + len(rejected)
        kept_after = np.cumsum([i not in rejected for i in range(rounds)])  # kept points among the first i + 1
        prefix = prefix_mmd2(X, self.validation.X, self.gamma) if len(X) and len(self.validation) else np.zeros(0)
        by_round = [float(prefix[n - 1]) if n else None for n in kept_after] if len(prefix) else [None] * rounds
        absent = {}
        if not len(self.test):
            absent["metrics.accuracy"] = (
                "the consumer brought no test set (the request's --test), so the summary was not scored on one"
            )
        return {"mmd2_by_round": by_round, "absent": absent}

    def _sealing(self) -> tuple[RandomFourierFeatures, ConsumerKey]:
        """The public h1 map and this consumer's key, which a less-trusted consumer is built with."""
        if self.features is None or self.key is None:
            raise RuntimeError("only a less-trusted consumer (built with the h1 map and a key) handles sealed points")
        return self.features, self.key

    def _open(self, message: Envelope) -> tuple[np.ndarray, np.ndarray]:
        """Open every sealed point; keep those that are what the curator verified and the owner named."""
        body: SealedSummary = message.body
        if not len(body.sealed) == len(body.phi) == len(body.keys) == len(body.commitments):
            raise ProtocolError(
                party=message.sender,
                kind=message.kind,
                reason=f"{len(body.sealed)} sealed points for {len(body.phi)} embeddings, {len(body.keys)} content "
                f"keys and {len(body.commitments)} commitments",
            )
        dim = self.validation.X.shape[1]
        _, consumer_key = self._sealing()
        kept_x, kept_y = [], []
        for i, (blob, phi, key, commitment) in enumerate(zip(body.sealed, body.phi, body.keys, body.commitments)):
            try:
                x, y, secret = consumer_key.open_point(blob, dim=dim)
            except SealingError as exc:
                self.rejected.append({"position": i, "reason": str(exc)})
                continue
            problem = self._opened_problem(x, y, secret, phi, bytes(key), bytes(commitment))
            if problem:
                self.rejected.append({"position": i, "reason": problem})
                continue
            kept_x.append(x)
            kept_y.append(y)
        return np.array(kept_x, dtype=np.float64).reshape(len(kept_x), dim), np.array(kept_y, dtype=np.int64)

    def _opened_problem(
        self, x: np.ndarray, y: int, secret: bytes, phi: np.ndarray, key: bytes, commitment: bytes
    ) -> str | None:
        """Why an opened point is not the one the curator verified and its owner named, or None."""
        if secret_commitment(secret) != commitment or sealed_point_key(secret, x, y) != key:
            return "the opened point is not the one its content key names (a point sold twice under two keys?)"
        if not np.isfinite(x).all():
            return "the opened point has a non-finite feature"
        features, _ = self._sealing()
        gap = np.abs(features.transform(x[None, :])[0] - phi)
        allowed = 2.0 * features.transform_error(x[None, :])[0]  # two honest evaluations of h1
        if not (gap <= allowed).all():
            worst = int(np.argmax(gap - allowed))
            return (
                f"h1 of the opened point differs from the verified embedding by {gap[worst]:.3g} "
                f"(rounding allows {allowed[worst]:.3g})"
            )
        return None

    def result(self) -> dict[str, Any]:
        out = {"metrics": self.metrics, "summary_size": self.summary_size, "end_status": self.end_status}
        if self.less_trusted:
            out["rejected_points"] = self.rejected
        if self.own_evaluation:
            out["own_evaluation"] = self.own
        return out


def evaluate_summary(
    X: np.ndarray, y: np.ndarray, validation: Dataset, test: Dataset, *, gamma: float, svm_c: float, svm_seed: int
) -> dict[str, float | None]:
    """Exact-kernel MMD^2 of a summary to D_v, and accuracy on the test set of a linear SVM trained on it
    (None without a test set: a consumer of a schema-only marketplace need not bring one)."""
    if len(X) == 0:
        return {"mmd2": None, "accuracy": None}
    return {
        "mmd2": float(mmd2(X, validation.X, gamma)),
        "accuracy": float(svm_accuracy(X, y, test.X, test.y, C=svm_c, seed=svm_seed)) if len(test) else None,
    }
