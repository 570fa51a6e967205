"""The owner's side of `sketch`: release one DP sketch of its records when the curator asks.

The owner scales its records to the unit box with the public bounds (clipping them first if the
scenario says so), sketches them with the public feature map and its own noise, and records the
spend on its own :class:`~marketplace.privacy.accountant.PrivacyLedger` (named after itself). What it
may release is its release plan (:mod:`marketplace.protocols.sketch.plan`): the sum of features and
the count, recorded on the plan's ledger *before* any noise is drawn (a refused spend releases
nothing) and drawn at the plan's eps and sensitivities. It releases at most once: a second request
is refused, so the budget is spent once per run.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.privacy.accountant import PrivacyLedger
from marketplace.privacy.plan import ReleasePlan
from marketplace.protocols.sketch import FeatureMap, SketchRelease, exact_sketch
from marketplace.protocols.sketch.messages import SketchMessage, SketchRequest
from marketplace.protocols.sketch.release import ACCOUNT, COUNT, noisy_sketch, sum_release
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
        secure: bool,
        precision: str,
        plan: ReleasePlan,
        rng: np.random.Generator | None,
    ) -> None:
        super().__init__()
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.records = feature_map.check(records, owner=f"{party_id}'s records")
        self.feature_map = feature_map
        self.epsilon = epsilon
        self.mechanism = mechanism
        self.secure = secure
        self.precision = precision
        self.plan = plan
        self.ledger = plan.ledger(ACCOUNT)
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
            numerator, count = self.plan.release(sum_release(self.mechanism)), self.plan.release(COUNT)
            # both recorded before any noise is drawn; refused as a whole (BudgetExceeded, nothing
            # recorded) if the budget would be passed
            self.ledger.check_plan(self.plan.steps(ACCOUNT))
            self.plan.spend(self.ledger, numerator.name)
            self.plan.spend(self.ledger, count.name)
            release = noisy_sketch(
                self.records,
                fmap,
                numerator=numerator,
                count=count,
                epsilon=self.epsilon,
                delta=numerator.delta,
                rng=self.rng,
                secure=self.secure,
                precision=self.precision,
                released=self.plan.released,
            )
        self.released = release
        return [Send(message.sender, release_body(release), reply_to=message.msg_id)]

    def ledgers(self) -> tuple[PrivacyLedger, ...]:
        return (self.ledger,)

    def result(self) -> dict[str, Any]:
        return {
            "rows": int(len(self.records)),
            "released": self.released is not None,
            "privacy": self.ledger.to_dict() if self.epsilon is not None else {"guarantee": "none"},
            "end_status": self.end_status,
        }
