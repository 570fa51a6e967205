"""One reader of a party's .npz, for a simulated marketplace's owner (load_owner_file) and a
schema-described one (load_own_rows): the same refusal, worded the same way, through both."""

from __future__ import annotations

import numpy as np
import pytest

from marketplace.data.npz_file import read_npz
from marketplace.data.own_files import OwnDataError, ReadLimits, load_own_rows
from marketplace.data.public_schema import DataSchema
from marketplace.parties import load_owner_file
from marketplace.schema import build

SCHEMA = {
    "features": [{"name": "age", "lower": 0, "upper": 120}, {"name": "dose", "lower": -1, "upper": 1}],
    "label": {"name": "outcome", "classes": [0, 1]},
}


def schema(**changes) -> DataSchema:
    return build(DataSchema, {**SCHEMA, **changes})


@pytest.mark.parametrize(
    ("arrays", "problem"),
    [
        ({"X": np.zeros((2, 2))}, "expected arrays 'X', 'y', found arrays ['X']"),
        ({"X": np.array([["a", "b"]]), "y": np.array([0])}, "array X: expected numbers, found dtype <U1"),
        ({"X": np.zeros((2, 2)), "y": np.zeros(3)}, "array y: expected shape (2,), one value per row of X"),
        ({"X": np.array([[1.0, np.nan]]), "y": np.zeros(1)}, "array X: row 0, column "),
    ],
)
def test_both_readers_refuse_a_bad_npz_with_the_same_words(tmp_path, arrays, problem):
    path = tmp_path / "o.npz"
    np.savez(path, **arrays)
    with pytest.raises(ValueError) as simulated:
        load_owner_file(str(path))
    with pytest.raises(OwnDataError) as described:
        load_own_rows(path, schema(), party="owner-1")
    assert str(simulated.value).startswith(f"{path}: {problem}")
    assert str(described.value).startswith(f"owner-1: {path}: {problem}")


def test_an_object_array_is_refused_without_being_loaded(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, X=np.zeros((2, 2)), y=np.array([0, {"a": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"o\.npz: array y: expected plain numbers \(or text labels\), found Python"):
        read_npz(path)


def test_float_labels_must_be_whole_numbers_and_are_named_by_their_row(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, X=np.zeros((3, 2)), y=np.array([0.0, 1.0, 1.5]))
    with pytest.raises(
        ValueError, match=r"^o\.npz: array y: row 2: expected an integer class label, found a value that is not a whole"
    ):
        read_npz(path, source="o.npz")
    np.savez(path, X=np.zeros((3, 2)), y=np.array([0.0, 1.0, 1.0]))
    assert read_npz(path).y.dtype == np.int64


def test_against_a_schema_the_group_array_and_the_row_limit_are_checked(tmp_path):
    path = tmp_path / "o.npz"
    np.savez(path, X=np.zeros((3, 2)), y=np.array([0, 1, 1]))
    grouped = schema(group={"name": "site", "values": ["a", "b"]})
    with pytest.raises(
        OwnDataError, match=r"expected arrays 'X', 'y', 'group' \(the schema has a group column 'site'\)"
    ):
        load_own_rows(path, grouped, party="owner-1")
    with pytest.raises(OwnDataError, match=r"array X: expected at most 2 rows, found 3; raise it with --max-rows"):
        load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_rows=2))
    np.savez(path, X=np.zeros((3, 2)), y=np.array([0, 1, 1]), group=np.array(["a", "b", "c"]))
    with pytest.raises(OwnDataError, match=r"array group: row 2: expected one of the schema's group values"):
        load_own_rows(path, grouped, party="owner-1")
    np.savez(path, X=np.zeros((3, 2)), y=np.array([0, 1, 1]), group=np.array(["x", "y", "z"]))
    assert load_own_rows(path, schema(), party="owner-1").group.tolist() == [0, 1, 1]  # no group column: the classes
