"""The wire contract: envelope, message kinds, msgpack codec and its one error type."""

from marketplace.messages.codec import (
    DEFAULT_MAX_MESSAGE_BYTES,
    body_to_wire,
    decode,
    decode_sharing,
    encode,
    encode_body,
    encode_framed,
)
from marketplace.messages.envelope import PROTOCOL_VERSION, Envelope
from marketplace.messages.errors import MessageError, ProtocolError
from marketplace.messages.kinds import KINDS

__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "KINDS",
    "PROTOCOL_VERSION",
    "Envelope",
    "MessageError",
    "ProtocolError",
    "body_to_wire",
    "decode",
    "decode_sharing",
    "encode",
    "encode_body",
    "encode_framed",
]
