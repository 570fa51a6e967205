"""msgpack codec: envelope + body to one frame, and back with full validation.

Decoding never trusts the frame: its size is capped before parsing, a large frame's structure is
scanned before anything is built from it (:mod:`marketplace.messages.limits`), and the envelope and
the body are checked field by field. Anything wrong raises :class:`MessageError` naming the party,
the kind, the field, what was expected and what came.

Two validators hold the same rules, both made from each kind's one declaration, its Struct
(:mod:`marketplace.messages.structs`):

* the **fast path**: msgspec decodes the frame straight into the kind's Struct, dispatching on the
  envelope's ``kind`` (a tagged union), checking types, bounds, lengths, literals, finite floats and
  int64 ranges in C; arrays are built by a hook and checked against their field's spec;
* the **precise path**: plain msgpack and :func:`marketplace.messages.structs.build_body`, field by
  field, with :mod:`marketplace.schema`'s checks. It runs
  only when the fast path refuses a frame, and it is what names the field, the expectation and the
  value in the error. Because the fast path accepts nothing the precise path would refuse, every
  frame gets the same verdict either way; only the time differs.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

import msgpack
import msgspec
import numpy as np

from marketplace.messages.arrays import Array, encode_array
from marketplace.messages.envelope import ENVELOPE_KEYS, PROTOCOL_VERSION, Envelope
from marketplace.messages.errors import MessageError
from marketplace.messages.kinds import KINDS
from marketplace.messages.limits import MAX_ARRAY_LEN, MAX_DEPTH, MAX_MAP_LEN, MAX_TOKENS, SCAN_ABOVE, check_structure
from marketplace.messages.structs import MESSAGE_ID_FIELDS, build_body
from marketplace.schema import SchemaError, describe_value

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024
INT64_RANGE = (-(2**63), 2**63 - 1)
"""Every integer in a body fits a signed 64-bit integer (what roles store them in, e.g. numpy int64),
except a reference to a message id, which keeps the envelope's own range (msgpack's uint64)."""


def _wire_value(value: Any) -> Any:
    """msgspec's hook for the values it does not encode itself: numpy arrays and scalars."""
    if isinstance(value, np.ndarray):
        return encode_array(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"a value of type {type(value).__name__} cannot travel in a message")


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_wire_value)


def body_to_wire(body: Any) -> dict[str, Any]:
    """A body as a plain msgpack-ready map (arrays as dtype/shape/bytes maps)."""
    return msgpack.unpackb(_ENCODER.encode(body), raw=False)


def encode(envelope: Envelope) -> bytes:
    """One frame for ``envelope``; a plain ``msgpack.unpackb`` reads it back as a map."""
    if getattr(type(envelope.body), "KIND", None) != envelope.kind:
        raise TypeError(f"body of type {type(envelope.body).__name__} does not match kind {envelope.kind!r}")
    return _ENCODER.encode(envelope)


def encode_body(body: Any) -> bytes:
    """The encoded body alone, to be framed for many receivers by :func:`encode_framed`."""
    if getattr(type(body), "KIND", None) is None:
        raise TypeError(f"{type(body).__name__} is not a message body")
    return _ENCODER.encode(body)


def encode_framed(envelope: Envelope, body: bytes) -> bytes:
    """The frame of ``envelope`` (whose ``body`` is None) with the already encoded ``body``: the
    same bytes :func:`encode` gives for the envelope holding that body, since the body is the
    envelope's last field. A broadcast encodes its body once, not once per receiver."""
    if envelope.body is not None:
        raise TypeError("encode_framed: the envelope's body must be None (the encoded body is passed apart)")
    head = _ENCODER.encode(envelope)
    return head[:-1] + body  # drop the nil that stood for the body


def _check_arrays(body: Any) -> None:
    """Each array field of ``body`` against its spec (dtype, rank, fixed sizes, finite), and named
    dimensions agreeing across the fields; raises SchemaError."""
    sizes: dict[str, tuple[int, str]] = {}
    for name, path, spec in body.ARRAYS:
        value = getattr(body, name)
        spec.check(value, path)
        spec.bind(value, path, sizes)


# --- the fast path ---------------------------------------------------------------------------------


def _array_from_wire(type_: type, value: Any) -> Any:
    """msgspec's hook for array fields: the wire map checked and viewed as an array (SchemaError,
    a ValueError, becomes msgspec's ValidationError)."""
    if type_ is np.ndarray:
        return Array.__schema_build__(value, "")
    raise TypeError(f"no wire form for {type_!r}")


def _frame_decoder() -> msgspec.msgpack.Decoder:
    """One typed decoder for every frame: a union of one envelope Struct per kind, told apart by
    the envelope's ``kind``."""
    frames = tuple(
        msgspec.defstruct(
            f"{cls.__name__}Frame",
            [
                ("version", Literal[PROTOCOL_VERSION]),
                ("run_id", str),
                ("msg_id", Annotated[int, msgspec.Meta(ge=1)]),
                ("sender", str),
                ("receiver", str),
                ("reply_to", int | None),
                ("body", cls),
            ],
            tag_field="kind",
            tag=name,
            forbid_unknown_fields=True,
            frozen=True,
            gc=False,
            module=__name__,
        )  # gc=False: a frame Struct lives for one call and holds no container that could form a cycle
        for name, cls in KINDS.items()
    )
    return msgspec.msgpack.Decoder(Union[frames], dec_hook=_array_from_wire)  # noqa: UP007


_DECODER: tuple[int, msgspec.msgpack.Decoder] | None = None
"""The frame decoder and how many kinds it knows. Kinds are registered as protocols are loaded
(:func:`marketplace.plugins.exchange`), never removed, so a count that changed means new kinds."""


def _decoder() -> msgspec.msgpack.Decoder:
    """The frame decoder for every kind registered so far (rebuilt, once, after a protocol's kinds
    join: a frame of a kind the decoder did not know would otherwise always take the slow path)."""
    global _DECODER
    if _DECODER is None or _DECODER[0] != len(KINDS):
        _DECODER = (len(KINDS), _frame_decoder())
    return _DECODER[1]


def decode_fast(frame: bytes | memoryview, peer: str | None = None) -> Envelope | None:
    """The envelope in ``frame`` if it passes every check, else None (then :func:`decode_precise`
    says why). Never raises. Call it on a frame that passed :func:`_check_size`."""
    try:
        wire = _decoder().decode(frame)
        if peer is not None and wire.sender != peer:
            return None
        body = wire.body
        if body.ARRAYS:
            _check_arrays(body)
    except Exception:  # noqa: BLE001 - any refusal (msgspec, UTF-8, recursion, a spec) goes to the precise path
        return None
    return Envelope(wire.version, wire.run_id, wire.msg_id, wire.sender, wire.receiver, body.KIND, wire.reply_to, body)


# --- a broadcast's frames: the shared body decoded once ------------------------------------------


class _Head(msgspec.Struct, forbid_unknown_fields=True, frozen=True, gc=False):
    """An envelope whose body was cut off and replaced by nil (:func:`decode_sharing`)."""

    version: int
    run_id: str
    msg_id: Annotated[int, msgspec.Meta(ge=1)]
    sender: str
    receiver: str
    kind: str
    reply_to: int | None
    body: None


_HEAD_DECODER = msgspec.msgpack.Decoder(_Head)


def decode_sharing(
    frame: bytes | memoryview, shared: Envelope, body: bytes, peer: str | None = None
) -> Envelope | None:
    """``frame``'s envelope, holding ``shared``'s very body object, when the frame ends with
    ``body`` (the bytes of ``shared.body``, which :func:`decode` already accepted in another frame)
    and its kind is ``shared``'s: only the envelope's head is decoded and checked. None otherwise
    (then :func:`decode` it whole; it gives the same verdict).

    The frames of one broadcast carry the same body bytes behind each receiver's own head
    (:func:`encode_framed`): an owner host decodes and checks that body once, not once per owner.
    The verdict is :func:`decode`'s: msgpack objects are self-delimiting, so when the head followed
    by nil parses as a whole envelope, the head followed by ``body`` is the envelope whose body is
    ``body``'s one object; and checks on a body depend on its bytes and its kind alone."""
    n = len(body)
    if len(frame) <= n or len(frame) > SCAN_ABOVE or frame[-n:] != body:
        return None
    try:
        head = _HEAD_DECODER.decode(bytes(frame[:-n]) + b"\xc0")
    except Exception:  # noqa: BLE001 - any refusal: the whole frame goes to decode
        return None
    if head.version != PROTOCOL_VERSION or head.kind != shared.kind or (peer is not None and head.sender != peer):
        return None
    return Envelope(
        head.version, head.run_id, head.msg_id, head.sender, head.receiver, head.kind, head.reply_to, shared.body
    )


# --- the precise path ------------------------------------------------------------------------------


def decode(
    frame: bytes | memoryview, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, peer: str | None = None
) -> Envelope:
    """Parse and validate one frame. ``peer`` is the transport-level identity of the sender, if known:
    a frame whose envelope claims another sender is refused."""
    if len(frame) > SCAN_ABOVE or len(frame) > max_bytes:
        _check_size(frame, max_bytes, peer)
    envelope = decode_fast(frame, peer)
    return envelope if envelope is not None else decode_precise(frame, max_bytes=max_bytes, peer=peer)


def _check_size(frame: bytes | memoryview, max_bytes: int, peer: str | None) -> None:
    """Refuse a frame above ``max_bytes``, or a large one whose structure would expand (limits)."""
    party = peer or "unknown party"
    if len(frame) > max_bytes:
        raise MessageError(
            party=party, kind=None, field="<frame>", expected=f"at most {max_bytes} bytes", got=f"{len(frame)} bytes"
        )
    if len(frame) > SCAN_ABOVE:  # a large frame's structure is checked before anything is built from it
        problem = check_structure(frame)
        if problem is not None:
            raise MessageError(
                party=party,
                kind=None,
                field="<frame>",
                expected=f"one msgpack map of at most {MAX_TOKENS} objects, nested at most {MAX_DEPTH} deep",
                got=problem,
            )


def decode_precise(
    frame: bytes | memoryview, *, max_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, peer: str | None = None
) -> Envelope:
    """:func:`decode` by the precise path alone (plain msgpack and the schema, check by check): the
    frame's envelope, or the MessageError for the first thing wrong in it. Call it on a frame that
    passed :func:`_check_size`."""
    party = peer or "unknown party"
    try:
        wire = msgpack.unpackb(
            frame,
            raw=False,
            strict_map_key=True,
            use_list=True,
            max_bin_len=max_bytes,
            max_str_len=max_bytes,
            max_array_len=MAX_ARRAY_LEN,
            max_map_len=MAX_MAP_LEN,
        )
    except Exception as err:  # msgpack raises several unrelated types for garbage
        raise MessageError(
            party=party,
            kind=None,
            field="<frame>",
            expected="one msgpack map",
            got=f"undecodable bytes ({type(err).__name__}{': ' + str(err) if str(err) else ''})",
        ) from None
    if not isinstance(wire, dict):
        raise MessageError(
            party=party, kind=None, field="<frame>", expected="a msgpack map (the envelope)", got=describe_value(wire)
        )
    try:
        return _validate(wire, party, peer, max_bytes)
    except MessageError as err:
        readable_id = wire.get("msg_id")
        if isinstance(readable_id, int) and not isinstance(readable_id, bool) and 0 < readable_id < 2**63:
            err.msg_id = readable_id
        raise


def _envelope_field(
    wire: dict[str, Any], key: str, types: tuple[type, ...], expected: str, party: str, kind: str | None
) -> Any:
    value = wire.get(key)
    if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
        raise MessageError(party=party, kind=kind, field=key, expected=expected, got=describe_value(value))
    return value


def _validate(wire: dict[Any, Any], party: str, peer: str | None, max_bytes: int) -> Envelope:
    """Check a parsed envelope map field by field (see :func:`decode`)."""
    raw_kind = wire.get("kind")
    kind = raw_kind if isinstance(raw_kind, str) and raw_kind in KINDS else None  # never echo junk
    if isinstance(wire.get("sender"), str) and wire["sender"] and peer is None:  # never an empty name
        party = wire["sender"][:64]
    unknown = sorted(str(k) for k in wire if k not in ENVELOPE_KEYS)
    if unknown:
        raise MessageError(
            party=party,
            kind=kind,
            field=unknown[0][:64],
            expected=f"only the envelope keys {list(ENVELOPE_KEYS)}",
            got=f"unknown key {describe_value(unknown[0])}",
        )
    missing = [k for k in ENVELOPE_KEYS if k not in wire]
    if missing:
        raise MessageError(
            party=party,
            kind=kind,
            field=missing[0],
            expected=f"all the envelope keys {list(ENVELOPE_KEYS)}",
            got="nothing",
        )
    version = _envelope_field(wire, "version", (int,), "an integer protocol version", party, kind)
    if version != PROTOCOL_VERSION:
        raise MessageError(
            party=party, kind=kind, field="version", expected=f"protocol version {PROTOCOL_VERSION}", got=repr(version)
        )
    if kind is None:
        raise MessageError(
            party=party,
            kind=None,
            field="kind",
            expected="one of the known kinds (" + ", ".join(sorted(KINDS)) + ")",
            got=describe_value(raw_kind),
        )
    run_id = _envelope_field(wire, "run_id", (str,), "a run id (string)", party, kind)
    msg_id = _envelope_field(wire, "msg_id", (int,), "a positive integer message id", party, kind)
    if msg_id < 1:
        raise MessageError(
            party=party, kind=kind, field="msg_id", expected="a positive integer message id", got=repr(msg_id)
        )
    sender = _envelope_field(wire, "sender", (str,), "the sender's party id", party, kind)
    if peer is not None and sender != peer:
        raise MessageError(
            party=party, kind=kind, field="sender", expected=f"the connection's own identity {peer!r}", got=repr(sender)
        )
    receiver = _envelope_field(wire, "receiver", (str,), "the receiver's party id", party, kind)
    reply_to = wire.get("reply_to")
    if reply_to is not None and (not isinstance(reply_to, int) or isinstance(reply_to, bool)):
        raise MessageError(
            party=party,
            kind=kind,
            field="reply_to",
            expected="null or an integer message id",
            got=describe_value(reply_to),
        )
    cls = KINDS[kind]
    try:
        body = build_body(cls, wire.get("body"), "body")  # each array is checked against its spec here
        _check_arrays(body)  # named dimensions across fields (each array was checked by build_body)
        _check_int64({name: getattr(body, name) for name in cls.__struct_fields__}, "body")
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
