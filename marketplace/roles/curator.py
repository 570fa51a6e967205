"""What every curator does the same way, whatever the protocol: admit parties by their hello, drop
an owner whose connection closes, stops progressing or refuses the run's messages, and end the run
(shutdown to every party still reachable, then one bye from each)."""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any, ClassVar, Literal

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.errors import cut
from marketplace.messages.kinds import Error, Hello, Shutdown
from marketplace.roles import CONSUMER, CURATOR, Role, Send
from marketplace.roles.lifetime import DECLINED
from marketplace.roles.members import ActiveOwners
from marketplace.scenario.fingerprint import differences

log = logging.getLogger("marketplace.curator")

NOT_REFUSALS = frozenset({None, "error", "heartbeat", "shutdown", "bye"})
"""Kinds whose refusal by a party says nothing about whether it can take part."""
RunStatus = Literal["completed", "failed"]
"""How a run ended, as its ``shutdown`` tells every party."""
CLOSING = "closing"
"""The value of every curator ``Phase``'s ``CLOSING`` member."""


class CuratorPhase(StrEnum):
    """Where a curator that gathers hellos, collects one release per owner and closes stands (stc,
    sketch, the example protocol). A protocol with other phases declares its own ``StrEnum``, with
    a ``CLOSING = "closing"`` member, as its curator's ``Phase``. Members are strings, so a phase
    reads as its plain name (``"collecting"``) in a report's dropout record or a log line."""

    GATHERING = "gathering"
    COLLECTING = "collecting"
    CLOSING = "closing"


class CuratorBase(Role):
    """Subclasses set ``protocol`` and ``Phase`` (the enum of their phases: its first member is where
    a run starts, and it has a ``CLOSING`` member), keep their owners (or sharers) in the order
    given by :meth:`members`, say what a dropout means for them (:meth:`_drop`), how the run goes
    on without it (:meth:`_progress_after_loss`) and what they wait for in their own phases
    (:meth:`_awaited_in_phase`). This base keeps the state every curator shares: ``owners``,
    ``phase``, ``active`` (the owners still taking part, in order), ``dropouts`` (the lost ones, with
    their report records), ``flagged`` (the ones excluded for a release that could not be used),
    ``present``, ``lost``, ``waiting_bye``, ``end_reason`` and the consumer's confirmation.

    **An honest end.** A run the curator ends as ``completed`` is completed only once the consumer
    has confirmed, with its ``bye``, that it received the results (they travel before the
    shutdown, on the same ordered link). A consumer lost before that, or a run that lost every owner
    before it could finish, ends ``failed``, and the curator's exit status says so.
    """

    role_name = "curator"
    protocol: str = ""
    Phase: ClassVar[type[StrEnum]] = CuratorPhase

    def __init__(self, *, scenario_name: str, owners: tuple[str, ...]) -> None:
        super().__init__()
        self.party_id = CURATOR
        self.scenario_name = scenario_name
        self.owners = owners
        self.phase: StrEnum = next(iter(self.Phase))
        self.active = ActiveOwners(owners)
        self.dropouts: dict[str, dict[str, Any]] = {}
        """Per owner the run went on without, its record for the report (phase, round, reason)."""
        self.flagged: dict[str, str] = {}
        """Per owner excluded for a release that could not be used, why."""
        self.present: set[str] = set()
        self.lost: set[str] = set()
        self.waiting_bye: set[str] = set()
        self.end_reason = ""
        self.closing_status: RunStatus | Literal[""] = ""
        self.owners_told = True
        self.late_byes: list[str] = []
        self.declined: set[str] = set()
        """The parties whose lifetime ledger declined the run (their decline precedes their hello)."""

    @property
    def closing_phase(self) -> StrEnum:
        """This curator's ``Phase.CLOSING`` (every ``Phase`` has that member, valued ``"closing"``)."""
        return self.Phase(CLOSING)

    def members(self) -> tuple[str, ...]:
        """The data-holding parties of the run (owners; pfds calls them sharers)."""
        return tuple(self.owners)

    def _member_set(self) -> frozenset[str]:
        """:meth:`members` as a set, built once: a hello is checked in O(1), not O(K) (K hellos
        would cost O(K^2))."""
        cached = self.__dict__.get("_members_cached")
        if cached is None:
            cached = self.__dict__["_members_cached"] = frozenset(self.members())
        return cached

    def expected_peers(self) -> tuple[str, ...]:
        if self.phase == self.closing_phase:
            return tuple(sorted(self.waiting_bye))
        return (*self.active, CONSUMER)

    # --- waiting, and what happens when a party does not deliver ---------------------------

    def awaited(self) -> dict[str, str]:
        if self.phase == self.closing_phase:
            return {p: "bye" for p in self.waiting_bye}
        out = {p: "hello" for p in (*self.active, CONSUMER) if p not in self.present}
        out.update(self._awaited_in_phase())
        return out

    def _awaited_in_phase(self) -> dict[str, str]:
        """What the protocol waits for besides hellos (subclasses)."""
        return {}

    def peer_lost(self, peer: str, reason: str = "") -> list[Send]:
        """A lost consumer fails the run; a lost owner becomes a dropout and the run goes on."""
        if self._lost_while_closing(peer, reason):
            return self._tell_owners() if peer == CONSUMER and not self.owners_told else []
        if peer == CONSUMER:
            return self._close(status="failed", reason="the consumer was lost" + (f" ({reason})" if reason else ""))
        return self.exclude(peer, reason or "lost")

    def exclude(self, peer: str, reason: str, *, declined: bool = False) -> list[Send]:
        """Take ``peer`` out of the run as a dropout, with ``reason`` in the report, and go on.
        ``declined``: the owner declined the run itself (its lifetime budget), it was not lost."""
        if peer not in self.active:
            return []
        self.active.remove(peer)
        record = self.dropouts[peer] = {**self._drop(peer), "reason": cut(reason, 300 if not declined else 1000)}
        if declined:
            record["declined"] = True
        where = f" in round {record['round']}" if "round" in record else ""
        if declined:  # the owner's own decision under its lifetime budget: expected, not a fault
            log.info("owner %s declined the run (%s): %s", peer, self.phase, cut(reason, 300))
        else:
            log.warning("owner %s dropped out%s (%s): %s", peer, where, self.phase, cut(reason, 300))
        return self._progress_after_loss(peer)

    def _drop(self, peer: str) -> dict[str, Any]:
        """Forget what ``peer`` had in flight; return its dropout record for the report."""
        return {"phase": str(self.phase)}

    def _progress_after_loss(self, peer: str) -> list[Send]:
        """The messages that let the run go on without ``peer``."""
        return []

    def on_error(self, message: Envelope) -> list[Send]:
        """A party refused one of the run's messages. An owner that cannot take a message of the
        protocol (another configuration, a broken build) will not take part: it becomes a dropout
        at once, instead of being waited for. A consumer that refuses its results fails the run."""
        super().on_error(message)
        body: Error = message.body
        sender = message.sender
        if body.about_kind == DECLINED:
            self.declined.add(sender)
        if body.about_kind == DECLINED and self.phase != self.closing_phase:
            if sender == CONSUMER:
                return self._close(status="failed", reason=f"the consumer {cut(body.detail, 1500)}")
            return self.exclude(sender, body.detail, declined=True)
        if body.about_kind in NOT_REFUSALS or self.phase == self.closing_phase:
            return []
        reason = f"refused the curator's {body.about_kind!r}: {cut(body.detail, 200)}"
        if sender == CONSUMER:
            return self._close(status="failed", reason=f"the consumer {reason}")
        return self.exclude(sender, reason)

    # --- admission ----------------------------------------------------------------------------

    def admit(self, message: Envelope, *, open_: bool = True) -> list[Send] | None:
        """Check a ``hello``: a party of this run, the right role, protocol, scenario and
        configuration fingerprint, once. Records the sender as present and returns None; for a party
        that declined the run before its hello, records it and returns no message; for a
        party of the run whose hello is wrong, returns the refusal (an ``error`` that ends that
        party) and takes it out of the run at once. Raises ProtocolError for a stranger or a repeat."""
        hello: Hello = message.body
        sender = message.sender
        expected_role = "consumer" if sender == CONSUMER else "owner" if sender in self._member_set() else None
        if expected_role is None:
            members = self.members()
            raise ProtocolError(
                party=sender,
                kind="hello",
                reason=f"not a party of this run (owners: {', '.join(members[:5])}"
                f"{', ...' if len(members) > 5 else ''}, consumer)",
            )
        if sender in self.declined and sender not in self.present:
            self.present.add(sender)  # its decline came first and took it out of the run already
            return []
        if not open_ or sender in self.present:
            raise ProtocolError(
                party=sender,
                kind="hello",
                reason="already said hello" if sender in self.present else "hellos are closed: the run has started",
            )
        problem = None
        if hello.role != expected_role or hello.protocol != self.protocol or hello.scenario != self.scenario_name:
            problem = (
                f"expected role {expected_role!r}, protocol {self.protocol!r}, scenario {self.scenario_name!r}; "
                f"got role {hello.role!r}, protocol {hello.protocol!r}, scenario {hello.scenario!r}"
            )
        elif self.config_fingerprint:
            problem = differences(self.config_fingerprint, hello.config)
        if problem is None:
            self.present.add(sender)
            return None
        refusal = Send(
            sender,
            Error(
                code="refused",
                detail=cut(f"refused at hello: {problem}", 2000),
                about_kind="hello",
                about_msg_id=message.msg_id,
            ),
            reply_to=message.msg_id,
        )
        log.warning("refused the hello of %s: %s", sender, problem)
        if sender == CONSUMER:
            return [refusal, *self._close(status="failed", reason=f"the consumer was refused at hello: {problem}")]
        return [refusal, *self.exclude(sender, f"refused at hello: {problem}")]

    # --- the end --------------------------------------------------------------------------------

    def _close(self, *, status: RunStatus, reason: str) -> list[Send]:
        """End the run: ``shutdown`` to every party not lost, then wait for their ``bye``. A
        ``completed`` run becomes final only with the consumer's bye (see the class doc): the
        consumer is shut down first, and the owners are told how the run ended once it has confirmed
        (or been lost), so every party's exit status tells the same story."""
        self.phase = self.closing_phase
        self.end_reason = reason
        self.closing_status = status
        if status == "failed":
            self.failure = reason
        elif CONSUMER in self.lost:
            self.failure = f"{reason}, but the consumer was lost before it could receive the results"
            status = self.closing_status = "failed"
        if status == "completed":
            self.owners_told = False
            self.waiting_bye = {CONSUMER}
            return [Send(CONSUMER, Shutdown(reason=reason, status=status))]
        self.owners_told = True
        targets = [p for p in (*self.members(), CONSUMER) if p not in self.lost]
        self.waiting_bye = set(targets)
        self.done = not self.waiting_bye
        return [self._shutdown(p, status, reason) for p in targets]

    def _tell_owners(self) -> list[Send]:
        """The consumer confirmed (or was lost): shut the owners down with the run's final status."""
        self.owners_told = True
        status: RunStatus = "failed" if self.failure else "completed"
        reason = self.failure or self.end_reason
        targets = [p for p in self.members() if p not in self.lost]
        self.waiting_bye |= set(targets)
        self.done = not self.waiting_bye
        return [self._shutdown(p, status, reason) for p in targets]

    def excluded_reason(self, party: str) -> str | None:
        """Why ``party`` was taken out of the run (a dropout, or flagged for a release that could
        not be used), or None if it took part to the end."""
        record = self.dropouts.get(party)
        if record is not None:
            where = f" in round {record['round']}" if "round" in record else ""
            return f"dropped from the run{where}: {record.get('reason') or 'lost'}"
        flagged = self.flagged.get(party)
        if flagged is not None:
            return f"flagged and excluded from the run: {flagged}"
        return None

    def _shutdown(self, party: str, status: RunStatus, reason: str) -> Send:
        """The ``shutdown`` that ends ``party``'s session. An owner the run went on without is told
        so, as ``failed`` with the reason it was excluded, whatever became of the others: its own
        report and exit status must not say it completed its part."""
        record = self.dropouts.get(party) or {}
        if record.get("declined"):
            return Send(
                party,
                Shutdown(reason=cut(f"this owner declined the run (the run: {status}, {reason})", 2000), status=status),
            )
        excluded = self.excluded_reason(party) if party != CONSUMER else None
        if excluded is not None:
            return Send(party, Shutdown(reason=cut(f"{excluded} (the run: {status}, {reason})", 2000), status="failed"))
        return Send(party, Shutdown(reason=reason, status=status))

    def _on_bye(self, message: Envelope) -> list[Send]:
        sender = message.sender
        if self.phase == self.closing_phase and sender in self.lost and sender not in self.waiting_bye:
            self.late_byes.append(sender)  # given up on while its bye was on the way: no harm done
            return []
        if self.phase != self.closing_phase or sender not in self.waiting_bye:
            raise ProtocolError(party=sender, kind="bye", reason="no shutdown was sent to this party")
        self.waiting_bye.discard(sender)
        if sender == CONSUMER and not self.owners_told:
            return self._tell_owners()
        self.done = not self.waiting_bye
        return []

    def _lost_while_closing(self, peer: str, reason: str = "") -> bool:
        """Record a lost peer; True when the run is already closing (then it is simply not waited for).
        Losing the consumer before its bye turns a completed run into a failed one."""
        self.lost.add(peer)
        if self.phase != self.closing_phase:
            return False
        if peer == CONSUMER and peer in self.waiting_bye and self.closing_status == "completed":
            self.failure = self.failure or (
                f"{self.end_reason}, but the consumer never confirmed it received the "
                f"results (lost while closing" + (f": {reason})" if reason else ")")
            )
        self.waiting_bye.discard(peer)
        self.done = not self.waiting_bye
        return True

    def no_owner_left(self, done: int, total: int) -> bool:
        """Whether losing every owner ends the run as failed: it did not finish (``done`` of ``total``)."""
        return not self.active and done < total
