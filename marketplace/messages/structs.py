"""Message bodies: :class:`Body`, the base every message kind's Struct derives from.

A kind is declared once, as a plain frozen msgspec Struct that names its wire kind::

    class Hello(Body, kind="hello", frozen=True):
        role: Literal["owner", "consumer"]
        protocol: Annotated[str, Length(min=1, max=64)]

Its hints use the project's constraint markers (:class:`~marketplace.schema.Range`,
:class:`~marketplace.schema.Length`, :class:`~marketplace.schema.AllowNonFinite`, array specs:
``Annotated[np.ndarray, Array, ArraySpec(...)]``). The type checker sees the class as written (a
frozen dataclass-like Struct of those fields); when the class statement runs, :class:`KindMeta`
registers it in :data:`KINDS` under its kind (a kind declared twice is an error) and derives from
the same hints the two validators the codec uses, which agree:

* the **fast path**: msgspec's typed decoder, checking a frame in C against the Struct's field
  types. msgspec reads a Struct's field types from its ``__annotations__``, so those are replaced by
  the hints' msgspec equivalents (bounds, lengths, finite floats, every integer within int64 except
  message ids, as :class:`msgspec.Meta`); this is what makes decoding a bid cost well under a
  microsecond. The declared hints stay in ``HINTS``;
* the **precise path**: :func:`build_body`, which checks a plain map field by field against the
  declared hints with :mod:`marketplace.schema`'s checkers. The codec uses it only for a frame the
  fast decoder refused, to say exactly which field was wrong, what was expected and what came.

The translation is strict in one direction: whatever the Struct accepts, the precise checks accept
too (the tests check this on every kind and on fuzzed frames), so a frame is never let through by
the fast path that the precise checks would refuse.
"""

from __future__ import annotations

import functools
import math
import sys
import types
import typing
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import msgspec
import numpy as np

from marketplace.messages.arrays import ArraySpec
from marketplace.messages.limits import MAX_ARRAY_LEN, MAX_MAP_LEN
from marketplace.schema import (
    AllowNonFinite,
    Checker,
    Length,
    MissingKeys,
    Range,
    SchemaError,
    compile_hint,
    describe_value,
)
from marketplace.schema import _type_name as type_name

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
FLOAT_MAX = sys.float_info.max
MESSAGE_ID_FIELDS = frozenset({"about_msg_id"})
"""Integer fields that name a message id: they keep the envelope's own range (msgpack's uint64)."""

KINDS: dict[str, type[Body]] = {}
"""Every declared kind's Struct by its wire name, filled as the modules declaring them are imported
(:mod:`marketplace.messages.kinds`; a protocol's with the protocol, :func:`marketplace.plugins.exchange`)."""

B = TypeVar("B", bound="Body")


class KindMeta(msgspec.StructMeta):
    """The metaclass of :class:`Body`: takes the class keyword ``kind`` (the kind's wire name),
    registers the class in :data:`KINDS` and fills its ``KIND``, ``HINTS`` and ``ARRAYS``."""

    def __new__(
        mcls,
        name: str,
        bases: tuple[type, ...],
        namespace: dict[str, Any],
        /,
        *,
        kind: str | None = None,
        **options: Any,
    ) -> KindMeta:
        cls = super().__new__(mcls, name, bases, namespace, **options)
        if kind is not None:
            _declare(cls, kind)
        return cls


class Body(msgspec.Struct, metaclass=KindMeta, frozen=True, forbid_unknown_fields=True):
    """Base of every message body: immutable, and a frame with a key it does not declare is refused.
    A subclass declared with ``kind="name"`` (and ``frozen=True``, which the type checker wants
    spelled out) is the body of the wire kind ``name``."""

    KIND: typing.ClassVar[str] = ""
    """The kind's wire name."""
    HINTS: typing.ClassVar[dict[str, Any]] = {}
    """The declared hints, with the schema's constraint markers (what :func:`build_body` checks)."""
    ARRAYS: typing.ClassVar[tuple[tuple[str, str, ArraySpec], ...]] = ()
    """(field, path in the message, spec) of each array field, in declaration order."""


def _declare(cls: Any, kind: str) -> None:
    """Register ``cls`` as the body of ``kind`` (see the module docstring)."""
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{cls.__name__}: a message kind's name must be a non-empty string, not {kind!r}")
    if any(getattr(base, "KIND", "") for base in cls.__mro__[1:]):
        raise TypeError(f"{cls.__name__}: a message kind cannot derive from another kind; derive from Body")
    if kind in KINDS:
        raise RuntimeError(f"message kind {kind!r} declared twice")
    fields: tuple[str, ...] = cls.__struct_fields__
    declared = get_type_hints(cls, include_extras=True)
    hints = {n: declared[n] for n in fields}
    own = dict(cls.__dict__.get("__annotations__", {}))
    # msgspec reads the field types from the annotations, nearest class first: the kind's own hold
    # the wire type of every field (inherited ones too), so it checks what the hints declare
    cls.__annotations__ = {**own, **{n: wire_type(hint, n) for n, hint in hints.items()}}
    cls.KIND = kind
    cls.HINTS = hints
    cls.ARRAYS = tuple(
        (n, f"body.{n}", meta)
        for n in fields
        for meta in getattr(hints[n], "__metadata__", ())
        if isinstance(meta, ArraySpec)
    )
    KINDS[kind] = cls


@functools.cache
def _plan(cls: type[Body]) -> tuple[dict[str, Checker], tuple[str, ...]]:
    """The checkers of the fields of ``cls`` and its required fields, in field order (once per kind)."""
    fields = cls.__struct_fields__
    required = fields[: len(fields) - len(cls.__struct_defaults__)]
    return {n: compile_hint(cls.HINTS[n]) for n in fields}, required


def build_body(cls: type[B], data: Any, path: str) -> B:
    """The body of kind ``cls`` from a plain map, checked field by field against the declared hints
    as :func:`marketplace.schema.build` checks a dataclass, with its errors: unknown and missing keys
    refused (every missing one at once), fields with defaults optional. Raises SchemaError."""
    if not isinstance(data, dict):
        raise SchemaError(path, f"a mapping for {cls.__name__}", describe_value(data))
    checkers, required = _plan(cls)
    for key in data:
        if key not in checkers:
            raise SchemaError(
                f"{path}.{key}" if path else str(key),
                f"one of the known keys {sorted(checkers)}",
                f"unknown key {str(key)!r}",
            )
    absent = [n for n in required if n not in data]
    if absent:
        raise MissingKeys(
            path, [f"{path}.{n}" if path else n for n in absent], [type_name(cls.HINTS[n]) for n in absent]
        )
    return cls(**{n: check(data[n], f"{path}.{n}" if path else n) for n, check in checkers.items() if n in data})


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
    meta: dict[str, Any] = {k: float(v) for k, v in bounds.items()}
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
        items = (
            (wire_type(get_args(hint)[0], leaf), ...) if origin is tuple else (str, wire_type(get_args(hint)[1], leaf))
        )
        return Annotated[types.GenericAlias(origin, items), msgspec.Meta(**bounds)]  # tuple[T, ...], dict[str, T]
    if hint is bool:
        return bool
    if hint is int:
        return _int_meta(bounds, leaf)
    if hint is float:
        return _float_meta(bounds, finite=not any(isinstance(c, AllowNonFinite) for c in constraints))
    if hint in (str, bytes):
        return Annotated[hint, msgspec.Meta(**bounds)] if bounds else hint
    raise TypeError(f"message field {leaf!r}: no wire type for the hint {hint!r}")
