"""msgpack codec: envelope + body to one frame, and back with full validation.

Decoding never trusts the frame: its size is capped before parsing, msgpack's own length limits are
set, the envelope and the body are checked field by field, and anything wrong raises
:class:`MessageError` naming the party, the kind, the field, what was expected and what came.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any

import msgpack
import numpy as np

from marketplace.messages.arrays import ArraySpec, encode_array
from marketplace.messages.envelope import ENVELOPE_KEYS, PROTOCOL_VERSION, Envelope
from marketplace.messages.errors import MessageError
from marketplace.messages.kinds import KINDS
from marketplace.messages.limits import MAX_DEPTH, MAX_TOKENS, SCAN_ABOVE, check_structure
from marketplace.schema import SchemaError, build, describe_value

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
INT64_RANGE = (-(2**63), 2**63 - 1)
"""Every integer in a body fits a signed 64-bit integer (what roles store them in, e.g. numpy int64),
except a reference to a message id, which keeps the envelope's own range (msgpack's uint64)."""
MESSAGE_ID_FIELDS = frozenset({"about_msg_id"})


def body_to_wire(body: Any) -> dict[str, Any]:
    """A body dataclass as a plain msgpack-ready map (arrays as dtype/shape/bytes maps)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(body):
        value = getattr(body, f.name)
        if isinstance(value, np.ndarray):
            value = encode_array(value)
        elif isinstance(value, np.generic):
            value = value.item()
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def encode(envelope: Envelope) -> bytes:
    """One frame for ``envelope``; a plain ``msgpack.unpackb`` reads it back as a map."""
    body = envelope.body
    if getattr(type(body), "KIND", None) != envelope.kind:
        raise TypeError(f"body of type {type(body).__name__} does not match kind {envelope.kind!r}")
    wire = {
        "version": envelope.version,
        "run_id": envelope.run_id,
        "msg_id": envelope.msg_id,
        "sender": envelope.sender,
        "receiver": envelope.receiver,
        "kind": envelope.kind,
        "reply_to": envelope.reply_to,
        "body": body_to_wire(body),
    }
    return msgpack.packb(wire, use_bin_type=True)


@functools.cache
def _array_fields(cls: type) -> tuple[tuple[str, ArraySpec], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for name, hint in hints.items():
        for meta in getattr(hint, "__metadata__", ()):
            if isinstance(meta, ArraySpec):
                out.append((name, meta))
    return tuple(out)


def _envelope_field(wire: dict[str, Any], key: str, types: tuple[type, ...], expected: str, party: str, kind: str | None) -> Any:
    value = wire.get(key)
    if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
        raise MessageError(party=party, kind=kind, field=key, expected=expected, got=describe_value(value))
    return value


def decode(frame: bytes, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, peer: str | None = None) -> Envelope:
    """Parse and validate one frame. ``peer`` is the transport-level identity of the sender, if known:
    a frame whose envelope claims another sender is refused."""
    party = peer or "unknown party"
    if len(frame) > max_bytes:
        raise MessageError(party=party, kind=None, field="<frame>", expected=f"at most {max_bytes} bytes", got=f"{len(frame)} bytes")
    if len(frame) > SCAN_ABOVE:  # a large frame's structure is checked before anything is built from it
        problem = check_structure(frame)
        if problem is not None:
            raise MessageError(party=party, kind=None, field="<frame>",
                               expected=f"one msgpack map of at most {MAX_TOKENS} objects, nested at most {MAX_DEPTH} deep",
                               got=problem)
    try:
        wire = msgpack.unpackb(
            frame, raw=False, strict_map_key=True, use_list=True,
            max_bin_len=max_bytes, max_str_len=max_bytes, max_array_len=1 << 20, max_map_len=1 << 16,
        )
    except Exception as err:  # msgpack raises several unrelated types for garbage
        raise MessageError(party=party, kind=None, field="<frame>", expected="one msgpack map", got=f"undecodable bytes ({type(err).__name__}{': ' + str(err) if str(err) else ''})") from None
    if not isinstance(wire, dict):
        raise MessageError(party=party, kind=None, field="<frame>", expected="a msgpack map (the envelope)", got=describe_value(wire))
    try:
        return _validate(wire, party, peer, max_bytes)
    except MessageError as err:
        readable_id = wire.get("msg_id")
        if isinstance(readable_id, int) and not isinstance(readable_id, bool) and 0 < readable_id < 2**63:
            err.msg_id = readable_id
        raise


def _validate(wire: dict[Any, Any], party: str, peer: str | None, max_bytes: int) -> Envelope:
    """Check a parsed envelope map field by field (see :func:`decode`)."""
    raw_kind = wire.get("kind")
    kind = raw_kind if isinstance(raw_kind, str) and raw_kind in KINDS else None  # never echo junk
    if isinstance(wire.get("sender"), str) and wire["sender"] and peer is None:  # never an empty name
        party = wire["sender"][:64]
    unknown = sorted(str(k) for k in wire if k not in ENVELOPE_KEYS)
    if unknown:
        raise MessageError(party=party, kind=kind, field=unknown[0][:64], expected=f"only the envelope keys {list(ENVELOPE_KEYS)}",
                           got=f"unknown key {describe_value(unknown[0])}")
    missing = [k for k in ENVELOPE_KEYS if k not in wire]
    if missing:
        raise MessageError(party=party, kind=kind, field=missing[0], expected=f"all the envelope keys {list(ENVELOPE_KEYS)}", got="nothing")
    version = _envelope_field(wire, "version", (int,), "an integer protocol version", party, kind)
    if version != PROTOCOL_VERSION:
        raise MessageError(party=party, kind=kind, field="version", expected=f"protocol version {PROTOCOL_VERSION}", got=repr(version))
    if kind is None:
        raise MessageError(party=party, kind=None, field="kind", expected="one of the known kinds (" + ", ".join(sorted(KINDS)) + ")", got=describe_value(raw_kind))
    run_id = _envelope_field(wire, "run_id", (str,), "a run id (string)", party, kind)
    msg_id = _envelope_field(wire, "msg_id", (int,), "a positive integer message id", party, kind)
    if msg_id < 1:
        raise MessageError(party=party, kind=kind, field="msg_id", expected="a positive integer message id", got=repr(msg_id))
    sender = _envelope_field(wire, "sender", (str,), "the sender's party id", party, kind)
    if peer is not None and sender != peer:
        raise MessageError(party=party, kind=kind, field="sender", expected=f"the connection's own identity {peer!r}", got=repr(sender))
    receiver = _envelope_field(wire, "receiver", (str,), "the receiver's party id", party, kind)
    reply_to = wire.get("reply_to")
    if reply_to is not None and (not isinstance(reply_to, int) or isinstance(reply_to, bool)):
        raise MessageError(party=party, kind=kind, field="reply_to", expected="null or an integer message id", got=describe_value(reply_to))
    cls = KINDS[kind]
    try:
        body = build(cls, wire.get("body"), "body")
        sizes: dict[str, tuple[int, str]] = {}
        for name, spec in _array_fields(cls):
            spec.bind(getattr(body, name), f"body.{name}", sizes)
        _check_int64({f.name: getattr(body, f.name) for f in dataclasses.fields(body)}, "body")
    except SchemaError as err:
        raise MessageError(party=party, kind=kind, field=err.path, expected=err.expected, got=err.got) from None
    return Envelope(version, run_id, msg_id, sender, receiver, kind, reply_to, body)


def _check_int64(value: Any, path: str) -> None:
    """Refuse an integer outside int64 anywhere in a built body (msgpack also carries uint64: a point's
    label of 2**63 would pass ``int`` and only fail later, when a role packs it into an int64 array)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if not INT64_RANGE[0] <= value <= INT64_RANGE[1] and path.rpartition(".")[2] not in MESSAGE_ID_FIELDS:
            raise SchemaError(path, "an integer that fits in 64 signed bits", describe_value(value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_int64(item, f"{path}.{key}")
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            _check_int64(item, f"{path}[{i}]")
