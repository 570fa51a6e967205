"""The consumer's side of `stc`: send its target points T, receive the owners' private releases
S', and choose the k points of T to label by minimizing Cost(T, S' ∪ T_k) itself.

With ``stc.coreset`` set, the consumer sends the points of a kd-tree coreset of T (cells of
diameter <= C in scaled units) instead of T, so each owner's release has fewer, fuller cells; the
choice of T_k is still made over the whole of T.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.data.dataset import Dataset
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.protocols.stc import PublicScaling, kdtree_coreset, solve_stc, stc_cost
from marketplace.protocols.stc.config import StcConfig
from marketplace.protocols.stc.messages import StcMessage, StcReleases, StcTarget
from marketplace.roles import CONSUMER, Role, Send


class StcConsumer(Role):
    role_name = "consumer"

    def __init__(
        self,
        *,
        scenario_name: str,
        target: Dataset,
        scaling: PublicScaling,
        settings: StcConfig,
        solver_seed: int,
        own_evaluation: bool = False,
    ) -> None:
        super().__init__()
        self.party_id = CONSUMER
        self.scenario_name = scenario_name
        self.raw_target = target.X
        self.target = scaling.apply(target.X, clip=True)
        self.settings = settings
        self.solver_seed = solver_seed
        self.sent_rows = np.arange(len(self.target))
        if settings.coreset is not None:
            self.sent_rows = np.asarray(kdtree_coreset(self.target, settings.coreset).indices, dtype=np.int64)
        self.choice: dict[str, Any] | None = None
        self.releases: StcReleases | None = None
        """The curator's releases, checked when they arrive; the choice is made from them in :meth:`finish`."""
        self.own_evaluation = own_evaluation
        """Whether this consumer is the only party that can score its choice (a marketplace described
        by its public schema: nobody holds the owners' true S): it then also reports the costs it can
        compute from T and the releases alone (:meth:`own_figures`)."""
        self.own: dict[str, Any] | None = None
        self.end_status = ""

    def start(self) -> list[Send]:
        return [self.hello("stc"), Send("curator", StcTarget(points=self.raw_target[self.sent_rows]))]

    def handle(self, message: Envelope[StcMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case StcReleases():
                if self.releases is not None:
                    raise ProtocolError(
                        party=message.sender, kind="stc_releases", reason="the releases already arrived"
                    )
                self._check(message)
                self.releases = message.body
                return []
            case Shutdown(reason=reason):
                if self.releases is None:
                    self.failure = f"run ended before the releases arrived: {reason}"
                return self.acknowledge_shutdown(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="the stc consumer does not accept this kind"
        )

    def _check(self, message: Envelope) -> None:
        body: StcReleases = message.body
        d = self.target.shape[1]
        if (
            (len(body.centers) and body.centers.shape[1] != d)
            or int(body.counts.sum()) != len(body.centers)
            or len(body.counts) != len(body.owners)
        ):
            raise ProtocolError(
                party=message.sender,
                kind="stc_releases",
                reason=f"expected (c, {d}) centres split by counts over owners; got centres "
                f"{list(body.centers.shape)}, "
                f"counts summing to {int(body.counts.sum())} for {len(body.owners)} owners",
            )

    def finish(self) -> None:
        """Choose T_k from the releases once the run is over for the consumer (after the ``bye`` that
        confirmed they arrived): the solver is the consumer's own work, never on a deadline of the
        curator's, which a busy machine could make it miss while the owners' releases are already charged."""
        if self.releases is None or self.choice is not None:
            return
        body = self.releases
        k = min(self.settings.k, len(self.target))
        solution = solve_stc(
            self.target,
            body.centers,
            k,
            max_candidates=self.settings.max_candidates,
            rng=np.random.default_rng(self.solver_seed),
        )
        self.choice = {
            "indices": [int(i) for i in solution.indices],
            "estimated_cost": float(solution.cost),  # Cost(T, S' ∪ T_k): what the consumer can compute
            "released_centers": int(len(body.centers)),
            "owners": list(body.owners),
            "method": solution.method,
        }
        if self.own_evaluation:
            self.own = self.own_figures(body.centers, solution.indices)

    def own_figures(self, centers: np.ndarray, indices: np.ndarray) -> dict[str, Any]:
        """The costs the consumer computes from T and the owners' releases S' alone, beside its
        ``estimated_cost`` Cost(T, S' ∪ T_k), for the report when nobody holds the true S:
        ``released_only_cost``, Cost(T, S') (the releases alone, k = 0: the estimate of S alone),
        and ``chosen_only_cost``, Cost(T, T_k) (the chosen points alone, without any source)."""
        chosen = np.asarray(indices, dtype=np.int64)
        return {
            "released_only_cost": float(stc_cost(self.target, centers)) if len(centers) else None,
            "chosen_only_cost": float(stc_cost(self.target, self.target[chosen])) if len(chosen) else None,
        }

    def result(self) -> dict[str, Any]:
        return {
            "choice": self.choice,
            "target_size": int(len(self.target)),
            "sent_points": int(len(self.sent_rows)),
            **({"own_evaluation": self.own} if self.own_evaluation else {}),
            "end_status": self.end_status,
        }
