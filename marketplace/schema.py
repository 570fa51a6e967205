"""Declarative validation of plain data against typed, frozen dataclasses.

One small mechanism serves both the scenario files (YAML) and the wire contract (msgpack): a
dataclass is the schema, its type hints say what each field holds, and ``typing.Annotated``
metadata adds constraints. ``build(cls, data)`` turns a plain mapping into an instance or raises
:class:`SchemaError` naming the path of the offending field, what was expected and what came.

Supported hints: ``bool``, ``int``, ``float`` (ints accepted, NaN/inf refused unless
``AllowNonFinite``), ``str``, ``bytes``, ``Literal[...]``, ``X | None``, ``tuple[T, ...]``,
``dict[str, T]``, nested dataclasses, and any type with a ``__schema_build__(value, path)``
classmethod, given as the hint or as ``Annotated`` metadata (numpy arrays use that, see
:mod:`marketplace.messages.arrays`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, get_args, get_origin, get_type_hints

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")
"""A dataclass :func:`build` makes."""


class SchemaError(ValueError):
    """A value does not fit its schema. ``path`` is dotted (``data.partition.alpha``)."""

    def __init__(self, path: str, expected: str, got: str) -> None:
        self.path = path or "<root>"
        self.expected = expected
        self.got = got
        super().__init__(f"{self.path}: expected {expected}, got {got}")


class MissingKeys(SchemaError):
    """Required keys absent from one section, every one of them at once (not one per attempt).

    ``keys`` holds their dotted paths. With one key missing the message reads as for any field
    (``a.b.c: expected an integer (required), got nothing``); with several, ``path`` is the section
    and the message lists each key path with what it holds. ``section`` (say ``a csv section``)
    says what the section is when the whole section was left out.
    """

    def __init__(self, path: str, keys: typing.Sequence[str], holds: typing.Sequence[str], section: str = "") -> None:
        self.keys = tuple(keys)
        listed = [f"{key} ({what})" for key, what in zip(keys, holds)]
        if section:
            super().__init__(
                path, f"{section} with the required key{'s' if len(listed) > 1 else ''} {_and(listed)}", "nothing"
            )
        elif len(listed) == 1:
            super().__init__(keys[0], f"{holds[0]} (required)", "nothing")
        else:
            super().__init__(path, f"the required keys {_and(listed)}", "nothing for any of them")


def _and(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def required_keys(cls: type) -> list[tuple[str, str]]:
    """The required (no default) keys of the dataclass ``cls``, in field order, each with a short
    description of what it holds (``("path", "a string")``)."""
    hints, _, required = _plan(cls)
    return [(name, _type_name(hints[name])) for name in required]


def missing_keys(cls: type, data: dict[str, Any], path: str) -> MissingKeys | None:
    """A :class:`MissingKeys` naming every required key of ``cls`` absent from ``data``, or None."""
    absent = [(name, what) for name, what in required_keys(cls) if name not in data]
    if not absent:
        return None
    return MissingKeys(path, [_join(path, name) for name, _ in absent], [what for _, what in absent])


@dataclass(frozen=True)
class Range:
    """Numeric bounds; ``None`` means unbounded on that side. ``reason`` says briefly why the bounds
    are where they are (say, what overflows past them); a refusal quotes it after the range."""

    min: float | None = None
    max: float | None = None
    min_open: bool = False
    max_open: bool = False
    reason: str = ""

    def check(self, value: float, path: str) -> None:
        low_bad = self.min is not None and (value <= self.min if self.min_open else value < self.min)
        high_bad = self.max is not None and (value >= self.max if self.max_open else value > self.max)
        if low_bad or high_bad:
            why = f" ({self.reason})" if self.reason else ""
            raise SchemaError(path, f"a number in {self.describe()}{why}", describe_value(value))

    def describe(self) -> str:
        lo = "(-inf" if self.min is None else ("(" if self.min_open else "[") + f"{self.min:g}"
        hi = "inf)" if self.max is None else f"{self.max:g}" + (")" if self.max_open else "]")
        return f"{lo}, {hi}"


@dataclass(frozen=True)
class Length:
    """Bounds on the length of a string, bytes or tuple."""

    min: int = 0
    max: int | None = None

    def check(self, value: Any, path: str) -> None:
        n = len(value)
        if n < self.min or (self.max is not None and n > self.max):
            hi = "" if self.max is None else f" and at most {self.max}"
            raise SchemaError(path, f"a length of at least {self.min}{hi}", f"length {n}")


@dataclass(frozen=True)
class AllowNonFinite:
    """Marks a float field that may hold NaN or infinity (most may not)."""


def describe_value(value: Any) -> str:
    """A short, safe description of a received value for error messages."""
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return repr(shown)
    if isinstance(value, (bytes, bytearray)):
        return f"{len(value)} bytes"
    if isinstance(value, dict):
        return f"a mapping with keys {sorted(map(str, value))[:8]}"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)} items"
    return f"a value of type {type(value).__name__}"


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def _type_name(hint: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", bytes: "bytes"}
    if hint in names:
        return names[hint]
    if get_origin(hint) is Literal:
        return f"one of {list(get_args(hint))}"
    if get_origin(hint) is typing.Annotated:
        return _type_name(get_args(hint)[0])
    if get_origin(hint) is tuple:
        return f"a list of {_type_name(get_args(hint)[0])}"
    return getattr(hint, "__name__", str(hint))


Checker = typing.Callable[[Any, str], Any]


@functools.cache
def compile_hint(hint: Any) -> Checker:
    """A checker ``(value, path) -> built value`` for ``hint``, worked out once per hint.

    Inspecting a type hint (origins, arguments, metadata) costs far more than checking a value,
    and a message kind's hints never change, so each one is turned into a small closure once.
    """
    constraints: tuple[Any, ...] = ()
    if get_origin(hint) is typing.Annotated:
        hint, *meta = get_args(hint)
        constraints = tuple(meta)
    builder = next((c for c in constraints if hasattr(c, "__schema_build__")), None)
    if builder is not None:  # e.g. Annotated[np.ndarray, Array, ArraySpec(...)]
        base: Checker = builder.__schema_build__
    else:
        bounds = next((c for c in constraints if isinstance(c, Range)), None)
        base = _compile_plain(
            hint,
            allow_nonfinite=any(isinstance(c, AllowNonFinite) for c in constraints),
            finite=f"a finite number in {bounds.describe()}" if bounds is not None else "a finite number",
        )
    checks = tuple(c.check for c in constraints if hasattr(c, "check"))
    if not checks:
        return base

    def constrained(value: Any, path: str) -> Any:
        out = base(value, path)
        if out is not None:  # an optional field left empty has nothing to constrain
            for check in checks:
                check(out, path)
        return out

    return constrained


def _simple(
    types_: tuple[type, ...],
    expected: str,
    convert: typing.Callable[[Any], Any] | None = None,
    reject_bool: bool = False,
) -> Checker:
    def check(value: Any, path: str) -> Any:
        if not isinstance(value, types_) or (reject_bool and isinstance(value, bool)):
            raise SchemaError(path, expected, describe_value(value))
        return convert(value) if convert else value

    return check


NON_FINITE_TEXTS = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})
"""Texts that read as NaN or an infinity (a ``--set key=nan`` arrives as the text ``'nan'``)."""


def _compile_plain(hint: Any, *, allow_nonfinite: bool = False, finite: str = "a finite number") -> Checker:
    """The checker of a hint without ``Annotated`` metadata. ``finite`` is what a float field that
    refuses NaN and infinities expects (with its range, when it has one).

    Generic hints (unions, literals, lists, mappings) are told apart by their origin first, then
    the plain types, then dataclasses and types that build themselves; anything else is a bug in a
    schema, refused when its checker is compiled rather than when a value arrives."""
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _compile_union(get_args(hint))
    if origin is Literal:
        return _compile_literal(get_args(hint))
    if origin is tuple:
        return _compile_sequence(compile_hint(get_args(hint)[0]))
    if origin is dict:
        return _compile_mapping(compile_hint(get_args(hint)[1]))
    scalar = _compile_scalar(hint, allow_nonfinite=allow_nonfinite, finite=finite)
    if scalar is not None:
        return scalar
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return lambda value, path: build(hint, value, path)
    if hasattr(hint, "__schema_build__"):
        return hint.__schema_build__
    raise TypeError(f"schema: unsupported type hint {hint!r}")


def _compile_literal(allowed: tuple[Any, ...]) -> Checker:
    """The checker of ``Literal[...]``: the value must be one of ``allowed``, and a boolean only
    where a boolean is allowed (``True == 1``, so a plain ``in`` would let ``1`` pass for ``True``)."""

    def literal(value: Any, path: str) -> Any:
        if value not in allowed or isinstance(value, bool) != any(isinstance(a, bool) for a in allowed if a == value):
            raise SchemaError(path, f"one of {list(allowed)}", describe_value(value))
        return value

    return literal


def _compile_sequence(item: Checker) -> Checker:
    """The checker of ``tuple[X, ...]``: a list (or tuple) whose items each pass ``item``, built
    as a tuple; an item's errors name its index."""

    def sequence(value: Any, path: str) -> Any:
        if not isinstance(value, (list, tuple)):
            raise SchemaError(path, "a list", describe_value(value))
        return tuple(item(v, _join(path, i)) for i, v in enumerate(value))

    return sequence


def _compile_mapping(item: Checker) -> Checker:
    """The checker of ``dict[str, X]``: a mapping of string keys whose values each pass ``item``;
    a value's errors name its key."""

    def mapping(value: Any, path: str) -> Any:
        if not isinstance(value, dict):
            raise SchemaError(path, "a mapping", describe_value(value))
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise SchemaError(path, "string keys", describe_value(k))
            out[k] = item(v, _join(path, k))
        return out

    return mapping


def _compile_scalar(hint: Any, *, allow_nonfinite: bool, finite: str) -> Checker | None:
    """The checker of ``Any`` or a plain type (bool, int, str, bytes, float), or None when ``hint``
    is none of them. An int field refuses booleans; bytes accept a bytearray (built as bytes)."""
    if hint is Any:
        return lambda value, path: value
    if hint is bool:
        return _simple((bool,), "a boolean")
    if hint is int:
        return _simple((int,), "an integer", reject_bool=True)
    if hint is str:
        return _simple((str,), "a string")
    if hint is bytes:
        return _simple((bytes, bytearray), "bytes", convert=bytes)
    if hint is float:
        return _compile_float(allow_nonfinite=allow_nonfinite, finite=finite)
    return None


def _compile_float(*, allow_nonfinite: bool, finite: str) -> Checker:
    """The checker of a float field: any int or float but a boolean, built as a float. Unless
    ``allow_nonfinite``, NaN and the infinities are refused as not ``finite``, and so is a text
    that would read as one (``--set key=nan``), before the "a number" check would call it text."""

    def number(value: Any, path: str) -> float:
        if not allow_nonfinite and isinstance(value, str) and value.strip().lower() in NON_FINITE_TEXTS:
            raise SchemaError(path, finite, describe_value(value))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SchemaError(path, "a number", describe_value(value))
        value = float(value)
        if not allow_nonfinite and not math.isfinite(value):
            raise SchemaError(path, finite, describe_value(value))
        return value

    return number


def _compile_union(options: tuple[Any, ...]) -> Checker:
    allows_none = type(None) in options
    checkers = [compile_hint(o) for o in options if o is not type(None)]
    expected = " or ".join(_type_name(o) for o in options)

    def union(value: Any, path: str) -> Any:
        if value is None and allows_none:
            return None
        errors = []
        for checker in checkers:
            try:
                return checker(value, path)
            except SchemaError as err:
                errors.append(err)
        if len(errors) == 1:
            raise errors[0]
        raise SchemaError(path, expected, describe_value(value))

    return union


@functools.cache
def _plan(cls: type) -> tuple[dict[str, Any], dict[str, Checker], tuple[str, ...]]:
    """The init fields of ``cls``: their resolved hints, compiled checkers, and which are required,
    in field order (computed once: resolving type hints is far slower than validating a message)."""
    all_hints = get_type_hints(cls, include_extras=True)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    hints = {f.name: all_hints[f.name] for f in fields}
    checkers = {name: compile_hint(hint) for name, hint in hints.items()}
    required = tuple(
        f.name for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    )
    return hints, checkers, required


def build(cls: type[T], data: Any, path: str = "") -> T:
    """Build the frozen dataclass ``cls`` from a mapping, refusing unknown and missing keys.

    Fields with defaults may be omitted. Raises :class:`SchemaError` at the first problem, except
    that the required keys a section lacks are reported together, as one :class:`MissingKeys`.
    A dataclass may define ``__schema_check__(values, path)`` (a classmethod or staticmethod): it
    sees the built field values before the instance is made, and raises :class:`SchemaError` with
    paths below ``path`` for checks that span fields.
    """
    if not isinstance(data, dict):
        raise SchemaError(path, f"a mapping for {cls.__name__}", describe_value(data))
    hints, checkers, required = _plan(cls)
    for key in data:
        if key not in hints:
            raise SchemaError(
                _join(path, str(key)), f"one of the known keys {sorted(hints)}", f"unknown key {str(key)!r}"
            )
    absent = missing_keys(cls, data, path) if any(name not in data for name in required) else None
    if absent is not None:
        raise absent
    kwargs = {}
    for name, checker in checkers.items():
        if name in data:
            kwargs[name] = checker(data[name], f"{path}.{name}" if path else name)
    check = getattr(cls, "__schema_check__", None)
    if check is not None:
        check(kwargs, path)
    try:
        return cls(**kwargs)
    except SchemaError:
        raise
    except (ValueError, TypeError) as err:  # cross-field checks in __post_init__
        raise SchemaError(path, f"a consistent {cls.__name__}", str(err)) from err


def to_plain(obj: Any) -> Any:
    """Turn a built dataclass (recursively) back into plain dicts/lists, for reports and YAML."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {k: to_plain(v) for k, v in obj.items()}
    return obj


# --- the key paths a schema accepts (for suggestions on a mistyped key) ---------------------------


def _inner(hint: Any) -> Any:
    """``hint`` without ``Annotated`` metadata and ``None``/``Literal`` options: the dataclass or
    ``dict[str, T]`` a key path can go into, else a leaf hint."""
    if get_origin(hint) is typing.Annotated:
        return _inner(get_args(hint)[0])
    if get_origin(hint) in (typing.Union, types.UnionType):
        options = [_inner(option) for option in get_args(hint)]
        for option in options:
            if dataclasses.is_dataclass(option) or get_origin(option) is dict:
                return option
        return options[0]
    return hint


def key_is_known(cls: type, key: str) -> bool:
    """Whether the dotted ``key`` (``summarize.privacy.eps_validation``) names a field of the
    dataclass ``cls`` or of the dataclasses nested in it; any key is accepted inside a
    ``dict[str, T]`` field (``sweep.vary.<any key>``)."""
    hint: Any = cls
    for part in key.split("."):
        hint = _inner(hint)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            hints = _plan(hint)[0]
            if part not in hints:
                return False
            hint = hints[part]
        elif get_origin(hint) is dict:
            hint = get_args(hint)[1]
        else:
            return False  # a key below a value that is not a mapping
    return True


def dotted_keys(cls: type, prefix: str = "") -> list[str]:
    """Every dotted key path into the dataclass ``cls``: each field, and the fields of nested
    dataclasses (a ``dict[str, T]`` field is listed itself; its keys are free)."""
    out = []
    for name, hint in _plan(cls)[0].items():
        path = _join(prefix, name)
        out.append(path)
        inner = _inner(hint)
        if isinstance(inner, type) and dataclasses.is_dataclass(inner):
            out.extend(dotted_keys(inner, path))
    return out


def closest_keys(cls: type, key: str, n: int = 3) -> list[str]:
    """The valid dotted keys of ``cls`` closest to the unknown ``key``: close spellings of its last
    part among the fields beside it (``summarize.round`` -> ``summarize.rounds``), else of the
    whole path (difflib), else keys ending with the same field name (``rounds`` -> ``summarize.rounds``)."""
    import difflib

    keys = dotted_keys(cls)
    parent, _, last = key.rpartition(".")
    siblings = {k.rpartition(".")[2]: k for k in keys if k.rpartition(".")[0] == parent}
    close = [siblings[name] for name in difflib.get_close_matches(last, list(siblings), n=n, cutoff=0.6)]
    if close:
        return close
    depth = key.count(".")
    close = difflib.get_close_matches(
        key, [k for k in keys if k.count(".") == depth], n=n, cutoff=0.6
    ) or difflib.get_close_matches(key, keys, n=n, cutoff=0.6)  # a key as deep as the one given first
    same_leaf = [k for k in keys if k.rpartition(".")[2] == last and k not in close]
    return (close + same_leaf)[:n]
