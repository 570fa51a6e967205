"""The owners of `pfds`: a sharer, and a receiver that shares nothing (the consumer is in
:mod:`marketplace.protocols.pfds.consumer`).

Every agent receives the other sharers' trees and labelled synthetic records from the curator,
checks each against the public schema, and, once told to train and shut down, fits its model on
its own rows plus every synthetic record it received (after its ``bye``:
:meth:`~marketplace.protocols.pfds.agent.PfdsAgent.finish`). A **sharer** also releases: its private tree as soon as
it starts (half its budget), then, once it holds every tree, its synthetic records (the other
half) labelled by the majority of all trees, its own included. Both are declared in the sharer's
release plan (:mod:`marketplace.protocols.pfds.plan`): each level draws its noise at the plan's eps and
is recorded on the plan's :class:`~marketplace.privacy.accountant.PrivacyLedger` as it runs.

Only private releases leave a sharer: its rows never appear in a message.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypedDict

import numpy as np

from marketplace.privacy.accountant import PrivacyLedger
from marketplace.privacy.plan import PlanExceeded, ReleasePlan
from marketplace.protocols.pfds import PrivateTree, Spend, share_data, share_predictor
from marketplace.protocols.pfds.agent import PfdsAgent
from marketplace.protocols.pfds.messages import PfdsData, PfdsTree
from marketplace.protocols.pfds.plan import SHARER, level_epsilon
from marketplace.protocols.pfds.wire import tree_fields
from marketplace.roles import CURATOR, Send


class TreeParams(TypedDict):
    """The settings of a sharer's tree that :func:`share_predictor` takes from the scenario."""

    h_max: int
    t: int
    max_leaves: int
    attribute_choice: str
    neighbours: str
    secure: bool


class PfdsReceiver(PfdsAgent):
    """An owner of `pfds` that does not share (``pfds.sharers`` below the number of owners): like
    the consumer, it receives every sharer's releases and trains on them with its own rows, and it
    releases nothing, so it spends no privacy."""

    role_name = "owner"

    def start(self) -> list[Send]:
        return [self.hello("pfds")]

    def result(self) -> dict[str, Any]:
        return super().result() | {"shares": False}


class PfdsSharer(PfdsAgent):
    """An owner of `pfds`: an agent that also releases a private tree and labelled synthetic records."""

    role_name = "owner"

    def __init__(
        self,
        *,
        plan: ReleasePlan,
        h_max: int,
        t: int,
        p: int,
        max_leaves: int,
        attribute_choice: str,
        consistency: bool,
        neighbours: str,
        secure: bool,
        tree_seed: np.random.SeedSequence,
        data_seed: np.random.SeedSequence,
        **common: Any,
    ) -> None:
        super().__init__(**common)
        self.plan = plan
        self.params = TreeParams(
            h_max=h_max,
            t=t,
            max_leaves=max_leaves,
            attribute_choice=attribute_choice,
            neighbours=neighbours,
            secure=secure,
        )
        self.p = p
        self.consistency = consistency
        self.secure = secure
        self.tree_rng = np.random.default_rng(tree_seed)
        self.data_rng = np.random.default_rng(data_seed)
        self.ledger = plan.ledger(SHARER)
        self.tree: PrivateTree | None = None
        self.released_rows = 0

    def _record(self, spends: Iterable[Spend]) -> None:
        """Record on the ledger what ran, release by release as the plan declares it (never more)."""
        for spend in spends:
            step = self.plan.spend(self.ledger, spend.to_step().mechanism)
            if step.eps != spend.epsilon:  # the noise is calibrated from the plan: a bug if they differ
                raise PlanExceeded(
                    f"{self.party_id}: {step.mechanism} ran at eps={spend.epsilon!r}, its plan says {step.eps!r}"
                )

    def start(self) -> list[Send]:
        self.tree = share_predictor(
            self.X,
            self.y,
            self.schema,
            level_epsilon=level_epsilon(self.plan),
            released=self.plan.released,
            rng=self.tree_rng,
            **self.params,
        )
        self._record(self.tree.spends)
        return [self.hello("pfds"), Send(CURATOR, PfdsTree(**tree_fields(self.tree)))]

    def label(self, trees: list[PrivateTree]) -> list[Send]:
        assert self.tree is not None  # start() grew it
        labelled = share_data(
            self.tree,
            self.X,
            [self.tree, *trees],
            level_epsilon=level_epsilon(self.plan),
            released=self.plan.released,
            rng=self.data_rng,
            p=self.p,
            consistency=self.consistency,
            secure=self.secure,
        )
        self._record(labelled.spends[len(self.tree.spends) :])
        self.released_rows = int(labelled.X.shape[0])
        y = np.asarray(labelled.y, dtype=np.float64)
        return [Send(CURATOR, PfdsData(X=labelled.X, y=y, epsilon=float(labelled.epsilon)))]

    def ledgers(self) -> tuple[PrivacyLedger, ...]:
        return (self.ledger,)

    def result(self) -> dict[str, Any]:
        out = super().result()
        out.update(
            {
                "privacy": self.ledger.to_dict(),
                "synthetic_rows": self.released_rows,
                "tree_leaves": self.tree.n_leaves if self.tree is not None else None,
            }
        )
        return out
