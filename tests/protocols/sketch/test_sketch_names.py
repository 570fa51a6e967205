"""Sketch results call the attributes by the data's column names (the schema's features in a
marketplace described by its public schema, else the columns of the data): the report's
``map.attributes``, the projection notes printed with it, the saved sketch files and `marketplace
sketch`. The generic x0, x1, ... stay only where nothing names them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from marketplace import plugins
from marketplace.protocols.sketch import SketchRelease
from marketplace.protocols.sketch.consumer import attribute_name, projection_notes
from marketplace.protocols.sketch.public import attribute_names
from marketplace.scenario import parse_scenario

SCHEMA = {
    "features": [{"name": "age", "lower": 0, "upper": 100}, {"name": "systolic", "lower": 60, "upper": 220}],
    "label": {"name": "readmitted", "classes": [0, 1]},
}


def scenario(**sketch):
    raw = {"name": "h", "protocol": "sketch", "parties": {"owners": 2}, "data": {"schema": SCHEMA}, "sketch": sketch}
    return parse_scenario(raw, source="h.yaml", base_dir=Path.cwd()).config


class Part:
    feature_names = ("a", "b")


def test_the_schema_names_the_attributes_and_the_label_when_it_is_sketched():
    assert attribute_names(scenario()) == ("age", "systolic")
    assert attribute_names(scenario(include_label=True)) == ("age", "systolic", "readmitted")


def test_the_datas_columns_name_them_without_a_schema_and_nothing_gives_none():
    from marketplace.data.dataset import Dataset
    from marketplace.parties import make_world
    from scenarios import sketch_raw

    config = parse_scenario(sketch_raw(dim=2), source="s.yaml", base_dir=Path.cwd()).config
    world = make_world(config, plugins.exchange(config.protocol))
    assert isinstance(world.validation, Dataset)
    assert attribute_names(config, world) == ("f0", "f1")
    assert attribute_names(config) is None
    assert attribute_names(config, Part()) is None  # not a dataset: nothing names them


def test_projection_notes_use_the_names_and_x_j_only_without_them():
    moved = {"cdf": {"changed": True, "attributes": [0, 1], "max_change": 0.5}}
    assert projection_notes(moved, ("age", "systolic")) == ["cdf in age, systolic: largest change 0.5"]
    assert projection_notes(moved) == ["cdf in x0, x1: largest change 0.5"]
    assert attribute_name(("age",), 3) == "x3"  # an index past the names given: the generic name


def test_a_sketch_file_keeps_the_names_and_an_unnamed_one_reads_back_unnamed(tmp_path):
    base = {
        "numerator": np.ones(4),
        "count": 10.0,
        "numerator_variance": 1.0,
        "count_variance": 1.0,
        "map_fingerprint": "abc",
        "epsilon": 1.0,
        "delta": 0.0,
        "mechanism": "laplace",
    }
    named = SketchRelease(**base, attributes=("age", "systolic")).save(tmp_path / "named.npz")
    assert SketchRelease.load(named).attributes == ("age", "systolic")
    assert SketchRelease.load(SketchRelease(**base).save(tmp_path / "plain.npz")).attributes == ()
    old = tmp_path / "old.npz"  # a file saved before the names were kept
    with np.load(named) as archive:
        np.savez(old, **{k: archive[k] for k in archive.files if k != "attributes"})
    assert SketchRelease.load(old).attributes == ()
    with pytest.raises(TypeError, match="'attributes' parameter of SketchRelease must be a sequence of non-empty str"):
        SketchRelease(**base, attributes=("age", ""))
