"""The control plane of a marketplace that stays open: what the server, its owner agents and
requesting consumers say to each other outside a session's run.

Every frame is one msgpack message of the tagged union :data:`Message`, decoded with a size bound
and a schema (msgspec), so a malformed or oversized frame is refused without being trusted. The
sender's identity is never in the message: the server takes it from the CURVE key the connection
authenticated with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import msgspec

MAX_FRAME = (64 << 20) + (64 << 10)
"""The largest control frame read: a session's report travels in one, and a session's protocol
frame (at most the transport's ``max_message_bytes``, 64 MiB by default) inside one."""
Text = Annotated[str, msgspec.Meta(max_length=2000)]
Yaml = Annotated[str, msgspec.Meta(min_length=1, max_length=1 << 20)]
SessionId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
Z85Key = Annotated[str, msgspec.Meta(min_length=40, max_length=40)]


class ControlError(ValueError):
    """A control frame that could not be read (too large, not msgpack, not a known message)."""


class _Message(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="kind"):
    pass


class Ping(_Message, tag="ping", frozen=True):
    """An owner agent's "still here", every few seconds."""


class OwnerJoin(_Message, tag="owner_join", frozen=True):
    """An owner's connection announces itself (the server checks the claim against its key)."""

    party: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]


class SessionOpen(_Message, tag="session_open", frozen=True):
    """A consumer asks for a session: its request, a scenario (protocol, settings, its target), and
    whether its report should hold the central references of a simulated marketplace (computed by
    the server on everyone's rows; without them by default, unless the marketplace serves them to all)."""

    scenario: Yaml
    references: bool = False


class SessionResume(_Message, tag="session_resume", frozen=True):
    """A consumer asks again for what one of its sessions released to it (after a lost connection or
    a close that timed out): the server answers as it did for the session itself (:class:`SessionReady`,
    the curator's frames to the consumer, :class:`SessionReport`), from what it kept; a session that is
    still ending is answered once it has ended."""

    session: SessionId


class SessionQueued(_Message, tag="session_queued", frozen=True):
    session: SessionId
    position: int


class SessionRefused(_Message, tag="session_refused", frozen=True):
    """The request will not run (bad scenario, the marketplace is stopping, ...); nothing was charged."""

    reason: Text
    session: str = ""


class SessionInvite(_Message, tag="session_invite", frozen=True):
    """The server to each invited owner's connection: a session starts, with this run id and
    scenario. The session's frames then travel on the same connection (:class:`SessionFrame`)."""

    session: SessionId
    scenario: Yaml


class SessionReady(_Message, tag="session_ready", frozen=True):
    """The server to the consumer that asked: its session starts (run id, scenario); its frames
    travel on the consumer's own connection."""

    session: SessionId
    scenario: Yaml


class SessionFrame(_Message, tag="session_frame", frozen=True):
    """One protocol frame of a running session, on a shared connection. Who sent it is the key of
    the connection it came on; the server passes it only between that session's parties."""

    session: SessionId
    frame: bytes


class SessionDeclined(_Message, tag="session_declined", frozen=True):
    """An owner's agent to the server: this owner cannot take part in the session (its node could
    not be built: a broken ledger, a file that no longer reads); the session goes on without it."""

    session: SessionId
    reason: Text


class PartyReport(_Message, tag="party_report", frozen=True):
    """A party's own report of a session (JSON text), sent back to the server for the run report."""

    session: SessionId
    party: Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
    report: bytes


class SessionReport(_Message, tag="session_report", frozen=True):
    """The session's run report (JSON text), to the consumer that asked for it, and to nobody else;
    ``parties`` (JSON text: the parties' reports as the server received them, why any is missing, the
    session's failure) lets the consumer assemble its own copy with what it kept to itself."""

    session: SessionId
    status: Literal["completed", "failed"]
    report: bytes
    parties: bytes = b""


MAX_HELD = 4096
"""The most sessions one :class:`OwnerSessions` names."""


class OwnerSessions(_Message, tag="owner_sessions", frozen=True):
    """The server to an owner's connection, every second: the sessions it still holds the owner in
    (running or collecting its report, the owner neither lost nor gone). The owner's agent ends its part
    of any other session it is in (:mod:`marketplace.service.held`)."""

    sessions: Annotated[list[SessionId], msgspec.Meta(max_length=MAX_HELD)]


MAX_ANSWER = 1 << 20
"""The largest catalogue or quote (JSON text) a consumer reads."""
Price = Annotated[float, msgspec.Meta(ge=0.0, le=1e12)]
Points = Annotated[int, msgspec.Meta(ge=0, le=10**12)]


class OwnerTerms(_Message, tag="owner_terms", frozen=True):
    """An owner's agent to the server, with its join and every ping: the fields of the owner's sale
    terms its agent sets itself (``--price``, ``--points``, ``--points-per-consumer``; None: the
    marketplace's), posted for the catalogue (:mod:`.catalogue`). The owner's ledger applies them."""

    price: Price | None = None
    points: Points | None = None
    points_per_consumer: Points | None = None
    price_per_eps: Price | None = None


def owner_terms_message(given: Mapping[str, Any]) -> OwnerTerms:
    """The :class:`OwnerTerms` an agent posts for the fields ``given`` of its owners' terms
    (:meth:`~.options.AgentOptions.terms`); a field this message does not carry is left out."""
    return OwnerTerms(**{name: value for name, value in given.items() if name in OwnerTerms.__struct_fields__})


class CatalogueAsk(_Message, tag="catalogue_ask", frozen=True):
    """A consumer asks what the marketplace sells (:mod:`.catalogue`); nothing is queued or charged."""


class QuoteAsk(_Message, tag="quote_ask", frozen=True):
    """A consumer asks what a request would cost before sending it (:mod:`.quote`); nothing is
    queued, reserved, charged or recorded."""

    scenario: Yaml


class Catalogue(_Message, tag="catalogue", frozen=True):
    """The server's answer to :class:`CatalogueAsk`: the catalogue as JSON text."""

    catalogue: Annotated[bytes, msgspec.Meta(max_length=MAX_ANSWER)]


class Quote(_Message, tag="quote", frozen=True):
    """The server's answer to :class:`QuoteAsk`: the quote as JSON text (a request that cannot run
    here is answered with :class:`SessionRefused` instead)."""

    quote: Annotated[bytes, msgspec.Meta(max_length=MAX_ANSWER)]


class Stop(_Message, tag="stop", frozen=True):
    """The server is stopping: an agent leaves once its current session is over."""

    reason: Text


Message = (
    Ping
    | OwnerJoin
    | SessionOpen
    | SessionResume
    | SessionQueued
    | SessionRefused
    | SessionInvite
    | SessionReady
    | SessionFrame
    | SessionDeclined
    | PartyReport
    | SessionReport
    | OwnerSessions
    | OwnerTerms
    | CatalogueAsk
    | QuoteAsk
    | Catalogue
    | Quote
    | Stop
)

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


HEARTBEAT_IVL_MS, HEARTBEAT_TIMEOUT_MS = 1000, 5000
"""ZeroMQ heartbeats on every control connection: a stopped or dead peer's connection closes within
about five seconds, while a busy one (its I/O thread answers) keeps it."""


def socket_options(sock: Any) -> None:
    """Every control connection's options (a ZeroMQ socket's): no linger on error paths, the frame
    cap, ZeroMQ heartbeats."""
    import zmq

    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME)
    sock.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
    sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)


def encode(message: _Message) -> bytes:
    """One control frame."""
    return _encoder.encode(message)


def decode(frame: bytes) -> _Message:
    """A control frame's message; :class:`ControlError` (naming what was wrong) if it is not one."""
    if len(frame) > MAX_FRAME:
        raise ControlError(f"a control frame of {len(frame)} bytes, over the limit of {MAX_FRAME}")
    try:
        return _decoder.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise ControlError(f"not a control message: {err}") from None
