"""The envelope every message travels in."""

from __future__ import annotations

from typing import Any

import msgspec

PROTOCOL_VERSION = 2
ENVELOPE_KEYS = ("version", "run_id", "msg_id", "sender", "receiver", "kind", "reply_to", "body")


class Envelope(msgspec.Struct, frozen=True):
    """Who sent what to whom: version, run id, the sender's message number, kind, reply-to, body.

    ``msg_id`` counts up from 1 per sender, so a receiver can spot replays and duplicates;
    ``reply_to`` names the ``msg_id`` this message answers, if any. A frozen msgspec Struct: built
    positionally or by keyword, and encoded as the map of these keys in this order.
    """

    version: int
    run_id: str
    msg_id: int
    sender: str
    receiver: str
    kind: str
    reply_to: int | None
    body: Any
