"""The wire's common message kinds, and the constrained types kinds share.

A kind is a frozen msgspec Struct deriving from :class:`~marketplace.messages.structs.Body` that
names its wire kind, ``class Hello(Body, kind="hello", frozen=True)``: declaring it registers it in
:data:`KINDS` (:mod:`marketplace.messages.structs`). Its fields' hints carry their constraints as
``Annotated`` metadata (:class:`~marketplace.schema.Range`, :class:`~marketplace.schema.Length`);
array fields are ``Annotated[np.ndarray, Array, ArraySpec(...)]``, and named dimensions (``"dim"``,
``"d"``) must agree within a message; receivers check them against their own configuration.

The kinds here are every protocol's: ``hello`` (a party announces itself), ``heartbeat`` (liveness,
both ways), ``error`` (the answer to a message that could not be accepted), ``shutdown`` and ``bye``
(the end of a run). Each protocol declares its own kinds in its package's ``messages.py``, loaded
with the protocol (:func:`marketplace.plugins.exchange`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from marketplace.messages.structs import KINDS as KINDS  # the registry of kinds by name, filled as they are declared
from marketplace.messages.structs import Body
from marketplace.schema import Length, Range

PartyName = Annotated[str, Length(min=1, max=64)]
PublicKey = Annotated[bytes, Length(min=32, max=32)]
SealedBytes = Annotated[bytes, Length(min=1, max=1 << 20)]
RoundNo = Annotated[int, Range(min=1)]
Count = Annotated[int, Range(min=0)]
Text = Annotated[str, Length(max=2000)]


# --- runtime --------------------------------------------------------------------------------


ConfigParts = Annotated[dict[str, Annotated[str, Length(max=200)]], Length(max=32)]


class Hello(Body, kind="hello", frozen=True):
    """A party announces itself to the curator; the curator checks role, protocol, scenario and
    ``config``: the party's fingerprint of the scenario parts every party must agree on (seed,
    owners, data, the protocol's settings; :mod:`marketplace.scenario.fingerprint`)."""

    role: Literal["owner", "consumer"]
    protocol: Annotated[str, Length(min=1, max=64)]
    scenario: Annotated[str, Length(max=200)]
    config: ConfigParts = {}


class Heartbeat(Body, kind="heartbeat", frozen=True):
    """Liveness, both ways; carries no protocol content and is counted apart."""


class Error(Body, kind="error", frozen=True):
    """The answer to a message that could not be accepted; the receiver keeps serving."""

    code: Literal["bad_message", "protocol", "refused"]
    detail: Text
    about_kind: Annotated[str, Length(max=64)] | None = None
    about_msg_id: int | None = None


class Shutdown(Body, kind="shutdown", frozen=True):
    """The curator ends the run for this party; the party answers ``bye`` and stops."""

    reason: Text
    status: Literal["completed", "failed"] = "completed"


class Bye(Body, kind="bye", frozen=True):
    """A party acknowledges ``shutdown``: nothing more will come from it."""


RuntimeMessage = Hello | Heartbeat | Error | Shutdown | Bye
"""The kinds every protocol's parties exchange besides their own (a union of their Structs, which the
decoder tells apart by the envelope's ``kind``)."""
