"""The wire's common message kinds, and :func:`kind`, which declares a kind: its name, its fields, their
types, dtypes and shapes.

A kind is a class of annotated fields registered with :func:`kind`, which makes it a frozen
msgspec Struct (:mod:`marketplace.messages.structs`). Array fields are
``Annotated[np.ndarray, Array, ArraySpec(...)]``; named dimensions (``"dim"``, ``"d"``) must agree
within a message, and receivers check them against their own configuration.

The kinds here are every protocol's: ``hello`` (a party announces itself), ``heartbeat`` (liveness,
both ways), ``error`` (the answer to a message that could not be accepted), ``shutdown`` and ``bye``
(the end of a run). Each protocol declares its own kinds in its package's ``messages.py``, loaded
with the protocol (:func:`marketplace.plugins.exchange`).
"""

from __future__ import annotations

import typing
from typing import Annotated, Literal

import numpy as np

from marketplace.messages.arrays import Array, ArraySpec
from marketplace.messages.structs import make_body
from marketplace.schema import Length, Range

KINDS: dict[str, type] = {}

PartyName = Annotated[str, Length(min=1, max=64)]
PublicKey = Annotated[bytes, Length(min=32, max=32)]
SealedBytes = Annotated[bytes, Length(min=1, max=1 << 20)]
RoundNo = Annotated[int, Range(min=1)]
Count = Annotated[int, Range(min=0)]
Text = Annotated[str, Length(max=2000)]


def kind(name: str) -> typing.Callable[[type], type]:
    """Register the declared fields of a class as the body of the wire kind ``name`` (one declaration
    per kind); the class becomes a frozen msgspec Struct of those fields (see
    :func:`marketplace.messages.structs.make_body`), built by keyword as before."""

    def register(spec: type) -> type:
        if name in KINDS:
            raise RuntimeError(f"message kind {name!r} declared twice")
        cls = make_body(spec, name)
        KINDS[name] = cls
        return cls

    return register


def vector(name: str) -> object:
    return Annotated[np.ndarray, Array, ArraySpec(("<f8",), (name,))]


# --- runtime --------------------------------------------------------------------------------


ConfigParts = Annotated[dict[str, Annotated[str, Length(max=200)]], Length(max=32)]


@kind("hello")
class Hello:
    """A party announces itself to the curator; the curator checks role, protocol, scenario and
    ``config``: the party's fingerprint of the scenario parts every party must agree on (seed,
    owners, data, the protocol's settings; :mod:`marketplace.scenario.fingerprint`)."""

    role: Literal["owner", "consumer"]
    protocol: Annotated[str, Length(min=1, max=64)]
    scenario: Annotated[str, Length(max=200)]
    config: ConfigParts = {}


@kind("heartbeat")
class Heartbeat:
    """Liveness, both ways; carries no protocol content and is counted apart."""


@kind("error")
class Error:
    """The answer to a message that could not be accepted; the receiver keeps serving."""

    code: Literal["bad_message", "protocol", "refused"]
    detail: Text
    about_kind: Annotated[str, Length(max=64)] | None = None
    about_msg_id: int | None = None


@kind("shutdown")
class Shutdown:
    """The curator ends the run for this party; the party answers ``bye`` and stops."""

    reason: Text
    status: Literal["completed", "failed"] = "completed"


@kind("bye")
class Bye:
    """A party acknowledges ``shutdown``: nothing more will come from it."""


RuntimeMessage = Hello | Heartbeat | Error | Shutdown | Bye
"""The kinds every protocol's parties exchange besides their own (a union of their Structs, which the
decoder tells apart by the envelope's ``kind``)."""
