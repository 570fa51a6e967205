"""A message kind's declaration turned into two validators that agree: a msgspec Struct and a schema.

A kind is declared once, as a class of annotated fields (:func:`marketplace.messages.kinds.kind`).
Its hints use the project's constraint markers (:class:`~marketplace.schema.Range`,
:class:`~marketplace.schema.Length`, :class:`~marketplace.schema.AllowNonFinite`, array specs).
From that one declaration this module makes:

* the **body class** roles use: a frozen :class:`msgspec.Struct` whose field types carry the same
  constraints as :class:`msgspec.Meta` (bounds, lengths, finite floats, every integer within int64
  except message ids), with unknown fields forbidden. msgspec's typed decoder checks a frame
  against it in C, which is what makes decoding a bid cost well under a microsecond;
* the **schema** (a frozen dataclass of the same name and hints) that :func:`marketplace.schema.build`
  checks field by field. The codec uses it only for a frame the fast decoder refused, to say
  exactly which field was wrong, what was expected and what came.

The translation is strict in one direction: whatever the Struct accepts, the schema accepts too
(the tests check this on every kind and on fuzzed frames), so a frame is never let through by the
fast path that the precise checks would refuse.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import types
import typing
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import msgspec
import numpy as np

from marketplace.messages.arrays import ArraySpec
from marketplace.messages.limits import MAX_ARRAY_LEN, MAX_MAP_LEN
from marketplace.schema import AllowNonFinite, Length, Range

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_MAX = sys.float_info.max
MESSAGE_ID_FIELDS = frozenset({"about_msg_id"})
"""Integer fields that name a message id: they keep the envelope's own range (msgpack's uint64)."""


class Body(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Base of every message body: immutable, and a frame with a key it does not declare is refused."""

    KIND: typing.ClassVar[str] = ""
    """The kind's wire name."""
    HINTS: typing.ClassVar[dict[str, Any]] = {}
    """The declared hints, with the schema's constraint markers."""
    SCHEMA: typing.ClassVar[type] = object
    """The frozen dataclass of the same fields that :func:`marketplace.schema.build` checks."""
    ARRAYS: typing.ClassVar[tuple[tuple[str, str, ArraySpec], ...]] = ()
    """(field, path in the message, spec) of each array field, in declaration order."""


def _bounds(constraints: tuple[Any, ...]) -> dict[str, Any]:
    """msgspec.Meta keywords for the Range and Length markers among ``constraints``."""
    out: dict[str, Any] = {}
    for c in constraints:
        if isinstance(c, Range):
            if c.min is not None:
                out["gt" if c.min_open else "ge"] = c.min
            if c.max is not None:
                out["lt" if c.max_open else "le"] = c.max
        elif isinstance(c, Length):
            out["min_length"] = c.min
            if c.max is not None:
                out["max_length"] = c.max
    return out


def _int_meta(bounds: dict[str, Any], leaf: str) -> Any:
    """An int with the declared bounds (open ones closed), tightened to int64 unless ``leaf`` names
    a message id."""
    low = math.floor(bounds["gt"]) + 1 if "gt" in bounds else (math.ceil(bounds["ge"]) if "ge" in bounds else None)
    high = math.ceil(bounds["lt"]) - 1 if "lt" in bounds else (math.floor(bounds["le"]) if "le" in bounds else None)
    if leaf not in MESSAGE_ID_FIELDS:
        low = INT64_MIN if low is None else max(low, INT64_MIN)
        high = INT64_MAX if high is None else min(high, INT64_MAX)
    meta = {k: v for k, v in (("ge", low), ("le", high)) if v is not None}
    return Annotated[int, msgspec.Meta(**meta)] if meta else int


def _float_meta(bounds: dict[str, Any], finite: bool) -> Any:
    """A float with the declared bounds; a finite one unless the field allows NaN and infinity
    (msgspec compares with the bounds, and NaN fails every comparison)."""
    meta = {k: float(v) for k, v in bounds.items()}
    if finite:
        if "ge" not in meta and "gt" not in meta:
            meta["ge"] = -FLOAT_MAX
        if "le" not in meta and "lt" not in meta:
            meta["le"] = FLOAT_MAX
    return Annotated[float, msgspec.Meta(**meta)] if meta else float


def wire_type(hint: Any, leaf: str) -> Any:
    """The msgspec type for a declared hint; ``leaf`` is the field's name (message-id fields keep
    the uint64 range). Raises TypeError for a hint the schema would not support either."""
    constraints: tuple[Any, ...] = ()
    if get_origin(hint) is Annotated:
        hint, *meta = get_args(hint)
        constraints = tuple(meta)
    if any(hasattr(c, "__schema_build__") for c in constraints):  # an array: built by the codec's hook
        return np.ndarray
    bounds = _bounds(constraints)
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return Union[tuple(type(None) if o is type(None) else wire_type(o, leaf) for o in get_args(hint))]  # noqa: UP007
    if origin is Literal:
        return hint
    if origin in (tuple, dict):  # never longer than plain msgpack reads (the precise path's limits)
        cap = MAX_ARRAY_LEN if origin is tuple else MAX_MAP_LEN
        bounds["max_length"] = min(bounds.get("max_length", cap), cap)
        if origin is tuple:
            return Annotated[tuple[wire_type(get_args(hint)[0], leaf), ...], msgspec.Meta(**bounds)]
        return Annotated[dict[str, wire_type(get_args(hint)[1], leaf)], msgspec.Meta(**bounds)]
    if hint is bool:
        return bool
    if hint is int:
        return _int_meta(bounds, leaf)
    if hint is float:
        return _float_meta(bounds, finite=not any(isinstance(c, AllowNonFinite) for c in constraints))
    if hint in (str, bytes):
        return Annotated[hint, msgspec.Meta(**bounds)] if bounds else hint
    raise TypeError(f"message field {leaf!r}: no wire type for the hint {hint!r}")


def _default(value: Any) -> dataclasses.Field:
    if isinstance(value, (dict, list)):
        if value:
            raise TypeError("a message field's mutable default must be empty")
        return dataclasses.field(default_factory=type(value))
    return dataclasses.field(default=value)


def make_body(spec: type, name: str) -> type:
    """The body Struct for the declared class ``spec`` (see the module docstring); the class keeps
    ``KIND``, ``HINTS``, ``SCHEMA`` and ``ARRAYS`` (see :class:`Body`)."""
    hints = get_type_hints(spec, include_extras=True)
    fields = [n for n in spec.__annotations__ if get_origin(hints[n]) is not typing.ClassVar]
    defaults = {n: spec.__dict__[n] for n in fields if n in spec.__dict__}
    schema = dataclasses.make_dataclass(
        spec.__name__,
        [(n, hints[n], _default(defaults[n])) if n in defaults else (n, hints[n]) for n in fields],
        frozen=True,
    )
    schema.__module__ = spec.__module__
    struct_fields = [
        (n, wire_type(hints[n], n), defaults[n]) if n in defaults else (n, wire_type(hints[n], n)) for n in fields
    ]
    arrays = tuple(
        (n, f"body.{n}", meta)
        for n in fields
        for meta in getattr(hints[n], "__metadata__", ())
        if isinstance(meta, ArraySpec)
    )
    return msgspec.defstruct(
        spec.__name__,
        struct_fields,
        bases=(Body,),
        module=spec.__module__,
        namespace={
            "__doc__": spec.__doc__,
            "KIND": name,
            "HINTS": {n: hints[n] for n in fields},
            "SCHEMA": schema,
            "ARRAYS": arrays,
        },
    )
