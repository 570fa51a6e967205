"""What every role is: a sans-I/O state machine that takes a message and returns messages.

A role never touches a socket, a clock or a file. A driver (ZeroMQ across processes, or an
in-process queue) feeds it envelopes and sends what it returns, so the same role, seed and inputs
give the same messages whichever driver moved them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from marketplace.messages import Envelope
from marketplace.messages.kinds import Bye, Hello
from marketplace.roles.identity import NO_TRAFFIC, Identity, Traffic

if TYPE_CHECKING:
    from marketplace.privacy.accountant import PrivacyLedger
    from marketplace.roles.cohort import Cohort

CURATOR = "curator"
CONSUMER = "consumer"
PeerRole = Literal["owner", "consumer"]
"""The role a party other than the curator announces in its ``hello``."""
RoleName = Literal["curator", "owner", "consumer"]
"""A role's :attr:`Role.role_name`."""
MAX_ERRORS_KEPT = 100
"""Error messages a role keeps from its peers; past that only ``errors_received_dropped`` grows."""


def owner_id(index: int) -> str:
    """The party id of owner ``index`` (0-based): ``owner-1`` ... ``owner-K``."""
    return f"owner-{index + 1}"


@dataclass(frozen=True)
class Send:
    """An outgoing message: receiver, body (a registered kind) and the msg_id it answers."""

    to: str
    body: Any
    reply_to: int | None = None


class Role(ABC):
    """Base of the curator, owner and consumer state machines.

    Subclasses set ``party_id`` and implement ``start`` and ``handle``. ``done`` turns true when the
    party has nothing more to do; ``failure`` holds a reason when it ended badly.
    """

    party_id: str
    role_name: RoleName
    scenario_name: str = ""
    warm_imports: tuple[str, ...] = ()
    """Modules this role imports only near its end; a party process loads them in the background
    during the rounds, and the role waits for that before importing them (:mod:`marketplace.warm_imports`)."""
    traffic: Traffic = NO_TRAFFIC
    """What this party has sent so far (:class:`~marketplace.roles.identity.Traffic`), read-only: its
    :class:`~marketplace.roles.party.Party` counts and hands it over (:meth:`join`); a role that records
    it (a curator's per-round history) reads it here."""
    cohort: ClassVar[type[Cohort] | None] = None
    """Builds the :class:`~marketplace.roles.cohort.Cohort` of this class's roles in one process
    (they prepare a broadcast together, :mod:`marketplace.roles.cohort`); None: each role alone."""
    _identity: Identity | None = None
    points_sold: int | None = None
    """Points of the party's own data it handed over in this run (a protocol that sells points, as
    ``summarize`` does): what its lifetime ledger records as sold. None: it sells none."""

    def __init__(self) -> None:
        self.done = False
        self.failure: str | None = None
        self.errors_received: list[dict[str, Any]] = []
        self.errors_received_dropped = 0

    @property
    def identity(self) -> Identity:
        """Who this party is (:class:`~marketplace.roles.identity.Identity`): the one it was given
        when built (:meth:`join`), else its id, role and scenario alone."""
        if self._identity is None:
            return Identity(self.party_id, self.role_name, self.scenario_name)
        return self._identity

    @property
    def config_fingerprint(self) -> dict[str, str]:
        """What this party's scenario says about the parts every party must agree on: sent in
        ``hello`` and checked by the curator (empty: nothing to check)."""
        return dict(self.identity.config_fingerprint)

    def join(self, identity: Identity | None = None, *, traffic: Traffic | None = None) -> None:
        """Take the ``identity`` this role was built with (:func:`marketplace.parties.build_role`) and
        the read-only ``traffic`` of the :class:`~marketplace.roles.party.Party` that runs it: the two
        things a role is handed rather than computing (a party that runs it again hands a fresh count)."""
        if identity is not None:
            self._identity = identity
        if traffic is not None:
            self.traffic = traffic

    def hello(self, protocol: str) -> Send:
        """This party's ``hello`` to the curator: its role, protocol, scenario and configuration fingerprint."""
        role = self.role_name
        if role == "curator":
            raise TypeError("the curator sends no hello: it is the party the others greet")
        return Send(
            CURATOR,
            Hello(
                role=role,
                protocol=protocol,
                scenario=self.scenario_name,
                config=dict(self.config_fingerprint),
            ),
        )

    @abstractmethod
    def start(self) -> list[Send]:
        """Messages to send as soon as the party is connected."""

    @abstractmethod
    def handle(self, message: Envelope) -> list[Send]:
        """React to one validated message (never ``heartbeat``: drivers keep liveness)."""

    def expected_peers(self) -> tuple[str, ...]:
        """Parties this role must hear from; a driver declares them lost when their connection closes (a
        party computing for long stays connected: see :mod:`marketplace.transport.zmq_driver`)."""
        return (CURATOR,)

    def peer_lost(self, peer: str, reason: str = "") -> list[Send]:
        """A peer stopped answering (crash, hang, never connected, no progress: ``reason``).
        Default: fail and stop."""
        self.fail(f"lost contact with {peer}" + (f" ({reason})" if reason else ""))
        return []

    def awaited(self) -> dict[str, str]:
        """Peer -> what this role is waiting for from it right now ("bid for round 3"). A driver
        drops a peer that stays connected but does not deliver within ``progress_timeout_s``."""
        return {}

    def progress_scale(self, peer: str) -> float:
        """How many reference steps of work what this role awaits from ``peer`` amounts to, as the
        scenario declares it (never as the peer claims it): the driver gives ``peer``
        ``progress_timeout_s`` times this, at most ``run_timeout_s``
        (:mod:`marketplace.transport.deadlines`). Asked once, when the wait starts. Default: 1."""
        return 1.0

    def on_error(self, message: Envelope) -> list[Send]:
        """Another party refused one of our messages: remember it for the report. A refused
        ``hello`` ends this party (wrong scenario, role or identity): it would never be admitted, and
        by exiting it lets the curator see it as lost instead of waiting for it. Only the curator can
        refuse a hello: an ``error`` about a hello from anyone else changes nothing."""
        body = message.body
        if len(self.errors_received) < MAX_ERRORS_KEPT:
            self.errors_received.append({"from": message.sender, "code": body.code, "detail": body.detail})
        else:
            self.errors_received_dropped += 1
        if body.about_kind == "hello" and message.sender == CURATOR and self.party_id != CURATOR:
            self.fail(f"{message.sender} refused our hello: {body.detail}")
        return []

    def acknowledge_shutdown(self, message: Envelope) -> list[Send]:
        """The curator ended the run: remember how, stop, and answer ``bye``. A run the curator
        ended as failed, or ended as failed for this party (an owner it excluded: the reason says
        why), is failed for this party too (its exit status says so)."""
        body = message.body
        self.end_status = body.status
        if body.status == "failed" and self.failure is None:
            self.failure = f"the curator ended the run as failed for this party: {body.reason}"
        self.done = True
        return [Send(message.sender, Bye(), reply_to=message.msg_id)]

    def awaits_from(self, peer: str) -> bool:
        """Whether the protocol is waiting for a message from ``peer`` right now (a point, a
        release): what :meth:`frame_refused` acts on. Default: no."""
        return False

    def frame_refused(self, peer: str, about_kind: str | None, detail: str = "") -> list[Send]:
        """A frame from ``peer`` (of kind ``about_kind``, if it could be read) failed validation and
        never reached :meth:`handle`. Default: nothing (the sender got an ``error``). A role that is
        waiting for that frame decides whether the peer should still be waited for."""
        return []

    def reserved(self, points: int | None) -> None:
        """The party's lifetime ledger reserved this run before it started
        (:func:`marketplace.roles.lifetime.start_party`): ``points`` is how many of its own points the
        run may hand over under its sale terms (None: the protocol sells none). Default: nothing."""

    def ledgers(self) -> tuple[PrivacyLedger, ...]:
        """The privacy ledgers this role keeps (each records what it releases from one account): the
        party marks each with where its noise comes from, and the report reads them. Default: none."""
        return ()

    def progress(self) -> int:
        """How far the run has come as this role sees it, in the units its exchange's ``progress``
        counts (rounds done, owners' releases received): a curator's answer drives the in-process
        driver's progress bar. Default: 0."""
        return 0

    def finish(self) -> None:
        """Local work once the party is done and its last messages (its ``bye``) are sent: nothing
        more will be received. A pfds agent fits its model here, so a long fit on a busy machine is
        never mistaken by the curator for a hang. Default: nothing."""

    def fail(self, reason: str) -> None:
        self.failure = self.failure or reason
        self.done = True

    def result(self) -> dict[str, Any]:
        """What this party contributes to the run report."""
        return {}
