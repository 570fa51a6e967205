"""The owner's side of `stc`: answer the curator's request once with a private release S' of its
source data against the consumer's target points, and record what it cost on its own ledger.

The owner scales its rows and the target with the scenario's public box (clipping onto the ball
of radius 1/2 that the noise is calibrated for), then releases NAS or NNA (Laplace for eps-DP,
Gaussian for rho-zCDP). What it may release is its release plan (:mod:`marketplace.protocols.stc.plan`):
one summary, recorded on the plan's ledger before any noise is drawn, at the plan's eps or rho and
its sensitivity for the target points sent. A second request is refused: the budget covers one release.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.privacy.accountant import BudgetExceeded, PrivacyLedger
from marketplace.privacy.plan import ReleasePlan
from marketplace.privacy.rng import make_rng
from marketplace.protocols.stc import PublicScaling, nas_release, nna_release
from marketplace.protocols.stc.config import StcConfig
from marketplace.protocols.stc.messages import StcMessage, StcRelease, StcRequest
from marketplace.protocols.stc.plan import ACCOUNT, at_target, summary_release
from marketplace.protocols.stc.release import NasRelease, NnaRelease
from marketplace.roles import Role, Send


class StcOwner(Role):
    role_name = "owner"

    def __init__(
        self,
        *,
        party_id: str,
        scenario_name: str,
        data: Dataset,
        scaling: PublicScaling,
        settings: StcConfig,
        plan: ReleasePlan,
        seed: int | np.random.SeedSequence,
    ) -> None:
        super().__init__()
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.scaling = scaling
        self.settings = settings
        self.source = scaling.apply(data.X, clip=True) if len(data) else np.zeros((0, data.X.shape[1]))
        self.rng = make_rng(seed=seed, secure=settings.privacy.secure)
        self.plan = plan
        self.ledger = plan.ledger(ACCOUNT)
        self.released: dict[str, Any] | None = None
        self.end_status = ""

    def start(self) -> list[Send]:
        return [self.hello("stc")]

    def handle(self, message: Envelope[StcMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case StcRequest():
                return self._release(message)
            case Shutdown():
                return self.acknowledge_shutdown(message)
        raise ProtocolError(party=message.sender, kind=message.kind, reason="an stc owner does not accept this kind")

    def _release(self, message: Envelope) -> list[Send]:
        if self.released is not None:
            raise ProtocolError(
                party=message.sender,
                kind="stc_request",
                reason="this owner has already released S' (one release per budget)",
            )
        points = message.body.points
        dim = self.source.shape[1]
        if points.ndim != 2 or points.shape[1] != dim or len(points) == 0:
            raise ProtocolError(
                party=message.sender,
                kind="stc_request",
                reason=f"expected a non-empty (m, {dim}) array of target points, got {list(points.shape)}",
            )
        target = self.scaling.apply(points, clip=True)
        s, privacy = self.settings, self.settings.privacy
        if s.release == "nas" and s.t > len(self.source):
            self.fail(f"stc.t = {s.t} exceeds this owner's number of source rows; lower stc.t")
            return []
        plan = at_target(self.plan, s, *target.shape)  # the sensitivity for the points sent
        planned = plan.release(summary_release(s))
        try:  # recorded before any noise is drawn: a refused spend releases nothing
            plan.spend(self.ledger, planned.name)
        except BudgetExceeded as err:
            self.fail(str(err))
            return []
        budget = {"eps": planned.eps} if planned.eps is not None else {"rho": planned.rho}
        release: NasRelease | NnaRelease
        if s.release == "nas":
            release = nas_release(
                self.source,
                target,
                t=s.t,
                rng=self.rng,
                secure=privacy.secure,
                sensitivity=planned.sensitivity,
                **budget,
            )
        else:
            release = nna_release(
                self.source,
                target,
                gamma=s.gamma,
                rng=self.rng,
                secure=privacy.secure,
                sensitivity=planned.sensitivity,
                **budget,
            )
        centers = plan.released(planned.name, np.asarray(release.centers, dtype=np.float64))
        cost = planned.eps if planned.eps is not None else planned.rho
        if cost is None:  # a planned release's ledger step has one of them (checked when it was planned)
            raise ValueError(f"release {planned.name!r} states neither eps nor rho")
        self.released = {"centers": len(centers), "targets": len(target)}
        body = StcRelease(centers=centers, method=s.release, notion=privacy.notion, cost=cost)
        return [Send(message.sender, body, reply_to=message.msg_id)]

    def ledgers(self) -> tuple[PrivacyLedger, ...]:
        return (self.ledger,)

    def result(self) -> dict[str, Any]:
        return {
            "rows": len(self.source),
            "release": self.released,
            "privacy": self.ledger.to_dict(),
            "end_status": self.end_status,
        }
