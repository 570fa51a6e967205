"""A party's own file, checked against the marketplace's public schema: what is read, and every
kind of bad file refused with its file, line, column, what was expected and what kind of thing was
found, never the value itself."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from marketplace.data.config import DataConfig
from marketplace.data.own_files import OwnDataError, ReadLimits, load_own_rows, parse_data_files
from marketplace.data.public_schema import DataSchema, schema_world
from marketplace.schema import SchemaError, build

SCHEMA = {
    "features": [{"name": "age", "lower": 0, "upper": 120}, {"name": "dose", "lower": -1, "upper": 1}],
    "label": {"name": "outcome", "classes": ["healed", "not"]},
}


def schema(**changes) -> DataSchema:
    return build(DataSchema, {**SCHEMA, **changes})


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_csv_is_read_in_the_schemas_column_order_and_classes(tmp_path):
    path = write(tmp_path / "o.csv", "dose,extra,outcome,age\n0.5,x,not,40\n\n-1,y,healed,7\n")
    rows = load_own_rows(path, schema(), party="owner-1")
    assert rows.X.tolist() == [[40.0, 0.5], [7.0, -1.0]]
    assert rows.y.tolist() == [1, 0]
    assert rows.feature_names == ("age", "dose")
    assert rows.group_names == ("healed", "not")


def test_integer_classes_keep_their_values(tmp_path):
    path = write(tmp_path / "o.csv", "age,dose,outcome\n1,0,7\n2,0,3\n")
    rows = load_own_rows(path, schema(label={"name": "outcome", "classes": [3, 7]}), party="owner-1")
    assert rows.y.tolist() == [7, 3]


def test_a_group_column_gives_the_groups(tmp_path):
    path = write(tmp_path / "o.csv", "age,dose,outcome,site\n1,0,not,b\n2,0,healed,a\n")
    rows = load_own_rows(path, schema(group={"name": "site", "values": ["a", "b"]}), party="owner-1")
    assert rows.group.tolist() == [1, 0] and rows.group_names == ("a", "b")


@pytest.mark.parametrize(
    "text, where, expected, found",
    [
        ("age,dose,outcome\n40,0.5,not\n130,0,not\n", "line 3, column 'age'", "[0, 120]", "found one outside it"),
        (
            "age,dose,outcome\n40,0.5,maybe\n",
            "line 2, column 'outcome'",
            "one of the schema's classes",
            "found a value that is not one of them",
        ),
        ("age,dose,outcome\n40,abc,not\n", "line 2, column 'dose'", "a number", "found text that is not a number"),
        ("age,dose,outcome\n40,,not\n", "line 2, column 'dose'", "a number", "a missing value"),
        ("age,dose,outcome\n40,0.5\n", "line 2", "the header has 3", "2 fields"),
        ("age,outcome\n40,not\n", "line 1", "the schema's columns", "no ['dose']"),
        ("", "", "a header row", "empty"),
        ("age,dose,outcome\n", "", "at least one row", "none"),
    ],
)
def test_each_bad_row_is_refused_naming_party_file_line_column_expected_and_found(
    tmp_path, text, where, expected, found
):
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(OwnDataError) as err:
        load_own_rows(path, schema(), party="owner-3")
    message = str(err.value)
    assert message.startswith(f"owner-3: {path}")
    for part in (where, expected, found):
        assert part in message


@pytest.mark.parametrize(
    "text, value, where",
    [
        ("age,dose,outcome\n12,0.5,not\n37.123456,0.25,not\n", "37.123456", "line 3, column 'age'"),
        ("age,dose,outcome\n12,0.5,not\n12,-3.0625,not\n", "3.0625", "line 3, column 'dose'"),
        ("age,dose,outcome\n12,dose-of-4mg,not\n", "4mg", "line 2, column 'dose'"),
        ("age,dose,outcome\n12,0.5,relapsed-2021\n", "relapsed", "line 2, column 'outcome'"),
    ],
)
def test_a_refusal_names_the_line_and_column_but_never_the_value(tmp_path, text, value, where):
    narrow = schema(features=[{"name": "age", "lower": 0, "upper": 30}, {"name": "dose", "lower": -1, "upper": 1}])
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(OwnDataError) as err:
        load_own_rows(path, narrow, party="owner-1")
    assert where in str(err.value)
    assert value not in str(err.value)


def test_a_served_owners_decline_reason_for_a_value_outside_the_schema_does_not_carry_the_value(tmp_path):
    """What a served owner's agent sends the server when its file is refused at a session
    (``Agent._join`` sends :func:`declared_reason` of :class:`OwnRowsCache`'s error, carried by
    ``SessionDeclined`` into the session's report): the declared reason, not the error's text, which
    names the line and column for the owner's own log."""
    from marketplace.scenario import Scenario
    from marketplace.service.declines import OWN_DATA_REFUSED, declared_reason
    from marketplace.service.worlds import OwnRowsCache

    market = {
        "name": "own",
        "protocol": "sketch",
        "parties": {"owners": 2},
        "data": {"schema": {**SCHEMA, "features": [{"name": "age", "lower": 0, "upper": 30}, SCHEMA["features"][1]]}},
    }
    scenario = Scenario.from_dict(market, source="market")
    path = write(tmp_path / "owner-1.csv", "age,dose,outcome\n12,0.5,not\n37.123456,0.25,healed\n")
    with pytest.raises(OwnDataError) as err:
        OwnRowsCache().get(scenario, "owner-1", path, ReadLimits())
    assert "line 3, column 'age'" in str(err.value)  # the owner's own log says where
    assert "37.123456" not in str(err.value) and "37.12" not in str(err.value)
    assert declared_reason(err.value) == OWN_DATA_REFUSED  # the other parties learn only that it does not fit


def test_a_declines_reason_is_declared_by_kind():
    from marketplace.privacy.lifetime.cost import BudgetDeclined
    from marketplace.scenario import ScenarioError
    from marketplace.service.declines import OWN_DATA_REFUSED, declared_reason

    refused = OwnDataError("owner-1: /home/me/secret.csv: line 9, column 'age': 3 values")
    assert declared_reason(refused) == OWN_DATA_REFUSED
    budget = BudgetDeclined(
        "owner-1 declines request r-1: 0.5 of 10 eps left, the request needs 1",
        owner="owner-1",
        request_id="r-1",
        cost=None,
        remaining=None,  # type: ignore[arg-type]
        filter="fcfs",
    )
    assert declared_reason(budget) == f"BudgetDeclined: {budget}"  # about the ledger, not the data
    assert declared_reason(ScenarioError("request", "sketch.samples", "expected at least 1, got 0")).startswith(
        "ScenarioError: "
    )
    assert declared_reason(RuntimeError("x = 41.5 in /home/me")) == "RuntimeError (its agent's log has the details)"


def test_outside_clip_clips_into_the_public_range(tmp_path):
    path = write(tmp_path / "o.csv", "age,dose,outcome\n130,-5,not\n")
    rows = load_own_rows(path, schema(outside="clip"), party="owner-1")
    assert rows.X.tolist() == [[120.0, -1.0]]


def test_an_npz_with_text_classes_and_one_with_integer_labels(tmp_path):
    np.savez(tmp_path / "a.npz", X=np.array([[1.0, 0.0], [2.0, 0.5]]), y=np.array(["not", "healed"]))
    assert load_own_rows(tmp_path / "a.npz", schema(), party="owner-1").y.tolist() == [1, 0]
    np.savez(tmp_path / "b.npz", X=np.array([[1.0, 0.0]]), y=np.array([7]))
    rows = load_own_rows(tmp_path / "b.npz", schema(label={"name": "outcome", "classes": [3, 7]}), party="owner-1")
    assert rows.y.tolist() == [7]


def test_an_npz_of_the_wrong_width_is_refused(tmp_path):
    np.savez(tmp_path / "w.npz", X=np.zeros((2, 3)), y=np.array(["not", "not"]))
    with pytest.raises(
        OwnDataError, match=r"w\.npz: array X: expected shape \(n, 2\), at least one row .*found shape \(2, 3\)"
    ):
        load_own_rows(tmp_path / "w.npz", schema(), party="owner-1")


def test_an_unknown_suffix_and_a_missing_file_are_refused(tmp_path):
    with pytest.raises(OwnDataError, match="expected a file named"):
        load_own_rows(write(tmp_path / "o.json", "{}"), schema(), party="owner-1")
    with pytest.raises(OwnDataError, match="no such file"):
        load_own_rows(tmp_path / "nope.csv", schema(), party="owner-1")


def test_the_row_limit_names_the_option(tmp_path):
    path = write(tmp_path / "o.csv", "age,dose,outcome\n" + "1,0,not\n" * 11)
    with pytest.raises(OwnDataError, match=r"more than 10 rows.*--max-rows"):
        load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_rows=10))
    assert len(load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_rows=11))) == 11


def test_a_gzip_that_inflates_past_the_byte_limit_is_stopped_while_reading(tmp_path):
    path = tmp_path / "bomb.csv.gz"
    with gzip.open(path, "wb") as f:
        f.write(b"age,dose,outcome,note\n")
        for _ in range(64):
            f.write((b"1,0,not," + b"x" * 500 + b"\n") * 1024)  # 33 MB inflated, a few kB on disk
    assert path.stat().st_size < 100_000
    with pytest.raises(
        OwnDataError, match=r"more than 1000000 bytes .* once decompressed, the limit; raise the limit with --max-bytes"
    ):
        load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_bytes=1_000_000))


def test_a_field_over_the_field_limit_is_a_clear_error(tmp_path):
    path = write(tmp_path / "o.csv", "age,dose,outcome\n1,0," + "x" * 5000 + "\n")
    with pytest.raises(OwnDataError, match=r"line \d+: a field longer than 1000 characters.*--max-field-chars"):
        load_own_rows(path, schema(), party="owner-1", limits=ReadLimits(max_field_chars=1000))


def test_data_files_by_party_by_folder_or_one_file(tmp_path):
    (tmp_path / "owner-1.csv").write_text("")
    (tmp_path / "owner-2.npz").write_text("")
    assert parse_data_files(str(tmp_path), ["owner-1", "owner-2"]) == {
        "owner-1": tmp_path / "owner-1.csv",
        "owner-2": tmp_path / "owner-2.npz",
    }
    assert parse_data_files("owner-2=b.csv, owner-1=a.csv", ["owner-1", "owner-2"]) == {
        "owner-2": Path("b.csv"),
        "owner-1": Path("a.csv"),
    }
    assert parse_data_files("a.csv", ["owner-4"]) == {"owner-4": Path("a.csv")}
    for text, why in (
        ("a.csv", "one file for 2 parties"),
        ("owner-1=a.csv", "no file for owner-2"),
        ("owner-9=a.csv,owner-1=b.csv", "not one of the parties"),
        (str(tmp_path / "x"), "one file"),
    ):
        with pytest.raises(ValueError, match=why):
            parse_data_files(text, ["owner-1", "owner-2"])
    with pytest.raises(ValueError, match="expected one file named owner-3.csv"):
        parse_data_files(str(tmp_path), ["owner-1", "owner-3"])


def test_a_schema_and_a_source_are_not_given_together():
    with pytest.raises(SchemaError, match="source: expected no source beside schema"):
        build(DataConfig, {"schema": SCHEMA, "source": {"kind": "digits"}})
    with pytest.raises(SchemaError, match="seed_set.size: expected 0"):
        build(DataConfig, {"schema": SCHEMA, "seed_set": {"size": 10}})
    assert build(DataConfig, {"schema": SCHEMA}).seed_set.size == 0


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"features": [{"name": "a", "lower": 1, "upper": 1}]}, "lower must be below upper"),
        (
            {"features": [{"name": "a", "lower": 0, "upper": 1}, {"name": "a", "lower": 0, "upper": 1}]},
            "each name once",
        ),
        ({"label": {"name": "age", "classes": [0, 1]}}, "distinct names"),
        ({"label": {"name": "outcome", "classes": [0, 0]}}, "each class once"),
        ({"features": []}, "length of at least 1"),
    ],
)
def test_a_bad_schema_is_refused_naming_the_key(bad, message):
    with pytest.raises(SchemaError, match=message):
        build(DataSchema, {**SCHEMA, **bad})


def test_the_world_of_a_schema_only_marketplace_holds_no_rows():
    world = schema_world(schema(), 3)
    assert world.central is False and len(world.owners) == 3 and world.dim == 2
    assert all(len(part) == 0 for part in (*world.owners, world.validation, world.test, world.seed_set))
