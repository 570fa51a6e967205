"""The owner's side of `sketch`: release one DP sketch of its records when the curator asks.

The owner scales its records to the unit box with the public bounds (clipping them first if the
scenario says so), sketches them with the public feature map and its own noise, and records the
spend on its own :class:`~marketplace.privacy.accountant.PrivacyLedger` (named after itself). It
releases at most once: a second request is refused, so the budget is spent once per run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.privacy.accountant import PrivacyLedger
from marketplace.protocols.sketch import FeatureMap, SketchRelease, exact_sketch, private_sketch
from marketplace.protocols.sketch.messages import SketchMessage, SketchRequest
from marketplace.protocols.sketch.wire import release_body
from marketplace.roles import Role, Send


class SketchOwner(Role):
    role_name = "owner"

    def __init__(
        self,
        *,
        party_id: str,
        scenario_name: str,
        records: np.ndarray,
        feature_map: FeatureMap,
        epsilon: float | None,
        mechanism: str,
        delta: float,
        numerator_share: float,
        secure: bool,
        precision: str,
        ledger: PrivacyLedger,
        rng: np.random.Generator | None,
    ) -> None:
        super().__init__()
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.records = feature_map.check(records, owner=f"{party_id}'s records")
        self.feature_map = feature_map
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.delta = delta
        self.numerator_share = numerator_share
        self.secure = secure
        self.precision = precision
        self.ledger = ledger
        self.rng = rng
        self.released: SketchRelease | None = None
        self.end_status = ""

    def start(self) -> list[Send]:
        return [self.hello("sketch")]

    def handle(self, message: Envelope[SketchMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case SketchRequest():
                return self._release(message)
            case Shutdown():
                return self.acknowledge_shutdown(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="an owner of the sketch protocol does not accept this kind"
        )

    def _release(self, message: Envelope) -> list[Send]:
        body = message.body
        fmap = self.feature_map
        if self.released is not None:
            raise ProtocolError(
                party=message.sender,
                kind=message.kind,
                reason="this owner has already released its sketch (one release per run)",
            )
        if body.map_fingerprint != fmap.fingerprint or body.n_features != fmap.n_features:
            raise ProtocolError(
                party=message.sender,
                kind=message.kind,
                reason=(
                    f"field 'map_fingerprint' expected this owner's public map {fmap.fingerprint[:12]}... with "
                    f"{fmap.n_features} features, got {body.map_fingerprint[:12]}... with {body.n_features}"
                ),
            )
        if self.epsilon is None:
            release = exact_sketch(self.records, fmap, precision="float64")
        else:
            eps_num = self.numerator_share * self.epsilon
            sum_delta = self.delta if self.mechanism == "gaussian" else 0.0
            # refuses (BudgetExceeded) before any noise is drawn if the budget would be passed
            self.ledger.check_plan(planned_steps(self.epsilon, self.mechanism, self.delta, self.numerator_share))
            release = private_sketch(
                self.records,
                fmap,
                epsilon=self.epsilon,
                rng=self.rng,
                mechanism=self.mechanism,
                delta=sum_delta if self.mechanism == "gaussian" else None,
                numerator_share=self.numerator_share,
                secure=self.secure,
                precision=self.precision,
            )
            self.ledger.spend(eps_num, sum_delta, mechanism=f"{self.mechanism} sum of features")
            self.ledger.spend(self.epsilon - eps_num, 0.0, mechanism="laplace count")
        self.released = release
        return [Send(message.sender, release_body(release), reply_to=message.msg_id)]

    def result(self) -> dict[str, Any]:
        return {
            "rows": int(len(self.records)),
            "released": self.released is not None,
            "privacy": self.ledger.to_dict() if self.epsilon is not None else {"guarantee": "none"},
            "end_status": self.end_status,
        }


def planned_steps(epsilon: float, mechanism: str, delta: float, numerator_share: float):
    """The accountant steps of one release: the sum (Laplace or Gaussian) and the Laplace count."""
    from marketplace.privacy.accountant import Step

    eps_num = numerator_share * epsilon
    return [
        Step(mechanism=f"{mechanism} sum of features", eps=eps_num, delta=delta if mechanism == "gaussian" else 0.0),
        Step(mechanism="laplace count", eps=epsilon - eps_num),
    ]
