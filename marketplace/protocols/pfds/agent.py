"""What every agent of `pfds` does, sharer, receiving owner or consumer (:mod:`.owner`, :mod:`.consumer`).

An agent receives the other sharers' trees and labelled synthetic records from the curator, checks
each against the public schema, and, once told to train and shut down, fits its model on its own
rows plus every synthetic record it received (after its ``bye``: :meth:`PfdsAgent.finish`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import RuntimeMessage, Shutdown
from marketplace.protocols.pfds import ClassLabels, MalformedPlain, PrivateTree, PublicSchema
from marketplace.protocols.pfds.messages import PfdsMessage, PfdsPhase, PfdsSharedData, PfdsSharedTree
from marketplace.protocols.pfds.models import Fitted, fit_model
from marketplace.protocols.pfds.wire import check_records, tree_from_body
from marketplace.roles import CURATOR, Role, Send


class PfdsAgent(Role):
    """What every agent does: collect the forwarded trees and datasets, then train and keep its model."""

    def __init__(
        self,
        *,
        party_id: str,
        scenario_name: str,
        schema: PublicSchema,
        sharers: tuple[str, ...],
        X: np.ndarray,
        y: np.ndarray,
        model: str,
        model_seed: int,
    ) -> None:
        super().__init__()
        self.party_id = party_id
        self.scenario_name = scenario_name
        self.schema = schema
        self.sharers = sharers
        self.X = np.asarray(X, dtype=np.float64)
        self.y = np.asarray(y)
        self.model = model
        self.model_seed = model_seed
        self.trees: dict[str, PrivateTree] = {}
        self.datasets: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.fitted: Fitted | None = None
        self.to_train: list[tuple[np.ndarray, np.ndarray]] | None = None
        self.phase = "trees"
        self.end_status = ""

    def handle(self, message: Envelope[PfdsMessage | RuntimeMessage]) -> list[Send]:
        kind = message.kind
        if message.sender != CURATOR:
            raise ProtocolError(party=message.sender, kind=kind, reason="an agent takes messages from the curator only")
        match message.body:
            case PfdsSharedTree():
                return self._on_tree(message)
            case PfdsSharedData():
                return self._on_data(message)
            case PfdsPhase():
                return self._on_phase(message)
            case Shutdown():
                return self.acknowledge_shutdown(message)
        raise ProtocolError(
            party=message.sender, kind=kind, reason=f"a pfds {self.role_name} does not accept this kind"
        )

    def _origin(self, message: Envelope, sharer: str, have: dict) -> None:
        if sharer not in self.sharers or sharer == self.party_id:
            raise ProtocolError(
                party=message.sender,
                kind=message.kind,
                reason=f"field 'sharer' must name another sharer "
                f"of this run ({', '.join(self.sharers)}), got {sharer!r}",
            )
        if sharer in have:
            raise ProtocolError(party=message.sender, kind=message.kind, reason=f"{sharer}'s release already arrived")

    def _on_tree(self, message: Envelope) -> list[Send]:
        body: PfdsSharedTree = message.body
        self._origin(message, body.sharer, self.trees)
        if self.phase != "trees":
            raise ProtocolError(
                party=message.sender, kind=message.kind, reason=f"no tree expected in phase {self.phase!r}"
            )
        try:
            self.trees[body.sharer] = tree_from_body(body, self.schema)
        except MalformedPlain as err:
            raise ProtocolError(
                party=message.sender, kind=message.kind, reason=f"{body.sharer}'s tree: {err}"
            ) from None
        return []

    def _on_data(self, message: Envelope) -> list[Send]:
        body: PfdsSharedData = message.body
        self._origin(message, body.sharer, self.datasets)
        problem = check_records(body.X, body.y, self.schema, body.sharer)
        if problem:
            raise ProtocolError(party=message.sender, kind=message.kind, reason=f"{body.sharer}'s records: {problem}")
        self.datasets[body.sharer] = (body.X, body.y)
        return []

    def _on_phase(self, message: Envelope) -> list[Send]:
        body: PfdsPhase = message.body
        announced = set(body.sharers) - {self.party_id}
        held = set(self.trees if body.phase == "label" else self.datasets)
        if announced != held:
            raise ProtocolError(
                party=message.sender,
                kind=message.kind,
                reason=(
                    f"phase {body.phase!r} announces releases of {sorted(announced)} but this agent holds "
                    f"{sorted(held)}"
                ),
            )
        if body.phase == "label":
            if self.phase != "trees":
                raise ProtocolError(party=message.sender, kind=message.kind, reason="labelling already started")
            self.phase = "data"
            return self.label([self.trees[s] for s in self.sharers if s in announced])
        if self.phase == "done":
            raise ProtocolError(party=message.sender, kind=message.kind, reason="training was already announced")
        self.phase = "done"
        self.to_train = [self.datasets[s] for s in self.sharers if s in announced]
        return []

    def finish(self) -> None:
        """Train once the run is over for this agent (after its ``bye``): the fit needs no message,
        and with 20+ agents fitting at once on a few cores it can outlast the heartbeat timeout."""
        if self.to_train is not None and not self.failure:
            self.train(self.to_train)
            self.to_train = None

    def label(self, trees: list[PrivateTree]) -> list[Send]:
        """The label phase: nothing to do for an agent that does not share."""
        return []

    def train(self, shared: list[tuple[np.ndarray, np.ndarray]]) -> Fitted:
        """Fit the model on the agent's own rows plus every shared synthetic record (kept as ``fitted``)."""
        X = np.vstack([self.X, *(x for x, _ in shared)])
        y = np.concatenate([self.y.astype(np.float64), *(labels for _, labels in shared)])
        if isinstance(self.schema.label, ClassLabels):
            y = y.astype(np.int64)
        self.fitted = fitted = fit_model(self.model, self.schema, X, y, seed=self.model_seed)
        self.shared_rows = sum(int(x.shape[0]) for x, _ in shared)  # the records received, never its own rows
        return fitted

    def result(self) -> dict[str, Any]:
        return {
            "rows": int(self.X.shape[0]),
            "trees_received": sorted(self.trees),
            "datasets_received": sorted(self.datasets),
            "shared_rows": getattr(self, "shared_rows", 0),
            "model": self.fitted.to_plain() if self.fitted else None,
            "end_status": self.end_status,
        }
