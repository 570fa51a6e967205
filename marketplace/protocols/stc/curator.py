"""The curator's side of `stc`: pass the consumer's target points to every owner, collect one
private release from each, and hand them all to the consumer.

Phases: ``gathering`` (hellos and T) -> ``collecting`` (one ``stc_release`` per owner) ->
``closing``. The curator never sees a raw source point: T is the consumer's own (public by the
protocol's design) and each S' is already private. It checks every release before forwarding it:
its shape (finite values are enforced by the codec), and that its method, privacy notion and cost
are the scenario's. Noisy centres may fall outside the scaled ball, so their norm is not checked.
An owner lost before answering is a dropout; the consumer still gets the others' releases.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Bye, Hello, RuntimeMessage
from marketplace.protocols.stc.config import StcConfig
from marketplace.protocols.stc.messages import StcMessage, StcRelease, StcReleases, StcRequest, StcTarget
from marketplace.roles import CONSUMER, Send
from marketplace.roles.curator import CuratorBase, CuratorPhase, RunStatus
from marketplace.roles.parsimony import ParsimonyLedger

log = logging.getLogger("marketplace.protocols.stc.curator")


class StcCurator(CuratorBase):
    protocol = "stc"

    def __init__(self, *, scenario_name: str, owners: tuple[str, ...], dim: int, settings: StcConfig) -> None:
        super().__init__(scenario_name=scenario_name, owners=owners)
        self.dim = dim
        self.settings = settings
        self.target: np.ndarray | None = None
        self.releases: dict[str, np.ndarray] = {}
        self.costs: dict[str, float] = {}
        self.history: list[dict[str, Any]] = []
        """One record per release handed to the consumer, in the order the curator joins them (owner order)."""
        self.ledger = ParsimonyLedger()

    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope[StcMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case Hello():
                return self._on_hello(message)
            case StcTarget():
                return self._on_target(message)
            case StcRelease():
                return self._on_release(message)
            case Bye():
                return self._on_bye(message)
        raise ProtocolError(party=message.sender, kind=message.kind, reason="the stc curator does not accept this kind")

    def _drop(self, peer: str) -> dict[str, Any]:
        return {"round": 0, "phase": str(self.phase)}

    def _progress_after_loss(self, peer: str) -> list[Send]:
        return self._maybe_begin() if self.phase == CuratorPhase.GATHERING else self._maybe_finish()

    # --- gathering -------------------------------------------------------------------------
    def _on_hello(self, message: Envelope) -> list[Send]:
        refused = self.admit(message, open_=self.phase == CuratorPhase.GATHERING)
        return refused if refused is not None else self._maybe_begin()

    def _on_target(self, message: Envelope) -> list[Send]:
        if message.sender != CONSUMER or self.target is not None:
            raise ProtocolError(party=message.sender, kind="stc_target", reason="only the consumer sends T, once")
        points = message.body.points
        if points.shape[1] != self.dim or len(points) == 0:
            raise ProtocolError(
                party=message.sender,
                kind="stc_target",
                reason=f"expected a non-empty (m, {self.dim}) array, got {list(points.shape)}",
            )
        self.target = points
        return self._maybe_begin()

    def _maybe_begin(self) -> list[Send]:
        everyone = set(self.active) | {CONSUMER}
        if self.phase != CuratorPhase.GATHERING or self.target is None or not everyone <= self.present:
            return []
        self.phase = CuratorPhase.COLLECTING
        log.info("all %d owners and the consumer are present; |T| = %d", len(self.active), len(self.target))
        if not self.active:
            return self._maybe_finish()
        request = StcRequest(points=self.target)
        return [Send(o, request) for o in self.active]

    # --- collecting ------------------------------------------------------------------------
    def _on_release(self, message: Envelope) -> list[Send]:
        body: StcRelease = message.body
        sender = message.sender
        if self.phase != CuratorPhase.COLLECTING or sender not in self.active or sender in self.releases:
            raise ProtocolError(party=sender, kind="stc_release", reason="no release is expected from this party now")
        s = self.settings
        expected_cost = s.privacy.epsilon if s.privacy.notion == "dp" else s.privacy.rho
        problem = None
        if body.centers.ndim != 2 or (len(body.centers) and body.centers.shape[1] != self.dim):
            problem = f"centers must be a (c, {self.dim}) array, got {list(body.centers.shape)}"
        elif body.method != s.release or body.notion != s.privacy.notion or not np.isclose(body.cost, expected_cost):
            problem = (
                f"expected a {s.release} release under {s.privacy.notion} costing {expected_cost:g}, "
                f"got {body.method} under {body.notion} costing {body.cost:g}"
            )
        if problem:
            raise ProtocolError(party=sender, kind="stc_release", reason=problem)
        self.releases[sender] = np.asarray(body.centers, dtype=np.float64)
        self.costs[sender] = float(body.cost)
        log.info("round %d/%d done", len(self.releases), len(self.owners))
        return self._maybe_finish()

    def awaits_from(self, peer: str) -> bool:
        return self.phase == CuratorPhase.COLLECTING and peer in self.active and peer not in self.releases

    def frame_refused(self, peer: str, about_kind: str | None, detail: str = "") -> list[Send]:
        """An owner whose release cannot even be decoded is excluded instead of being waited for."""
        if not self.awaits_from(peer) or about_kind not in ("stc_release", None):
            return []
        return self.exclude(peer, "sent a release that could not be read" + (f": {detail}" if detail else ""))

    def _awaited_in_phase(self) -> dict[str, str]:
        if self.phase == CuratorPhase.GATHERING and CONSUMER in self.present and self.target is None:
            return {CONSUMER: "its target points (stc_target)"}
        if self.phase == CuratorPhase.COLLECTING:
            return {o: "its release (stc_release)" for o in self.active if o not in self.releases}
        return {}

    def _maybe_finish(self) -> list[Send]:
        if self.phase != CuratorPhase.COLLECTING or any(o not in self.releases for o in self.active):
            return []
        owners = tuple(o for o in self.owners if o in self.releases)
        centers = np.concatenate([self.releases[o] for o in owners]) if owners else np.zeros((0, self.dim))
        counts = np.array([len(self.releases[o]) for o in owners], dtype=np.int64)
        self._record_releases(owners)
        reason = (
            "every owner released"
            if len(owners) == len(self.owners)
            else f"{len(owners)} of {len(self.owners)} owners released"
        )
        status: RunStatus = "completed" if owners else "failed"
        return [Send(CONSUMER, StcReleases(centers=centers, counts=counts, owners=owners))] + self._close(
            status=status, reason=reason
        )

    def _record_releases(self, owners: tuple[str, ...]) -> None:
        """The history: one record per release joined, in owner order (the order the consumer gets
        them in; the order they arrived in follows timing, so it is not recorded)."""
        total = 0
        for index, owner in enumerate(owners, start=1):
            total += len(self.releases[owner])
            self.history.append(
                {
                    "release": index,
                    "owner": owner,
                    "centers": int(len(self.releases[owner])),
                    "centers_total": total,
                    "cost": self.costs[owner],
                }
            )

    # --- ending ------------------------------------------------------------------------------
    def progress(self) -> int:
        """Owners whose release arrived (the in-process driver's progress bar)."""
        return len(self.releases)

    def result(self) -> dict[str, Any]:
        return {
            "end_reason": self.end_reason,
            "released": sorted(self.releases),
            "centers_per_owner": {o: int(len(c)) for o, c in sorted(self.releases.items())},
            "dropouts": dict(self.dropouts),
            "rounds": list(self.history),
            "parsimony": {
                "points_seen": 0,
                "note": "the curator sees T (the consumer's, public by design) and private releases only",
                "target_size": 0 if self.target is None else int(len(self.target)),
            },
        }
