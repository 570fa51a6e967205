"""What every curator does the same way, whatever the protocol: admit parties by their hello, drop
an owner that goes silent, and end the run (shutdown to every party still reachable, then one bye
from each)."""

from __future__ import annotations

import logging
from typing import Any

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Hello, Shutdown
from marketplace.roles import CONSUMER, Role, Send

log = logging.getLogger("marketplace.curator")


class CuratorBase(Role):
    """Subclasses set ``protocol`` and ``scenario_name``, keep their owners (or sharers) in the
    order given by :meth:`members`, the ones still taking part in ``active`` and the lost ones in
    ``dropouts``, set ``phase``, and say what a dropout means for them (:meth:`_drop`) and how the
    run goes on without it (:meth:`_progress_after_loss`). This base keeps ``present``, ``lost``,
    ``waiting_bye`` and ``end_reason``."""

    role_name = "curator"
    protocol: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.present: set[str] = set()
        self.lost: set[str] = set()
        self.waiting_bye: set[str] = set()
        self.end_reason = ""

    def members(self) -> tuple[str, ...]:
        """The data-holding parties of the run (owners; pfds calls them sharers)."""
        return tuple(self.owners)

    def expected_peers(self) -> tuple[str, ...]:
        if self.phase == "closing":
            return tuple(sorted(self.waiting_bye))
        return (*self.active, CONSUMER)

    def peer_lost(self, peer: str) -> list[Send]:
        """A lost consumer fails the run; a lost owner becomes a dropout and the run goes on."""
        if self._lost_while_closing(peer):
            return []
        if peer == CONSUMER:
            return self._close(status="failed", reason="the consumer was lost")
        if peer in self.active:
            self.active.remove(peer)
            record = self.dropouts[peer] = self._drop(peer)
            where = f" in round {record['round']}" if "round" in record else ""
            log.warning("owner %s dropped out%s (%s)", peer, where, self.phase)
        return self._progress_after_loss(peer)

    def _drop(self, peer: str) -> dict[str, Any]:
        """Forget what ``peer`` had in flight; return its dropout record for the report."""
        return {"phase": self.phase}

    def _progress_after_loss(self, peer: str) -> list[Send]:
        """The messages that let the run go on without ``peer``."""
        return []

    def admit(self, message: Envelope, *, open_: bool = True) -> None:
        """Check a ``hello`` (a party of this run, the right role, protocol and scenario, once) and
        record the sender as present. ``open_``: whether hellos are still accepted."""
        hello: Hello = message.body
        sender = message.sender
        members = self.members()
        expected_role = "consumer" if sender == CONSUMER else "owner" if sender in members else None
        if expected_role is None:
            raise ProtocolError(party=sender, kind="hello", reason=f"not a party of this run (owners: {', '.join(members)}, consumer)")
        if hello.role != expected_role or hello.protocol != self.protocol or hello.scenario != self.scenario_name:
            raise ProtocolError(party=sender, kind="hello", reason=(
                f"expected role {expected_role!r}, protocol {self.protocol!r}, scenario {self.scenario_name!r}; "
                f"got role {hello.role!r}, protocol {hello.protocol!r}, scenario {hello.scenario!r}"))
        if not open_ or sender in self.present:
            raise ProtocolError(party=sender, kind="hello", reason="already said hello")
        self.present.add(sender)

    def _close(self, *, status: str, reason: str) -> list[Send]:
        """End the run: ``shutdown`` to every party not lost, then wait for their ``bye``."""
        self.phase = "closing"
        self.end_reason = reason
        if status == "failed":
            self.failure = reason
        targets = [p for p in (*self.members(), CONSUMER) if p not in self.lost]
        self.waiting_bye = set(targets)
        self.done = not self.waiting_bye
        return [Send(p, Shutdown(reason=reason, status=status)) for p in targets]

    def _on_bye(self, message: Envelope) -> list[Send]:
        if self.phase != "closing" or message.sender not in self.waiting_bye:
            raise ProtocolError(party=message.sender, kind="bye", reason="no shutdown was sent to this party")
        self.waiting_bye.discard(message.sender)
        self.done = not self.waiting_bye
        return []

    def _lost_while_closing(self, peer: str) -> bool:
        """Record a lost peer; True when the run is already closing (then it is simply not waited for)."""
        self.lost.add(peer)
        if self.phase != "closing":
            return False
        self.waiting_bye.discard(peer)
        self.done = not self.waiting_bye
        return True
