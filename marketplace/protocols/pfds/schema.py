"""Public attribute domains: what every sharer knows before it looks at a single private row.

A pfds tree draws its numeric split candidates inside the public range [lo, hi] of an attribute and
branches a categorical attribute on *every* value of its public list, so neither the candidates nor
the shape of a categorical branch depends on the data. Taking either from the private rows (their
min and max, or the values that happen to occur) would leak them, which is why the domains live in
a frozen :class:`PublicSchema` and are checked against the data, never derived from it.

Rows are float64 matrices in schema order: a numeric column holds its values, a categorical column
the *code* of its value (the index in the attribute's value list). :meth:`PublicSchema.encode`
builds such a matrix from a 2-D array (categorical columns as codes) or from a mapping
``name -> column`` (categorical columns as raw values, looked up in the public list),
and refuses NaN, unknown or missing attributes and values outside the public domain. Labels become
codes too: the index of a class, or for regression the index of one of ``buckets`` equal-width
buckets of [lo, hi] (the paper uses 10).

>>> schema = PublicSchema(
...     attributes=(NumericAttribute("age", 17, 90), CategoricalAttribute("sex", ("Female", "Male"))),
...     label=ClassLabels((0, 1)))
>>> schema.encode({"age": [30, 45], "sex": ["Male", "Female"]}).tolist()
[[30.0, 1.0], [45.0, 0.0]]
>>> schema.encode({"age": [130], "sex": ["Male"]})
Traceback (most recent call last):
  ...
ValueError: Attribute 'age' must lie in its public domain [17.0, 90.0]. Got 130.0 at row 0 instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeVar

import numpy as np

from ._checks import MalformedPlain, describe, fail, generator, int_at_least, is_int, is_real

__all__ = [
    "NumericAttribute",
    "CategoricalAttribute",
    "ClassLabels",
    "RegressionLabels",
    "PublicSchema",
    "Attribute",
    "Labels",
]


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise fail(TypeError, "name", where, "a string", value)
    if not value:
        raise fail(ValueError, "name", where, "a non-empty string", value)
    return value


def _finite(value: Any, name: str, where: str) -> float:
    if not is_real(value):
        raise fail(TypeError, name, where, "a real number", value)
    if not math.isfinite(value):
        raise fail(ValueError, name, where, "a finite real number", value)
    return float(value)


def _range(lo: Any, hi: Any, where: str) -> tuple[float, float]:
    lo, hi = _finite(lo, "lo", where), _finite(hi, "hi", where)
    if not lo < hi:
        raise fail(ValueError, "hi", where, f"greater than lo = {lo!r}", hi)
    return lo, hi


def _value_list(values: Any, name: str, where: str, minimum: int) -> tuple:
    """A tuple of distinct msgpack-able scalars (str, int or finite float)."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (tuple, list)):
        raise fail(TypeError, name, where, "a tuple or list of values", values)
    out = []
    for value in values:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (str, int, float, np.integer, np.floating)):
            raise fail(TypeError, name, where, "a list of strings, integers or finite floats", value)
        if isinstance(value, (float, np.floating)) and not math.isfinite(value):
            raise fail(ValueError, name, where, "a list of finite values", value)
        out.append(value.item() if isinstance(value, np.generic) else value)
    if len(out) < minimum:
        raise fail(ValueError, name, where, f"a list of at least {minimum} value(s)", values)
    if len(set(out)) != len(out):
        raise fail(ValueError, name, where, "a list of distinct values", values)
    return tuple(out)


def _codes(values: tuple, column: np.ndarray, rule: str) -> np.ndarray:
    """The code (index in ``values``) of each entry of ``column``; ValueError "{rule}. Got ... at row
    r instead." for the first entry outside ``values`` (a bool never matches, though True == 1)."""
    codes = {value: code for code, value in enumerate(values)}
    out = np.empty(column.shape[0], dtype=np.int64)
    for row, value in enumerate(column.tolist()):
        code = codes.get(value)
        if code is None or isinstance(value, bool):
            raise ValueError(f"{rule}. Got {describe(value)} at row {row} instead.")
        out[row] = code
    return out


def _label_vector(y: Any) -> np.ndarray:
    array = np.asarray(y)
    if array.ndim != 1:
        raise ValueError(f"Labels must be a 1-D array. Got shape {array.shape} instead.")
    return array


def _code_vector(codes: Any, n_codes: int) -> np.ndarray:
    array = np.asarray(codes)
    if array.ndim != 1 or (array.size and (array.dtype.kind not in "iu" or array.min() < 0 or array.max() >= n_codes)):
        raise ValueError(
            f"Label codes must be a 1-D array of integers in [0, {n_codes}). "
            f"Got dtype {array.dtype}, shape {array.shape} instead."
        )
    return array.astype(np.int64)


@dataclass(frozen=True)
class NumericAttribute:
    """A numeric attribute with public range [lo, hi]; a tree node splits it in two at a threshold."""

    name: str
    lo: float
    hi: float

    kind: ClassVar[Literal["numeric"]] = "numeric"

    def __post_init__(self) -> None:
        _name(self.name, "NumericAttribute")
        lo, hi = _range(self.lo, self.hi, "NumericAttribute")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    @property
    def branching(self) -> int:
        return 2


@dataclass(frozen=True)
class CategoricalAttribute:
    """A categorical attribute with its public list of values; a tree node branches on every value."""

    name: str
    values: tuple

    kind: ClassVar[Literal["categorical"]] = "categorical"

    def __post_init__(self) -> None:
        _name(self.name, "CategoricalAttribute")
        object.__setattr__(self, "values", _value_list(self.values, "values", "CategoricalAttribute", 1))

    @property
    def branching(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class ClassLabels:
    """Class labels of a classification task; code i stands for ``values[i]``."""

    values: tuple

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", _value_list(self.values, "values", "ClassLabels", 2))

    @property
    def n_codes(self) -> int:
        return len(self.values)

    def encode(self, y: Any) -> np.ndarray:
        """The code (index in ``values``) of each label."""
        return _codes(self.values, _label_vector(y), f"Labels must be one of the public classes {list(self.values)!r}")

    def decode(self, codes: Any, *, rng: np.random.Generator | None = None) -> np.ndarray:
        """The class of each code (``rng`` is not used)."""
        codes = _code_vector(codes, self.n_codes)
        return np.array(self.values)[codes]


@dataclass(frozen=True)
class RegressionLabels:
    """A real label in [lo, hi], cut into ``buckets`` equal-width buckets (code i = bucket i)."""

    lo: float
    hi: float
    buckets: int = 10

    def __post_init__(self) -> None:
        lo, hi = _range(self.lo, self.hi, "RegressionLabels")
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "buckets", int_at_least(self.buckets, 2, "buckets", "RegressionLabels"))

    @property
    def n_codes(self) -> int:
        return self.buckets

    @property
    def edges(self) -> np.ndarray:
        """The buckets+1 bucket edges, lo first and hi last."""
        return np.linspace(self.lo, self.hi, self.buckets + 1)

    def encode(self, y: Any) -> np.ndarray:
        """The bucket (0..buckets-1) of each real label in [lo, hi]; hi falls in the last bucket."""
        array = _label_vector(y)
        try:
            values = array.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError("Regression labels must be real numbers.") from None
        bad = ~np.isfinite(values) | (values < self.lo) | (values > self.hi)
        if bad.any():
            row = int(np.argmax(bad))
            raise ValueError(
                f"Labels must lie in the public range [{self.lo!r}, {self.hi!r}]. "
                f"Got {float(values[row])!r} at row {row} instead."
            )
        width = (self.hi - self.lo) / self.buckets
        return np.minimum(((values - self.lo) / width).astype(np.int64), self.buckets - 1)

    def decode(self, codes: Any, *, rng: np.random.Generator | None = None) -> np.ndarray:
        """A value drawn uniformly inside each code's bucket."""
        codes = _code_vector(codes, self.n_codes)
        rng = generator(rng, "RegressionLabels.decode")
        edges = self.edges
        return rng.uniform(edges[codes], edges[codes + 1])


Attribute = NumericAttribute | CategoricalAttribute
Labels = ClassLabels | RegressionLabels


@dataclass(frozen=True)
class PublicSchema:
    """The public description of a dataset: its attributes in column order and its label domain."""

    attributes: tuple[Attribute, ...]
    label: Labels

    def __post_init__(self) -> None:
        attributes = self.attributes
        if isinstance(attributes, list):
            attributes = tuple(attributes)
        if not isinstance(attributes, tuple) or not attributes:
            raise fail(
                TypeError if not isinstance(attributes, tuple) else ValueError,
                "attributes",
                "PublicSchema",
                "a non-empty tuple of NumericAttribute and CategoricalAttribute",
                self.attributes,
            )
        for attribute in attributes:
            if not isinstance(attribute, (NumericAttribute, CategoricalAttribute)):
                raise fail(
                    TypeError,
                    "attributes",
                    "PublicSchema",
                    "a tuple of NumericAttribute and CategoricalAttribute",
                    attribute,
                )
        names = [a.name for a in attributes]
        if len(set(names)) != len(names):
            duplicate = next(n for n in names if names.count(n) > 1)
            raise fail(ValueError, "attributes", "PublicSchema", "attributes with distinct names", duplicate)
        if not isinstance(self.label, (ClassLabels, RegressionLabels)):
            raise fail(TypeError, "label", "PublicSchema", "a ClassLabels or RegressionLabels", self.label)
        object.__setattr__(self, "attributes", attributes)

    # --- shape of the domain

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def d(self) -> int:
        """The number of attributes (columns)."""
        return len(self.attributes)

    @property
    def n_codes(self) -> int:
        """The number of label codes: classes, or regression buckets."""
        return self.label.n_codes

    @property
    def is_categorical(self) -> np.ndarray:
        return np.array([a.kind == "categorical" for a in self.attributes])

    @property
    def branching(self) -> np.ndarray:
        """Children of a node that splits each attribute: 2 for numeric, the number of values for categorical."""
        return np.array([a.branching for a in self.attributes], dtype=np.int64)

    @property
    def lower(self) -> np.ndarray:
        """Public lower bounds (categorical columns: 0, the first code)."""
        return np.array([a.lo if a.kind == "numeric" else 0.0 for a in self.attributes])

    @property
    def upper(self) -> np.ndarray:
        """Public upper bounds (categorical columns: the number of values, one past the last code)."""
        return np.array([a.hi if a.kind == "numeric" else float(a.branching) for a in self.attributes])

    def index(self, name: str) -> int:
        """The column of attribute ``name``."""
        for i, attribute in enumerate(self.attributes):
            if attribute.name == name:
                return i
        raise ValueError(f"Unknown attribute {name!r}: the public schema has {', '.join(map(repr, self.names))}.")

    # --- rows

    def encode(self, data: Any) -> np.ndarray:
        """Checked rows (n x d float64, categorical columns as codes) from a 2-D array in schema order
        (categorical columns already codes) or a mapping ``name -> column`` (categorical columns as
        raw values of the public list). NaN, unknown or missing attributes and values outside the public
        domain raise ValueError."""
        if isinstance(data, Mapping):
            return self._encode_columns(data)
        return self.check_rows(data, "data", "PublicSchema.encode")

    def _encode_columns(self, data: Mapping) -> np.ndarray:
        unknown = [name for name in data if name not in self.names]
        if unknown:
            raise ValueError(
                f"Unknown attribute {unknown[0]!r}: the public schema has {', '.join(map(repr, self.names))}."
            )
        missing = [name for name in self.names if name not in data]
        if missing:
            raise ValueError(f"Missing attribute {missing[0]!r}: every attribute of the public schema needs a column.")
        columns = []
        for attribute in self.attributes:
            column = np.asarray(data[attribute.name])
            if column.ndim != 1:
                raise ValueError(
                    f"Attribute {attribute.name!r} must be a 1-D column. Got shape {column.shape} instead."
                )
            if attribute.kind == "categorical":
                column = self._lookup(attribute, column)
            columns.append(column)
        sizes = {c.shape[0] for c in columns}
        if len(sizes) != 1:
            raise ValueError(f"Every attribute column must have the same length. Got lengths {sorted(sizes)} instead.")
        try:
            matrix = np.column_stack([c.astype(np.float64) for c in columns])
        except (TypeError, ValueError):
            raise ValueError("Numeric attribute columns must hold real numbers.") from None
        return self.check_rows(matrix, "data", "PublicSchema.encode")

    @staticmethod
    def _lookup(attribute: CategoricalAttribute, column: np.ndarray) -> np.ndarray:
        return _codes(
            attribute.values,
            column,
            f"Attribute {attribute.name!r} must take a value of its public domain {list(attribute.values)!r}",
        )

    def check_rows(self, X: Any, name: str, where: str, *, allow_empty: bool = False) -> np.ndarray:
        """``X`` as a checked n x d float64 matrix: finite, numeric values in [lo, hi], categorical
        columns integer codes of a public value."""
        try:
            array = np.asarray(X, dtype=np.float64)
        except (TypeError, ValueError):
            raise fail(
                TypeError, name, where, "a 2-D array of real numbers (categorical columns as codes)", X
            ) from None
        if array.ndim != 2 or array.shape[1] != self.d or (array.shape[0] == 0 and not allow_empty):
            raise ValueError(
                f"The '{name}' parameter of {where} must be a {'' if allow_empty else 'non-empty '}"
                f"2-D array of shape (rows, {self.d}). Got shape {array.shape} instead."
            )
        bad = ~np.isfinite(array)
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise ValueError(
                f"Attribute {self.names[col]!r} must be finite. Got {float(array[row, col])!r} at row {row} instead."
            )
        for col, attribute in enumerate(self.attributes):
            values = array[:, col]
            if attribute.kind == "numeric":
                outside = (values < attribute.lo) | (values > attribute.hi)
                if outside.any():
                    row = int(np.argmax(outside))
                    raise ValueError(
                        f"Attribute {attribute.name!r} must lie in its public domain "
                        f"[{attribute.lo!r}, {attribute.hi!r}]. Got {float(values[row])!r} at row {row} instead."
                    )
            else:
                outside = (values != np.floor(values)) | (values < 0) | (values >= attribute.branching)
                if outside.any():
                    row = int(np.argmax(outside))
                    raise ValueError(
                        f"Attribute {attribute.name!r} must hold the code (0..{attribute.branching - 1}) "
                        f"of a value of its public domain. Got {float(values[row])!r} at row {row} instead."
                    )
        return array

    # --- labels

    def encode_labels(self, y: Any) -> np.ndarray:
        """Label codes (int64): the class index, or the regression bucket of each label."""
        return self.label.encode(y)

    def decode_labels(self, codes: Any, *, rng: np.random.Generator | None = None) -> np.ndarray:
        """Labels from codes: the class values, or a uniform draw inside each regression bucket
        (which needs ``rng``)."""
        return self.label.decode(codes, rng=rng)

    # --- features for a linear model

    def to_features(self, X: Any) -> np.ndarray:
        """A design matrix for ERM: numeric columns scaled into [0, 1] by their public range,
        categorical columns one-hot (one column per public value)."""
        rows = self.check_rows(X, "X", "PublicSchema.to_features", allow_empty=True)
        blocks = []
        for col, attribute in enumerate(self.attributes):
            if attribute.kind == "numeric":
                blocks.append(((rows[:, col] - attribute.lo) / (attribute.hi - attribute.lo))[:, None])
            else:
                blocks.append(np.eye(attribute.branching)[rows[:, col].astype(np.int64)])
        return np.hstack(blocks)

    # --- plain form

    def to_plain(self) -> dict[str, Any]:
        """The schema as msgpack-ready dicts and lists."""
        attributes = [
            {"name": a.name, "kind": "numeric", "lo": a.lo, "hi": a.hi}
            if a.kind == "numeric"
            else {"name": a.name, "kind": "categorical", "values": list(a.values)}
            for a in self.attributes
        ]
        label: dict[str, Any]
        if isinstance(self.label, ClassLabels):
            label = {"kind": "classes", "values": list(self.label.values)}
        else:
            label = {"kind": "regression", "lo": self.label.lo, "hi": self.label.hi, "buckets": self.label.buckets}
        return {"attributes": attributes, "label": label}

    @classmethod
    def from_plain(cls, plain: Any, path: str = "$") -> PublicSchema:
        """Read back :meth:`to_plain`'s output; :class:`MalformedPlain` names the first bad field."""
        _keys(plain, {"attributes", "label"}, path)
        items = plain["attributes"]
        if not isinstance(items, list) or not items:
            raise MalformedPlain(f"{path}.attributes", "a non-empty list", items)
        attributes: list[Attribute] = []
        for i, item in enumerate(items):
            where = f"{path}.attributes[{i}]"
            if not isinstance(item, dict) or item.get("kind") not in ("numeric", "categorical"):
                raise MalformedPlain(where, "a map with kind 'numeric' or 'categorical'", item)
            if item["kind"] == "numeric":
                _keys(item, {"name", "kind", "lo", "hi"}, where)
                attributes.append(_build(NumericAttribute, where, item["name"], item["lo"], item["hi"]))
            else:
                _keys(item, {"name", "kind", "values"}, where)
                attributes.append(_build(CategoricalAttribute, where, item["name"], item["values"]))
        label = plain["label"]
        where = f"{path}.label"
        if not isinstance(label, dict) or label.get("kind") not in ("classes", "regression"):
            raise MalformedPlain(where, "a map with kind 'classes' or 'regression'", label)
        labels: Labels
        if label["kind"] == "classes":
            _keys(label, {"kind", "values"}, where)
            labels = _build(ClassLabels, where, label["values"])
        else:
            _keys(label, {"kind", "lo", "hi", "buckets"}, where)
            if not is_int(label["buckets"]):
                raise MalformedPlain(f"{where}.buckets", "an integer", label["buckets"])
            labels = _build(RegressionLabels, where, label["lo"], label["hi"], label["buckets"])
        return _build(cls, path, tuple(attributes), labels)


def _keys(plain: Any, keys: set[str], path: str) -> None:
    if not isinstance(plain, dict):
        raise MalformedPlain(path, f"a map with keys {', '.join(sorted(keys))}", plain)
    if set(plain) != keys:
        extra, missing = sorted(set(plain) - keys, key=str), sorted(keys - set(plain))
        detail = f"unknown key {extra[0]!r}" if extra else f"missing key {missing[0]!r}"
        raise MalformedPlain(path, f"a map with keys {', '.join(sorted(keys))}", detail)


T = TypeVar("T")


def _build(factory: type[T], path: str, *args: Any) -> T:
    try:
        return factory(*args)
    except (TypeError, ValueError) as exc:
        raise MalformedPlain(path, f"a valid {factory.__name__} ({exc})", args[0] if args else None) from None
