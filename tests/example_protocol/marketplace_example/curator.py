"""The curator of ``noisy_count``: ask every owner for its noisy count, add them up, send the
total to the consumer.

Phases: ``gathering`` (hellos) -> ``collecting`` (one ``count_release`` per owner) -> ``closing``.
Admission, dropouts and the end of the run (shutdown, then one bye from each party) come from
:class:`~marketplace.roles.curator.CuratorBase`; this class says what the protocol waits for and
what a lost owner means (the total then adds up the others' releases). The curator sees noisy
counts only, never a row.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Bye, Hello, RuntimeMessage
from marketplace.roles import CONSUMER, Send
from marketplace.roles.curator import CuratorBase, CuratorPhase
from marketplace_example.config import NoisyCountConfig
from marketplace_example.messages import CountRelease, CountRequest, CountTotal, NoisyCountMessage

log = logging.getLogger("marketplace_example.curator")


class NoisyCountCurator(CuratorBase):
    protocol = "noisy_count"

    def __init__(self, *, scenario_name: str, owners: tuple[str, ...], settings: NoisyCountConfig) -> None:
        super().__init__(scenario_name=scenario_name, owners=owners)
        self.settings = settings
        self.releases: dict[str, float] = {}

    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope[NoisyCountMessage | RuntimeMessage]) -> list[Send]:
        match message.body:
            case Hello():
                return self._on_hello(message)
            case CountRelease():
                return self._on_release(message)
            case Bye():
                return self._on_bye(message)
        raise ProtocolError(
            party=message.sender, kind=message.kind, reason="the noisy_count curator does not accept this kind"
        )

    # --- what CuratorBase asks of a protocol ---------------------------------------------------
    def _progress_after_loss(self, peer: str) -> list[Send]:
        return self._maybe_begin() if self.phase == CuratorPhase.GATHERING else self._maybe_finish()

    def _awaited_in_phase(self) -> dict[str, str]:
        if self.phase == CuratorPhase.COLLECTING:
            return {o: "its noisy count (count_release)" for o in self.active if o not in self.releases}
        return {}

    def awaits_from(self, peer: str) -> bool:
        return self.phase == CuratorPhase.COLLECTING and peer in self.active and peer not in self.releases

    # --- the protocol ----------------------------------------------------------------------------
    def _on_hello(self, message: Envelope) -> list[Send]:
        refused = self.admit(message, open_=self.phase == CuratorPhase.GATHERING)
        return refused if refused is not None else self._maybe_begin()

    def _maybe_begin(self) -> list[Send]:
        if self.phase != CuratorPhase.GATHERING or not (set(self.active) | {CONSUMER}) <= self.present:
            return []
        self.phase = CuratorPhase.COLLECTING
        log.info("all %d owners and the consumer are present", len(self.active))
        return [Send(o, CountRequest(label=self.settings.label)) for o in self.active] or self._maybe_finish()

    def _on_release(self, message: Envelope) -> list[Send]:
        body: CountRelease = message.body
        sender = message.sender
        if self.phase != CuratorPhase.COLLECTING or sender not in self.active or sender in self.releases:
            raise ProtocolError(party=sender, kind="count_release", reason="no release is expected from this party now")
        if not math.isclose(body.epsilon, self.settings.epsilon):
            raise ProtocolError(
                party=sender,
                kind="count_release",
                reason=f"expected a release costing epsilon {self.settings.epsilon:g}, got {body.epsilon:g}",
            )
        self.releases[sender] = body.value
        log.info("round %d/%d done", len(self.releases), len(self.owners))  # the runner's progress bar reads this line
        return self._maybe_finish()

    def _maybe_finish(self) -> list[Send]:
        if self.phase != CuratorPhase.COLLECTING or any(o not in self.releases for o in self.active):
            return []
        owners = tuple(o for o in self.owners if o in self.releases)
        total = CountTotal(total=float(sum(self.releases[o] for o in owners)), owners=owners)
        reason = (
            "every owner released"
            if len(owners) == len(self.owners)
            else f"{len(owners)} of {len(self.owners)} owners released"
        )
        return [Send(CONSUMER, total)] + self._close(status="completed" if owners else "failed", reason=reason)

    def progress(self) -> int:
        """Owners whose release arrived (the in-process driver's progress bar)."""
        return len(self.releases)

    def result(self) -> dict[str, Any]:
        return {"end_reason": self.end_reason, "released": sorted(self.releases), "dropouts": dict(self.dropouts)}
