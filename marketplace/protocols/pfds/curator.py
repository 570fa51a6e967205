"""The curator's side of `pfds`: collect each sharer's private releases and route them to every agent.

Phases: ``trees`` (hellos and one tree per sharer) -> ``data`` (one labelled synthetic dataset per
sharer) -> ``closing`` (``shutdown`` sent, waiting for every ``bye``).

* A tree is checked (rebuilt against the public schema) as it arrives; a malformed one gets its
  sharer flagged and excluded, as does a dataset that does not fit the schema. A second tree or
  dataset from the same sharer is refused and the first one kept.
* Once every live sharer's tree is in and every agent is present, each tree goes to every other
  agent (``pfds_shared_tree``), followed by ``pfds_phase(label)`` naming the trees of the vote.
  The agents are the sharers, the *receivers* (owners that share nothing: ``pfds.sharers`` below
  the number of owners) and the consumer.
* Once every live sharer's dataset is in, each goes to every other agent, followed by
  ``pfds_phase(train)``; then the run closes.
* A sharer or receiver lost at any point is a dropout: the run goes on with the others (a tree
  already forwarded stays in the vote). Losing the consumer fails the run, and so does losing
  every sharer before its records came: the agents would train on their own rows alone.

The curator reads no raw record: it sees trees and synthetic records, which are private releases.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Bye, Error, Hello, RuntimeMessage
from marketplace.protocols.pfds import MalformedPlain, PrivateTree, PublicSchema
from marketplace.protocols.pfds.messages import (
    PfdsData,
    PfdsMessage,
    PfdsPhase,
    PfdsSharedData,
    PfdsSharedTree,
    PfdsTree,
)
from marketplace.protocols.pfds.wire import check_records, tree_fields, tree_from_body
from marketplace.roles import CONSUMER, Send
from marketplace.roles.curator import CuratorBase

log = logging.getLogger(__name__)

RELEASES_PER_STEP = 10
"""Releases (trees or synthetic datasets) an agent reads in a reference step, one that
``transport.progress_timeout_s`` covers; with more sharers, round 2 and the closing get longer in
proportion (:meth:`PfdsCurator.progress_scale`)."""


class PfdsCuratorPhase(StrEnum):
    """Where a pfds curator stands: hellos and trees, then the sharers' records, then the end."""

    TREES = "trees"
    DATA = "data"
    CLOSING = "closing"


class PfdsCurator(CuratorBase):
    protocol = "pfds"
    Phase = PfdsCuratorPhase

    def members(self) -> tuple[str, ...]:
        return self.owners

    def __init__(
        self, *, scenario_name: str, sharers: tuple[str, ...], schema: PublicSchema, receivers: tuple[str, ...] = ()
    ) -> None:
        super().__init__(scenario_name=scenario_name, owners=(*receivers, *sharers))  # the sharers are the last owners
        self.sharers = sharers
        self.receivers = receivers
        self.schema = schema
        self.trees: dict[str, PrivateTree] = {}
        self.datasets: dict[str, PfdsData] = {}
        self.voters: list[str] = []
        self.history: list[dict[str, Any]] = []
        """One record per phase whose releases the curator forwarded (trees, then records)."""

    # --- role interface ------------------------------------------------------------------
    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope[PfdsMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case Hello():
                return self._on_hello(message)
            case PfdsTree():
                return self._on_tree(message)
            case PfdsData():
                return self._on_data(message)
            case Bye():
                return self._on_bye(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="the pfds curator does not accept this kind"
        )

    def _drop(self, peer: str) -> dict[str, Any]:
        return {"round": 1 if self.phase == PfdsCuratorPhase.TREES else 2, "phase": str(self.phase)}

    def _progress_after_loss(self, peer: str) -> list[Send]:
        return self._advance()

    # --- messages ------------------------------------------------------------------------
    def _on_hello(self, message: Envelope) -> list[Send]:
        refused = self.admit(message)
        return refused if refused is not None else self._advance()

    def _check_sender(self, message: Envelope, phase: PfdsCuratorPhase, have: dict) -> None:
        sender = message.sender
        if sender not in self.present or sender not in self.sharers:
            raise ProtocolError(party=sender, kind=message.kind, reason="only a sharer that said hello sends a release")
        if sender in have:
            raise ProtocolError(
                party=sender, kind=message.kind, reason="this sharer's release already arrived (one per sharer)"
            )
        if sender not in self.active:
            raise ProtocolError(party=sender, kind=message.kind, reason="this sharer was excluded from the run")
        if self.phase != phase:
            raise ProtocolError(party=sender, kind=message.kind, reason=f"not expected in phase '{self.phase}'")

    def _on_tree(self, message: Envelope) -> list[Send]:
        self._check_sender(message, PfdsCuratorPhase.TREES, self.trees)
        try:
            self.trees[message.sender] = tree_from_body(message.body, self.schema)
        except MalformedPlain as err:
            return self._flag(message, f"malformed tree: {err}")
        return self._advance()

    def _on_data(self, message: Envelope) -> list[Send]:
        self._check_sender(message, PfdsCuratorPhase.DATA, self.datasets)
        body: PfdsData = message.body
        problem = check_records(body.X, body.y, self.schema, message.sender)
        if problem:
            return self._flag(message, f"records outside the public schema: {problem}")
        self.datasets[message.sender] = body
        return self._advance()

    def _flag(self, message: Envelope, problem: str) -> list[Send]:
        """Exclude a sharer whose release cannot be used, tell it why, and go on without it."""
        sender = message.sender
        self.flagged[sender] = problem
        self.active.remove(sender)
        log.warning("sharer %s flagged and excluded: %s", sender, problem)
        refusal = Error(
            code="refused",
            detail=f"{sender} excluded: {problem}"[:2000],
            about_kind=message.kind,
            about_msg_id=message.msg_id,
        )
        return [Send(sender, refusal, reply_to=message.msg_id)] + self._advance()

    def progress_scale(self, peer: str) -> float:
        """Round 2 and the closing grow with the number of sharers: before its records (or its
        ``bye``) an agent reads one release per other sharer (a tree; a synthetic dataset) and labels
        with every tree, and the agents of one owner host do so one after the other. The reference
        step reads :data:`RELEASES_PER_STEP` releases; a step that reads more gets proportionally
        longer. The count is the scenario's (the sharers the curator forwarded), not the agent's."""
        if self.phase == PfdsCuratorPhase.DATA:
            return max(1.0, len(self.voters) / RELEASES_PER_STEP)
        if self.phase == PfdsCuratorPhase.CLOSING:
            return max(1.0, len(self.datasets) / RELEASES_PER_STEP)
        return 1.0

    def _awaited_in_phase(self) -> dict[str, str]:
        if self.phase == PfdsCuratorPhase.TREES:
            return {
                s: "its tree (pfds_tree)" for s in self._live_sharers() if s in self.present and s not in self.trees
            }
        if self.phase == PfdsCuratorPhase.DATA:
            return {s: "its labelled records (pfds_data)" for s in self._live_sharers() if s not in self.datasets}
        return {}

    # --- routing ---------------------------------------------------------------------------
    def _agents(self) -> list[str]:
        return [*self.active, CONSUMER]

    def _live_sharers(self) -> list[str]:
        return [s for s in self.active if s in self.sharers]

    def _advance(self) -> list[Send]:
        if self.phase == PfdsCuratorPhase.TREES:
            everyone = set(self.active) | {CONSUMER}
            if not everyone <= self.present or not set(self._live_sharers()) <= set(self.trees):
                return []
            if not self._live_sharers():
                return self._close(status="failed", reason="no sharer left")
            return self._forward_trees()
        if self.phase == PfdsCuratorPhase.DATA and set(self._live_sharers()) <= set(self.datasets):
            if not self._live_sharers():  # every sharer was lost before its records came: nothing to train on
                return self._close(
                    status="failed",
                    reason=f"no sharer left: all {len(self.voters)} voters of round 1 "
                    f"were lost before releasing their records (round 2)",
                )
            return self._forward_data()
        return []

    def _forward_trees(self) -> list[Send]:
        self.voters = self._live_sharers()
        self.history.append(
            {
                "phase": 1,
                "step": "trees",
                "sharers": len(self.voters),
                "tree_leaves": sum(self.trees[s].n_leaves for s in self.voters),
                "synthetic_rows": None,
            }
        )
        log.info("round 1/2 done: %d trees in; forwarding them to %d agents", len(self.voters), len(self.voters) + 1)
        bodies = {s: PfdsSharedTree(sharer=s, **tree_fields(self.trees[s])) for s in self.voters}
        sends = []
        for agent in self._agents():
            sends += [Send(agent, bodies[s]) for s in self.voters if s != agent]
            sends.append(Send(agent, PfdsPhase(phase="label", sharers=tuple(self.voters))))
        self.phase = PfdsCuratorPhase.DATA
        return sends

    def _forward_data(self) -> list[Send]:
        sources = self._live_sharers()
        self.history.append(
            {
                "phase": 2,
                "step": "records",
                "sharers": len(sources),
                "tree_leaves": None,
                "synthetic_rows": sum(int(self.datasets[s].X.shape[0]) for s in sources),
            }
        )
        log.info("round 2/2 done: %d labelled datasets in; forwarding them", len(sources))
        bodies = {
            s: PfdsSharedData(sharer=s, X=self.datasets[s].X, y=self.datasets[s].y, epsilon=self.datasets[s].epsilon)
            for s in sources
        }
        sends = []
        for agent in self._agents():
            sends += [Send(agent, bodies[s]) for s in sources if s != agent]
            sends.append(Send(agent, PfdsPhase(phase="train", sharers=tuple(sources))))
        return sends + self._close(status="completed", reason="every live sharer's release was forwarded")

    # --- ending ----------------------------------------------------------------------------
    def progress(self) -> int:
        """Phases done: 0 while trees are gathered, 1 while records are, 2 once closing."""
        return {"trees": 0, "data": 1, "closing": 2}.get(str(self.phase), 0)

    def result(self) -> dict[str, Any]:
        return {
            "end_reason": self.end_reason,
            "voters": list(self.voters),
            "receivers": list(self.receivers),
            "data_sources": sorted(self.datasets, key=self.sharers.index),
            "tree_leaves": {s: self.trees[s].n_leaves for s in self.sharers if s in self.trees},
            "synthetic_rows": {s: int(self.datasets[s].X.shape[0]) for s in self.sharers if s in self.datasets},
            "dropouts": dict(self.dropouts),
            "flagged": dict(self.flagged),
            "rounds": list(self.history),
            "parsimony": {"points_seen": 0, "note": "the curator holds trees and synthetic records only"},
        }
