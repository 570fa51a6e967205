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

from marketplace.curator.ledger import ParsimonyLedger
from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Hello, Shutdown
from marketplace.messages.kinds_stc import StcRelease, StcReleases, StcRequest
from marketplace.roles import CONSUMER, CURATOR, Role, Send
from marketplace.scenario.stc import StcConfig

log = logging.getLogger("marketplace.curator.stc")


class StcCurator(Role):
    role_name = "curator"

    def __init__(self, *, scenario_name: str, owners: tuple[str, ...], dim: int, settings: StcConfig) -> None:
        super().__init__()
        self.party_id = CURATOR
        self.scenario_name = scenario_name
        self.owners = owners
        self.dim = dim
        self.settings = settings
        self.phase = "gathering"
        self.present: set[str] = set()
        self.active: list[str] = list(owners)
        self.target: np.ndarray | None = None
        self.releases: dict[str, np.ndarray] = {}
        self.dropouts: dict[str, dict[str, Any]] = {}
        self.lost: set[str] = set()
        self.ledger = ParsimonyLedger()
        self.waiting_bye: set[str] = set()
        self.end_reason = ""

    def start(self) -> list[Send]:
        return []

    def expected_peers(self) -> tuple[str, ...]:
        if self.phase == "closing":
            return tuple(sorted(self.waiting_bye))
        return (*self.active, CONSUMER)

    def handle(self, message: Envelope) -> list[Send]:
        handler = {"hello": self._on_hello, "stc_target": self._on_target, "stc_release": self._on_release,
                   "bye": self._on_bye}.get(message.kind)
        if handler is None:
            raise ProtocolError(party=message.sender, kind=message.kind, reason="the stc curator does not accept this kind")
        return handler(message)

    def peer_lost(self, peer: str) -> list[Send]:
        self.lost.add(peer)
        if self.phase == "closing":
            self.waiting_bye.discard(peer)
            self.done = not self.waiting_bye
            return []
        if peer == CONSUMER:
            return self._close(status="failed", reason="the consumer was lost")
        if peer in self.active:
            self.active.remove(peer)
            self.dropouts[peer] = {"round": 0, "phase": self.phase}
            log.warning("owner %s dropped out (%s)", peer, self.phase)
        return self._maybe_begin() if self.phase == "gathering" else self._maybe_finish()

    # --- gathering -------------------------------------------------------------------------
    def _on_hello(self, message: Envelope) -> list[Send]:
        hello: Hello = message.body
        sender = message.sender
        expected_role = "consumer" if sender == CONSUMER else "owner" if sender in self.owners else None
        if expected_role is None:
            raise ProtocolError(party=sender, kind="hello", reason=f"not a party of this run (owners: {', '.join(self.owners)}, consumer)")
        if hello.role != expected_role or hello.protocol != "stc" or hello.scenario != self.scenario_name:
            raise ProtocolError(party=sender, kind="hello", reason=(
                f"expected role {expected_role!r}, protocol 'stc', scenario {self.scenario_name!r}; "
                f"got role {hello.role!r}, protocol {hello.protocol!r}, scenario {hello.scenario!r}"))
        if self.phase != "gathering" or sender in self.present:
            raise ProtocolError(party=sender, kind="hello", reason="already said hello")
        self.present.add(sender)
        return self._maybe_begin()

    def _on_target(self, message: Envelope) -> list[Send]:
        if message.sender != CONSUMER or self.target is not None:
            raise ProtocolError(party=message.sender, kind="stc_target", reason="only the consumer sends T, once")
        points = message.body.points
        if points.shape[1] != self.dim or len(points) == 0:
            raise ProtocolError(party=message.sender, kind="stc_target", reason=f"expected a non-empty (m, {self.dim}) array, got {list(points.shape)}")
        self.target = points
        return self._maybe_begin()

    def _maybe_begin(self) -> list[Send]:
        everyone = set(self.active) | {CONSUMER}
        if self.phase != "gathering" or self.target is None or not everyone <= self.present:
            return []
        self.phase = "collecting"
        log.info("all %d owners and the consumer are present; |T| = %d", len(self.active), len(self.target))
        if not self.active:
            return self._maybe_finish()
        request = StcRequest(points=self.target)
        return [Send(o, request) for o in self.active]

    # --- collecting ------------------------------------------------------------------------
    def _on_release(self, message: Envelope) -> list[Send]:
        body: StcRelease = message.body
        sender = message.sender
        if self.phase != "collecting" or sender not in self.active or sender in self.releases:
            raise ProtocolError(party=sender, kind="stc_release", reason="no release is expected from this party now")
        s = self.settings
        expected_cost = s.privacy.epsilon if s.privacy.notion == "dp" else s.privacy.rho
        problem = None
        if body.centers.ndim != 2 or (len(body.centers) and body.centers.shape[1] != self.dim):
            problem = f"centers must be a (c, {self.dim}) array, got {list(body.centers.shape)}"
        elif body.method != s.release or body.notion != s.privacy.notion or not np.isclose(body.cost, expected_cost):
            problem = (f"expected a {s.release} release under {s.privacy.notion} costing {expected_cost:g}, "
                       f"got {body.method} under {body.notion} costing {body.cost:g}")
        if problem:
            raise ProtocolError(party=sender, kind="stc_release", reason=problem)
        self.releases[sender] = np.asarray(body.centers, dtype=np.float64)
        log.info("round %d/%d done", len(self.releases), len(self.owners))
        return self._maybe_finish()

    def awaits_from(self, peer: str) -> bool:
        return self.phase == "collecting" and peer in self.active and peer not in self.releases

    def frame_refused(self, peer: str, about_kind: str | None) -> list[Send]:
        """An owner whose release cannot even be decoded is excluded instead of being waited for."""
        if not self.awaits_from(peer) or about_kind not in ("stc_release", None):
            return []
        self.active.remove(peer)
        self.dropouts[peer] = {"round": 0, "phase": "collecting", "reason": "sent a release that could not be read"}
        log.warning("owner %s excluded: its release could not be read", peer)
        return self._maybe_finish()

    def _maybe_finish(self) -> list[Send]:
        if self.phase != "collecting" or any(o not in self.releases for o in self.active):
            return []
        owners = tuple(o for o in self.owners if o in self.releases)
        centers = np.concatenate([self.releases[o] for o in owners]) if owners else np.zeros((0, self.dim))
        counts = np.array([len(self.releases[o]) for o in owners], dtype=np.int64)
        reason = "every owner released" if len(owners) == len(self.owners) else f"{len(owners)} of {len(self.owners)} owners released"
        return [Send(CONSUMER, StcReleases(centers=centers, counts=counts, owners=owners))] + self._close(status="completed", reason=reason)

    # --- ending ------------------------------------------------------------------------------
    def _close(self, *, status: str, reason: str) -> list[Send]:
        self.phase = "closing"
        self.end_reason = reason
        if status == "failed":
            self.failure = reason
        targets = [p for p in (*self.owners, CONSUMER) if p not in self.lost]
        self.waiting_bye = set(targets)
        self.done = not self.waiting_bye
        return [Send(p, Shutdown(reason=reason, status=status)) for p in targets]

    def _on_bye(self, message: Envelope) -> list[Send]:
        if self.phase != "closing" or message.sender not in self.waiting_bye:
            raise ProtocolError(party=message.sender, kind="bye", reason="no shutdown was sent to this party")
        self.waiting_bye.discard(message.sender)
        self.done = not self.waiting_bye
        return []

    def result(self) -> dict[str, Any]:
        return {
            "end_reason": self.end_reason,
            "released": sorted(self.releases),
            "centers_per_owner": {o: int(len(c)) for o, c in sorted(self.releases.items())},
            "dropouts": dict(self.dropouts),
            "parsimony": {"points_seen": 0, "note": "the curator sees T (the consumer's, public by design) and private releases only",
                          "target_size": 0 if self.target is None else int(len(self.target))},
        }
