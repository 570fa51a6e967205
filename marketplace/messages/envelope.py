"""The envelope every message travels in."""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

from marketplace.messages.structs import Body

PROTOCOL_VERSION = 2
ENVELOPE_KEYS = ("version", "run_id", "msg_id", "sender", "receiver", "kind", "reply_to", "body")


BodyT = TypeVar("BodyT", bound=Body | None)  # noqa: UP007 - a TypeVar bound is evaluated at import
"""The body's type: a protocol's union of kinds (``Envelope[StcMessage | RuntimeMessage]``), or one kind."""


class Envelope(msgspec.Struct, Generic[BodyT], frozen=True):
    """Who sent what to whom: version, run id, the sender's message number, kind, reply-to, body.

    ``msg_id`` counts up from 1 per sender, so a receiver can spot replays and duplicates;
    ``reply_to`` names the ``msg_id`` this message answers, if any. A frozen msgspec Struct: built
    positionally or by keyword, and encoded as the map of these keys in this order. Generic in its
    body: a role declares the kinds it takes (``Envelope[CountRequest | Shutdown]``) and ``match``es on
    their classes, since the decoder gives every body the Struct of its ``kind``.
    """

    version: int
    run_id: str
    msg_id: int
    sender: str
    receiver: str
    kind: str
    reply_to: int | None
    body: BodyT
    """The typed Struct of ``kind`` (a subclass of :class:`Body`; roles ``match`` on its class); None only in
    an envelope framed around an already encoded body (:func:`marketplace.messages.codec.encode_framed`)."""
