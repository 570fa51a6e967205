"""Tests of marketplace.schema: building frozen dataclasses from plain data, and back."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

import pytest

from marketplace.schema import AllowNonFinite, Length, MissingKeys, Range, SchemaError, build, to_plain


@dataclass(frozen=True)
class Leaf:
    c: int


@dataclass(frozen=True)
class Middle:
    b: Leaf


@dataclass(frozen=True)
class Outer:
    a: Middle


@dataclass(frozen=True)
class Scalars:
    flag: bool
    count: int
    ratio: float
    name: str


@dataclass(frozen=True)
class Bounded:
    alpha: Annotated[float, Range(min=0, max=1, min_open=True)] = 0.5
    label: Annotated[str, Length(min=1, max=4)] = "x"
    items: Annotated[tuple[int, ...], Length(max=2)] = ()


@dataclass(frozen=True)
class Choice:
    mode: Literal["fast", "slow"]


@dataclass(frozen=True)
class MaybeLimit:
    limit: int | None = None


@dataclass(frozen=True)
class Ints:
    values: tuple[int, ...]


@dataclass(frozen=True)
class Loose:
    strict: float = 0.0
    loose: Annotated[float, AllowNonFinite()] = 0.0


@dataclass(frozen=True)
class Interval:
    low: int
    high: int

    def __post_init__(self) -> None:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) is above high ({self.high})")


@dataclass(frozen=True)
class Holder:
    interval: Interval


@dataclass(frozen=True)
class Everything:
    name: str
    bounded: Bounded
    choice: Choice
    ints: Ints
    extra: dict[str, float]
    limit: int | None = None


def schema_error(cls: type, data: object) -> SchemaError:
    with pytest.raises(SchemaError) as info:
        build(cls, data)
    return info.value


# --- keys --------------------------------------------------------------------------------------


def test_nested_data_builds_nested_dataclasses() -> None:
    assert build(Outer, {"a": {"b": {"c": 3}}}) == Outer(Middle(Leaf(3)))


def test_unknown_key_is_rejected_with_its_path() -> None:
    err = schema_error(Scalars, {"flag": True, "count": 1, "ratio": 1.0, "name": "n", "colour": "red"})
    assert err.path == "colour"
    assert "unknown key 'colour'" in err.got


def test_unknown_key_deep_inside_names_the_dotted_path() -> None:
    err = schema_error(Outer, {"a": {"b": {"c": 1, "d": 2}}})
    assert err.path == "a.b.d"
    assert str(err).startswith("a.b.d: expected one of the known keys ['c']")


def test_missing_required_key_is_rejected_with_its_path() -> None:
    err = schema_error(Outer, {"a": {"b": {}}})
    assert err.path == "a.b.c"
    assert err.expected == "an integer (required)"
    assert err.got == "nothing"


def test_every_missing_required_key_of_a_section_comes_in_one_error() -> None:
    assert build(Scalars, {"flag": True, "count": 2, "ratio": 0.5, "name": "n"}, "section").count == 2
    with pytest.raises(MissingKeys) as caught:
        build(Scalars, {"count": 2}, "section")
    err = caught.value
    assert err.keys == ("section.flag", "section.ratio", "section.name")
    assert err.path == "section"
    assert str(err) == (
        "section: expected the required keys section.flag (a boolean), section.ratio (a number) "
        "and section.name (a string), got nothing for any of them"
    )


def test_missing_required_keys_are_reported_before_a_bad_value_beside_them() -> None:
    with pytest.raises(MissingKeys) as caught:
        build(Scalars, {"flag": "yes", "count": 2})
    assert caught.value.keys == ("ratio", "name")


def test_keys_with_defaults_may_be_omitted() -> None:
    assert build(Bounded, {}) == Bounded()


def test_a_non_mapping_where_a_dataclass_belongs_is_rejected() -> None:
    err = schema_error(Outer, {"a": [1, 2]})
    assert err.path == "a"
    assert "a mapping for Middle" in err.expected


def test_error_at_the_root_says_root() -> None:
    assert schema_error(Leaf, 7).path == "<root>"


# --- scalar types ------------------------------------------------------------------------------


def test_scalars_of_the_right_type_are_accepted() -> None:
    built = build(Scalars, {"flag": False, "count": -3, "ratio": 0.25, "name": ""})
    assert built == Scalars(False, -3, 0.25, "")


def test_bool_is_not_an_int() -> None:
    err = schema_error(Scalars, {"flag": True, "count": True, "ratio": 1.0, "name": "n"})
    assert (err.path, err.expected, err.got) == ("count", "an integer", "True")


def test_bool_is_not_a_float() -> None:
    err = schema_error(Scalars, {"flag": True, "count": 1, "ratio": False, "name": "n"})
    assert (err.path, err.expected) == ("ratio", "a number")


def test_int_is_not_a_bool() -> None:
    err = schema_error(Scalars, {"flag": 1, "count": 1, "ratio": 1.0, "name": "n"})
    assert (err.path, err.expected) == ("flag", "a boolean")


def test_int_is_accepted_for_float_and_becomes_a_float() -> None:
    built = build(Scalars, {"flag": True, "count": 1, "ratio": 2, "name": "n"})
    assert built.ratio == 2.0
    assert type(built.ratio) is float


def test_float_is_not_an_int() -> None:
    err = schema_error(Scalars, {"flag": True, "count": 1.0, "ratio": 1.0, "name": "n"})
    assert (err.path, err.got) == ("count", "1.0")


def test_number_is_not_a_string() -> None:
    err = schema_error(Scalars, {"flag": True, "count": 1, "ratio": 1.0, "name": 5})
    assert (err.path, err.expected) == ("name", "a string")


# --- constraints -------------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [0, -0.5, 1.01])
def test_number_outside_its_range_is_rejected(alpha: float) -> None:
    err = schema_error(Bounded, {"alpha": alpha})
    assert err.path == "alpha"
    assert err.expected == "a number in (0, 1]"


@pytest.mark.parametrize("alpha", [1e-9, 0.5, 1])
def test_number_inside_its_range_is_accepted(alpha: float) -> None:
    assert build(Bounded, {"alpha": alpha}).alpha == alpha


@pytest.mark.parametrize("label", ["", "abcde"])
def test_string_of_the_wrong_length_is_rejected(label: str) -> None:
    err = schema_error(Bounded, {"label": label})
    assert err.path == "label"
    assert err.expected == "a length of at least 1 and at most 4"
    assert err.got == f"length {len(label)}"


def test_tuple_longer_than_its_length_bound_is_rejected() -> None:
    err = schema_error(Bounded, {"items": [1, 2, 3]})
    assert (err.path, err.got) == ("items", "length 3")


def test_literal_accepts_one_of_its_choices() -> None:
    assert build(Choice, {"mode": "slow"}).mode == "slow"


def test_literal_rejects_anything_else() -> None:
    err = schema_error(Choice, {"mode": "medium"})
    assert err.path == "mode"
    assert err.expected == "one of ['fast', 'slow']"
    assert err.got == "'medium'"


def test_optional_field_accepts_none_and_a_value() -> None:
    assert build(MaybeLimit, {"limit": None}).limit is None
    assert build(MaybeLimit, {"limit": 4}).limit == 4
    assert build(MaybeLimit, {}).limit is None


def test_optional_field_rejects_a_wrong_type_naming_its_inner_type() -> None:
    err = schema_error(MaybeLimit, {"limit": "many"})
    assert (err.path, err.expected) == ("limit", "an integer")


def test_tuple_of_ints_is_built_from_a_list() -> None:
    assert build(Ints, {"values": [1, 2, 3]}).values == (1, 2, 3)


def test_tuple_of_ints_names_the_index_of_a_bad_item() -> None:
    err = schema_error(Ints, {"values": [1, "2", 3]})
    assert err.path == "values[1]"


def test_tuple_rejects_a_non_list() -> None:
    err = schema_error(Ints, {"values": 3})
    assert (err.path, err.expected) == ("values", "a list")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_float_is_refused_by_default(value: float) -> None:
    err = schema_error(Loose, {"strict": value})
    assert (err.path, err.expected) == ("strict", "a finite number")


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_float_is_accepted_where_allowed(value: float) -> None:
    built = build(Loose, {"loose": value})
    assert math.isnan(built.loose) if math.isnan(value) else built.loose == value


def test_value_error_in_post_init_becomes_schema_error_at_the_dataclass_path() -> None:
    err = schema_error(Holder, {"interval": {"low": 5, "high": 1}})
    assert err.path == "interval"
    assert err.expected == "a consistent Interval"
    assert err.got == "low (5) is above high (1)"
    assert isinstance(err.__cause__, ValueError)


def test_long_strings_are_shortened_in_errors() -> None:
    err = schema_error(Choice, {"mode": "z" * 500})
    assert len(err.got) < 50


# --- to_plain ----------------------------------------------------------------------------------


def test_to_plain_round_trips_through_build() -> None:
    data = {
        "name": "run",
        "bounded": {"alpha": 0.75, "label": "ab", "items": [4, 5]},
        "choice": {"mode": "fast"},
        "ints": {"values": [1, -2]},
        "extra": {"k": 1.5},
        "limit": None,
    }
    built = build(Everything, data)
    assert to_plain(built) == data
    assert build(Everything, to_plain(built)) == built
