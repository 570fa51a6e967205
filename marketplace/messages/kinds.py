"""Every message kind, declared once: its name, its fields, their types, dtypes and shapes.

A kind is a class of annotated fields registered with :func:`kind`, which makes it a frozen
msgspec Struct (:mod:`marketplace.messages.structs`). Array fields are
``Annotated[np.ndarray, Array, ArraySpec(...)]``; named dimensions (``"dim"``, ``"d"``) must agree
within a message, and receivers check them against their own configuration.

Summarize flow (non-private): every party says ``hello``; the consumer sends ``validation_set``;
the curator sends ``target_embedding`` to the owners, then each round ``round_open``; every owner
answers with a ``bid``; the curator sends ``request`` to the best bidder only, which answers with a
``point``. After the last round the consumer gets the ``summary``; everyone gets ``shutdown`` and
answers ``bye``.

Less-trusted curator: the consumer sends ``validation_embedding`` (h1 of each D_v row and its public
key) instead of ``validation_set``; ``target_embedding`` carries that key to the owners; a requested
owner answers with a ``sealed_point`` (the point's h1 embedding, and the point sealed for the
consumer); the consumer gets a ``sealed_summary``. The curator never holds a raw point. ``heartbeat`` keeps liveness both ways; ``error`` answers a message that could not
be accepted.
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


# --- summarize ------------------------------------------------------------------------------


@kind("validation_set")
class ValidationSet:
    """The consumer's D_v, features only (the labels stay with the consumer)."""

    X: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("m", "dim"))]


@kind("validation_embedding")
class ValidationEmbedding:
    """Less-trusted curator: h1 of each row of D_v (never the rows), and the consumer's public key."""

    phi: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("m", "d"))]
    consumer_key: PublicKey


@kind("target_embedding")
class TargetEmbedding:
    """g~: the mean h1-embedding of D_v, broadcast once to every owner; with a less-trusted curator
    also the consumer's public key, to which owners seal the points they send."""

    mean: vector("d")
    consumer_key: PublicKey | None = None


@kind("round_open")
class RoundOpen:
    """Round l: the mean h1-embedding g_l of the current summary, which holds q points."""

    round: RoundNo
    summary_mean: vector("d")
    q: Annotated[int, Range(min=0)]


@kind("bid")
class Bid:
    """An owner's best value (g~ - q/(q+1) g_l) . h1(x) over its unsent points, for one round."""

    round: RoundNo
    value: float
    available: bool


@kind("request")
class Request:
    """The curator asks an owner for the point behind its bid in this round."""

    round: RoundNo


@kind("point")
class Point:
    """An owner's point for a round: features, label and the owner's own row index."""

    round: RoundNo
    x: vector("dim")
    y: int
    row: Count


@kind("summary")
class Summary:
    """The finished summary D_s (seed set excluded), with the owners' labels, for the consumer."""

    X: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("p", "dim"))]
    y: Annotated[np.ndarray, Array, ArraySpec(("<i8",), ("p",))]
    rounds: Count


@kind("sealed_point")
class SealedPoint:
    """Less-trusted curator: the requested point's h1 embedding (checked against the bid) and the
    point itself sealed for the consumer (fixed length, unreadable by the curator)."""

    round: RoundNo
    phi: vector("d")
    row: Count
    sealed: SealedBytes


@kind("sealed_summary")
class SealedSummary:
    """Less-trusted curator: D_s as the embeddings the curator verified and the sealed points, in
    summary order; the consumer opens each and checks it against its embedding."""

    phi: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("p", "d"))]
    sealed: tuple[SealedBytes, ...]
    rounds: Count

