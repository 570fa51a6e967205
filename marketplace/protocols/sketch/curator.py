"""The curator's side of `sketch`: ask every owner for its one release, check it, merge, publish.

Phases: ``gathering`` (hellos) -> ``collecting`` (one ``sketch_request`` per owner, waiting for
each ``sketch_release``) -> ``closing`` (publication sent, waiting for every ``bye``).

The curator sees no raw record: only noisy sums and counts. A release that cannot be an honest
sketch of the public map (another map's fingerprint, a numerator of the wrong length, a privacy
claim other than the scenario's, a count or variance out of range) gets its owner flagged and
excluded; a second release from the same owner is refused with an error. An owner lost before
it released is a dropout: the run goes on with the others.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Bye, Hello, RuntimeMessage
from marketplace.protocols.sketch import FeatureMap, SketchRelease, merge_sketches
from marketplace.protocols.sketch.messages import SketchMessage, SketchPublication, SketchReleaseBody, SketchRequest
from marketplace.protocols.sketch.wire import release_of, wire_mechanism
from marketplace.roles import CONSUMER, Send
from marketplace.roles.curator import CuratorBase, CuratorPhase

log = logging.getLogger(__name__)


class SketchCurator(CuratorBase):
    protocol = "sketch"

    def __init__(
        self,
        *,
        scenario_name: str,
        owners: tuple[str, ...],
        feature_map: FeatureMap,
        epsilon: float | None,
        mechanism: str,
        delta: float,
    ) -> None:
        super().__init__(scenario_name=scenario_name, owners=owners)
        self.feature_map = feature_map
        self.epsilon = epsilon
        self.mechanism = mechanism if epsilon is not None else "none"
        self.delta = (delta if mechanism == "gaussian" else 0.0) if epsilon is not None else 0.0
        self.releases: dict[str, SketchRelease] = {}
        self.history: list[dict[str, Any]] = []
        """One record per sketch merged, in the order the curator merges them (owner order)."""

    # --- role interface ------------------------------------------------------------------
    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope[SketchMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case Hello():
                return self._on_hello(message)
            case SketchReleaseBody():
                return self._on_release(message)
            case Bye():
                return self._on_bye(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="the sketch curator does not accept this kind"
        )

    def _drop(self, peer: str) -> dict[str, Any]:
        record = {"phase": str(self.phase), "released": peer in self.releases}
        self.releases.pop(peer, None)  # a release from a party that then vanished is dropped too
        return record

    def _progress_after_loss(self, peer: str) -> list[Send]:
        return self._maybe_begin() if self.phase == CuratorPhase.GATHERING else self._maybe_publish()

    # --- gathering -----------------------------------------------------------------------
    def _on_hello(self, message: Envelope) -> list[Send]:
        refused = self.admit(message, open_=self.phase == CuratorPhase.GATHERING)
        return refused if refused is not None else self._maybe_begin()

    def _maybe_begin(self) -> list[Send]:
        if self.phase != CuratorPhase.GATHERING or not (set(self.active) | {CONSUMER}) <= self.present:
            return []
        if not self.active:
            return self._close(status="failed", reason="no owner left")
        log.info("all %d owners and the consumer are present; asking for sketches", len(self.active))
        self.phase = CuratorPhase.COLLECTING
        request = SketchRequest(map_fingerprint=self.feature_map.fingerprint, n_features=self.feature_map.n_features)
        return [Send(o, request) for o in self.active]

    # --- collecting ----------------------------------------------------------------------
    def _on_release(self, message: Envelope) -> list[Send]:
        sender = message.sender
        if sender in self.releases:
            raise ProtocolError(
                party=sender,
                kind="sketch_release",
                reason="this owner's sketch was already received (one release per owner)",
            )
        if self.phase != CuratorPhase.COLLECTING or sender not in self.active:
            raise ProtocolError(party=sender, kind="sketch_release", reason="no sketch was requested from this party")
        problem = self._problem(message.body)
        if problem is None:
            try:
                self.releases[sender] = release_of(message.body)
            except (TypeError, ValueError) as err:
                problem = str(err)
        if problem is not None:
            self.flagged[sender] = problem
            self.active.remove(sender)
            log.warning("owner %s flagged and excluded: %s", sender, problem)
            return self._maybe_publish()
        log.info("round %d/%d done: sketch received from %s", len(self.releases), len(self.owners), sender)
        return self._maybe_publish()

    def awaits_from(self, peer: str) -> bool:
        return self.phase == CuratorPhase.COLLECTING and peer in self.active and peer not in self.releases

    def frame_refused(self, peer: str, about_kind: str | None, detail: str = "") -> list[Send]:
        """An owner whose release cannot even be decoded (NaN, wrong types) is flagged and excluded,
        like one whose release breaks the public plan, instead of being waited for."""
        if not self.awaits_from(peer) or about_kind not in ("sketch_release", None):
            return []
        self.flagged[peer] = "sent a sketch release that could not be read"
        self.active.remove(peer)
        log.warning("owner %s flagged and excluded: its release could not be read", peer)
        return self._maybe_publish()

    def _awaited_in_phase(self) -> dict[str, str]:
        if self.phase == CuratorPhase.COLLECTING:
            return {o: "its sketch (sketch_release)" for o in self.active if o not in self.releases}
        return {}

    def _problem(self, body: SketchReleaseBody) -> str | None:
        """Why ``body`` cannot be an honest release under this run's public map and privacy plan."""
        fmap = self.feature_map
        if body.map_fingerprint != fmap.fingerprint:
            return (
                f"field 'map_fingerprint' expected {fmap.fingerprint[:12]}... (the public map), "
                f"got {body.map_fingerprint[:12]}..."
            )
        if body.numerator.shape != (fmap.n_features,):
            return f"field 'numerator' expected shape [{fmap.n_features}], got {list(body.numerator.shape)}"
        if body.mechanism != self.mechanism or body.epsilon != self.epsilon or body.delta != self.delta:
            return (
                f"fields 'mechanism', 'epsilon', 'delta' expected the scenario's ({self.mechanism}, {self.epsilon}, "
                f"{self.delta}), "
                f"got ({body.mechanism}, {body.epsilon}, {body.delta})"
            )
        if self.epsilon is None and (body.numerator_variance or body.count_variance):
            return "an exact release must have zero noise variances"
        if not math.isfinite(body.count):
            return f"field 'count' expected a finite number, got {body.count!r}"
        return None

    def _maybe_publish(self) -> list[Send]:
        if self.phase != CuratorPhase.COLLECTING or any(o not in self.releases for o in self.active):
            return []
        if not self.releases:
            return self._close(status="failed", reason="no owner released a sketch")
        owners = tuple(o for o in self.owners if o in self.releases)
        parts = [self.releases[o] for o in owners]
        merged = merge_sketches(parts)
        self._record_merge(owners)
        body = SketchPublication(
            owners=owners,
            numerators=np.array([p.numerator for p in parts]),
            counts=np.array([p.count for p in parts]),
            numerator_variances=np.array([p.numerator_variance for p in parts]),
            count_variances=np.array([p.count_variance for p in parts]),
            epsilons=tuple(p.epsilon if p.is_private else None for p in parts),
            deltas=tuple(p.delta for p in parts),
            mechanisms=tuple(wire_mechanism(p.mechanism) for p in parts),
            map_fingerprint=self.feature_map.fingerprint,
            merged_numerator=np.array(merged.numerator),
            merged_count=merged.count,
        )
        return [Send(CONSUMER, body)] + self._close(status="completed", reason=f"published {len(parts)} sketches")

    def _record_merge(self, owners: tuple[str, ...]) -> None:
        """The history: one record per sketch merged, in owner order (the order they arrived in
        follows timing, so it is not recorded), with the merged noisy count so far."""
        counts: list[float] = []
        for index, owner in enumerate(owners, start=1):
            release = self.releases[owner]
            counts.append(float(release.count))
            self.history.append(
                {
                    "release": index,
                    "owner": owner,
                    "count": counts[-1],
                    "merged_count": math.fsum(counts),
                    "epsilon": release.epsilon if release.is_private else None,
                }
            )

    # --- ending ----------------------------------------------------------------------------
    def progress(self) -> int:
        """Owners whose release arrived (the in-process driver's progress bar)."""
        return len(self.releases)

    def result(self) -> dict[str, Any]:
        return {
            "end_reason": self.end_reason,
            "released": sorted(self.releases),
            "flagged": dict(self.flagged),
            "dropouts": dict(self.dropouts),
            "rounds": list(self.history),
            "parsimony": {
                "points_seen": 0,
                "sketches_received": len(self.releases),
                "note": "the curator receives noisy sums of features and noisy counts, never a record",
            },
        }
