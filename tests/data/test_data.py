"""Tests of marketplace.data: datasets, sources, partitions and the world every party rebuilds."""

from __future__ import annotations

import gzip
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import needs_data
from hypothesis import given, settings
from hypothesis import strategies as st

from marketplace.data import (
    AdultSource,
    ConsumerConfig,
    CovariateShiftSource,
    CsvSource,
    DataConfig,
    Dataset,
    MnistSource,
    PartitionConfig,
    SeedSetConfig,
    SourceConfig,
    World,
    assign_by_distance,
    attribute_distance_probabilities,
    build_world,
    check_source_available,
    draw_anchors,
    load_source,
    partition_attribute_distance,
    partition_by_group,
    partition_even,
    partition_target_to_one,
    world_summary,
)
from marketplace.datasets import ChecksumMismatch, DatasetMissing, data_home
from marketplace.schema import SchemaError


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def assert_partition(shares: list[np.ndarray], n: int, k: int) -> None:
    """K sorted, disjoint index arrays that together cover 0..n-1."""
    assert len(shares) == k
    for share in shares:
        assert share.dtype == np.int64
        assert np.all(np.diff(share) > 0)
    joined = np.concatenate(shares) if shares else np.empty(0, dtype=np.int64)
    assert np.array_equal(np.sort(joined), np.arange(n))


def binomial_ok(successes: int, trials: int, p: float, sigmas: float = 5.0) -> bool:
    """Whether a binomial count lies within ``sigmas`` standard deviations of its mean."""
    sd = np.sqrt(trials * p * (1 - p))
    return abs(successes - trials * p) <= sigmas * sd + 1e-9


def small_config(**consumer: int) -> DataConfig:
    """Covariate-shift data small enough for fast tests."""
    source = SourceConfig(covariate_shift=CovariateShiftSource(dim=4, components=5, rows_per_component=400))
    sizes = {"validation_size": 40, "test_size": 60, **consumer}
    return DataConfig(source=source, consumer=ConsumerConfig(target_groups=(0,), target_share=0.5, **sizes))


def world_parts(world: World) -> list[Dataset]:
    return [*world.owners, world.validation, world.test, world.seed_set]


def write_csv(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def id_csv(path: Path, n_per_group: int = 200, groups: int = 4) -> Path:
    """A CSV whose `id` column names each row, so world parts can be checked for shared rows."""
    lines = ["id,x,region,label"]
    for i in range(n_per_group * groups):
        lines.append(f"{i},{(i * 7919) % 1000 / 10.0},r{i % groups},{'yes' if i % 3 else 'no'}")
    return write_csv(path, "\n".join(lines) + "\n")


# --------------------------------------------------------------------------- Dataset


def test_dataset_arrays_are_read_only_copies_with_fixed_dtypes():
    X = np.arange(6).reshape(3, 2)
    data = Dataset(X=X, y=[0, 1, 0], group=[0, 0, 1], feature_names=("a", "b"), group_names=("g0", "g1"), name="t")
    assert data.X.dtype == np.float64 and data.y.dtype == np.int64 and data.group.dtype == np.int64
    assert data.X.flags.c_contiguous and not data.X.flags.writeable
    X[0, 0] = 99
    assert data.X[0, 0] == 0


def test_dataset_take_keeps_metadata():
    data = Dataset(
        X=np.eye(3), y=[0, 1, 2], group=[0, 1, 1], feature_names=("a", "b", "c"), group_names=("p", "q"), name="t"
    )
    part = data.take(np.array([2, 0]))
    assert len(part) == 2 and part.dim == 3
    assert part.y.tolist() == [2, 0] and part.group_names == ("p", "q") and part.name == "t"
    assert len(data.take([])) == 0


def test_dataset_refuses_group_ids_without_names():
    with pytest.raises(ValueError, match="group ids"):
        Dataset(X=np.eye(2), y=[0, 1], group=[0, 2], feature_names=("a", "b"), group_names=("p", "q"), name="t")


# --------------------------------------------------------------------------- partitions


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 300), k=st.integers(1, 9), seed=st.integers(0, 2**32 - 1))
def test_even_partition_covers_disjointly_with_sizes_within_one(n, k, seed):
    shares = partition_even(n, k, rng(seed))
    assert_partition(shares, n, k)
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1


@settings(max_examples=40, deadline=None)
@given(
    groups=st.lists(st.integers(0, 12), max_size=300),
    k=st.integers(1, 6),
    skew=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_by_group_partition_covers_disjointly(groups, k, skew, seed):
    assert_partition(partition_by_group(np.array(groups, dtype=np.int64), k, skew, rng(seed)), len(groups), k)


def test_by_group_with_full_skew_gives_each_owner_exactly_its_favoured_groups():
    groups = rng(1).integers(0, 7, size=500)
    shares = partition_by_group(groups, 3, 1.0, rng(2))
    for i, share in enumerate(shares):
        assert np.array_equal(share, np.flatnonzero(groups % 3 == i))


def test_by_group_sends_a_row_to_its_favouring_owner_with_probability_skew_plus_uniform_share():
    groups = np.zeros(20_000, dtype=np.int64)
    k, skew = 4, 0.6
    shares = partition_by_group(groups, k, skew, rng(3))
    assert binomial_ok(len(shares[0]), groups.size, skew + (1 - skew) / k)
    for share in shares[1:]:
        assert binomial_ok(len(share), groups.size, (1 - skew) / k)


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(st.floats(-100, 100), min_size=0, max_size=200),
    k=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
def test_attribute_distance_partition_covers_disjointly(values, k, seed):
    assert_partition(partition_attribute_distance(np.array(values), k, rng(seed)), len(values), k)


def test_attribute_distance_is_anchors_then_assignment_with_anchors_in_range():
    values = rng(4).normal(size=300)
    k = 5
    expected_rng = rng(5)
    anchors = draw_anchors(values, k, expected_rng)
    assert np.all((anchors >= values.min()) & (anchors <= values.max()))
    expected = assign_by_distance(values, anchors, expected_rng)
    actual = partition_attribute_distance(values, k, rng(5))
    assert all(np.array_equal(a, e) for a, e in zip(actual, expected))


def test_attribute_distance_probabilities_are_proportional_to_inverse_distance():
    p = attribute_distance_probabilities(np.array([0.25, 0.5, 0.9, 0.0, 1.0]), np.array([0.0, 1.0]))
    assert np.allclose(p[:3, 0], [0.75, 0.5, 0.1])
    assert np.allclose(p[3:], [[1.0, 0.0], [0.0, 1.0]])
    assert np.allclose(p.sum(axis=1), 1.0)


def test_rows_closer_to_an_anchor_go_to_its_owner_at_the_exact_rate():
    n = 4000
    points = {0.25: 0.75, 0.5: 0.5, 0.9: 0.1}
    values = np.repeat(list(points), n)
    shares = assign_by_distance(values, np.array([0.0, 1.0]), rng(6))
    to_first = np.zeros(values.size, dtype=bool)
    to_first[shares[0]] = True
    for j, (x, p_first) in enumerate(points.items()):
        assert binomial_ok(int(to_first[j * n : (j + 1) * n].sum()), n, p_first), x


def test_a_row_equal_to_an_anchor_goes_to_that_owner():
    shares = assign_by_distance(np.array([0.0, 1.0, 1.0, 0.0]), np.array([0.0, 1.0]), rng(7))
    assert shares[0].tolist() == [0, 3] and shares[1].tolist() == [1, 2]


def test_constant_attribute_spreads_rows_over_all_owners():
    shares = partition_attribute_distance(np.full(3000, 2.5), 3, rng(8))
    assert all(binomial_ok(len(s), 3000, 1 / 3) for s in shares)


# --------------------------------------------------------------------------- sources


def test_covariate_shift_has_the_configured_shape_groups_and_balanced_labels():
    cfg = CovariateShiftSource(dim=5, components=4, rows_per_component=300)
    data = load_source(SourceConfig(covariate_shift=cfg), rng(9))
    assert data.X.shape == (1200, 5)
    assert data.group_counts().tolist() == [300] * 4
    assert data.group_names[3] == "component-3" and data.feature_names[0] == "f0"
    assert 0.4 < data.y.mean() < 0.6


def test_covariate_shift_matters_to_a_linear_classifier():
    from sklearn.svm import LinearSVC

    cfg = CovariateShiftSource(dim=10, components=6, rows_per_component=600, label_noise=0.05)
    data = load_source(SourceConfig(covariate_shift=cfg), rng(10))
    target = np.flatnonzero(data.group == 0)
    train_target, test_target = target[:300], target[300:]
    other = rng(11).choice(np.flatnonzero(data.group != 0), size=300, replace=False)

    def accuracy(train: np.ndarray) -> float:
        model = LinearSVC().fit(data.X[train], data.y[train])
        return float(model.score(data.X[test_target], data.y[test_target]))

    on_target, off_target = accuracy(train_target), accuracy(other)
    assert on_target > 0.85
    assert on_target > off_target + 0.15


def test_digits_loads_scaled_with_digit_groups():
    data = load_source(SourceConfig(kind="digits"), rng())
    assert data.X.shape == (1797, 64)
    assert 0.0 <= data.X.min() and data.X.max() <= 1.0
    assert np.array_equal(data.group, data.y) and len(data.group_names) == 10


def test_csv_maps_string_labels_and_groups(tmp_path):
    path = write_csv(
        tmp_path / "people.csv",
        "age,height,city,label\n30,1.8,paris,yes\n40,1.9,rome,no\n50,1.7,rome,yes\n25,1.5,paris,no\n",
    )
    data = load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label", group="city")), rng())
    assert data.feature_names == ("age", "height")  # the text column city is not a feature
    assert data.X.tolist() == [[30, 1.8], [40, 1.9], [50, 1.7], [25, 1.5]]
    assert data.y.tolist() == [1, 0, 1, 0]  # sorted labels: no -> 0, yes -> 1
    assert data.group_names == ("paris", "rome") and data.group.tolist() == [0, 1, 1, 0]


PEOPLE = "age,height,weight,label\n30,1.8,70,yes\n40,1.9,80,no\n50,1.7,60,yes\n"


@pytest.mark.parametrize(
    "line, column, cell",
    [
        (3, "height", "NA"),
        (3, "height", ""),
        (4, "age", "?"),
        (2, "weight", "n/a"),
        (2, "weight", "NULL"),
        (4, "label", ""),  # a missing label
    ],
)
def test_csv_a_missing_cell_is_refused_naming_file_line_and_column(tmp_path, line, column, cell):
    """No row and no column is lost without a word: an `NA` cell used to drop its whole feature
    column, an empty cell or a missing label its row."""
    lines = PEOPLE.splitlines()
    header = lines[0].split(",")
    fields = lines[line - 1].split(",")
    fields[header.index(column)] = cell
    lines[line - 1] = ",".join(fields)
    path = write_csv(tmp_path / "people.csv", "\n".join(lines) + "\n")
    with pytest.raises(
        ValueError, match=rf"people\.csv: line {line}, column '{column}': missing value '{re.escape(cell)}'"
    ):
        load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label")), rng())


def test_csv_counts_every_missing_cell_in_its_error(tmp_path):
    path = write_csv(tmp_path / "d.csv", "a,b,label\n1,NA,0\n,2,1\n3,4,\n")
    with pytest.raises(
        ValueError, match=r"line 2, column 'b': missing value 'NA' \(3 missing cells in the columns used\)"
    ):
        load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label")), rng())


def test_csv_a_missing_cell_in_an_unused_column_is_no_problem(tmp_path):
    path = write_csv(tmp_path / "d.csv", "a,b,note,label\n1,2,,0\n3,4,NA,1\n")
    data = load_source(
        SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label", features=("a", "b"))), rng()
    )
    assert data.X.tolist() == [[1, 2], [3, 4]]


def test_csv_a_column_mixing_numbers_and_text_is_refused_not_dropped(tmp_path):
    path = write_csv(tmp_path / "d.csv", "a,b,label\n1,2,0\n3,abc,1\n5,6,0\n")
    with pytest.raises(
        ValueError, match=r"d\.csv: line 3, column 'b': 'abc' is not a number, but the column's other values are"
    ):
        load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label")), rng())


def test_csv_a_value_too_large_for_the_protocols_is_refused(tmp_path):
    path = write_csv(tmp_path / "d.csv", "a,b,label\n1,2,0\n3,-1e300,1\n")
    with pytest.raises(ValueError, match=r"d\.csv: line 3, column 'b' holds a value too large"):
        load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label")), rng())


def test_csv_without_group_column_groups_by_label_and_keeps_integer_labels(tmp_path):
    path = write_csv(tmp_path / "d.csv", "a;b;y\n1;2;3\n4;5;10\n6;7;3\n")
    data = load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="y", delimiter=";")), rng())
    assert data.y.tolist() == [3, 10, 3]
    assert data.group_names == ("3", "10") and data.group.tolist() == [0, 1, 0]


def test_csv_non_numeric_feature_names_file_column_and_line(tmp_path):
    path = write_csv(tmp_path / "bad.csv", "a,b,label\n1,2,x\n3,oops,y\n")
    cfg = CsvSource(path=str(path), label="label", features=("a", "b"))
    with pytest.raises(ValueError, match=r"bad\.csv.*column 'b', line 3: 'oops'"):
        load_source(SourceConfig(kind="csv", csv=cfg), rng())


def test_csv_may_be_gzip_compressed(tmp_path):
    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress(b"a,label\n1.5,x\n2.5,y\n"))
    data = load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label")), rng())
    assert data.X.ravel().tolist() == [1.5, 2.5] and data.y.tolist() == [0, 1]


def test_csv_without_numeric_features_is_refused(tmp_path):
    path = write_csv(tmp_path / "d.csv", "name,label\nann,1\nbob,0\n")
    with pytest.raises(ValueError, match="no numeric feature column"):
        load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label")), rng())


def test_csv_unknown_column_is_named(tmp_path):
    path = write_csv(tmp_path / "d.csv", "a,label\n1,x\n")
    with pytest.raises(ValueError, match="no column named \\['nope'\\]"):
        load_source(SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label", group="nope")), rng())


def test_missing_files_are_reported_at_their_config_path(tmp_path, monkeypatch):
    missing = str(tmp_path / "absent.csv")
    with pytest.raises(SchemaError) as err:
        check_source_available(SourceConfig(kind="csv", csv=CsvSource(path=missing, label="y")))
    assert err.value.path == "data.source.csv.path" and err.value.got == repr(missing)
    monkeypatch.setenv("MARKETPLACE_DATA", str(tmp_path))
    with pytest.raises(
        DatasetMissing, match=r"dataset 'adult' is not in the data cache .*marketplace data fetch adult"
    ):
        check_source_available(SourceConfig(kind="adult"))
    with pytest.raises(DatasetMissing, match="marketplace data fetch mnist"):
        check_source_available(SourceConfig(kind="mnist"))
    check_source_available(SourceConfig())  # generated and bundled sources need no files


@pytest.mark.data
@needs_data("mnist")
def test_a_tampered_cached_file_is_refused_before_use(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    shutil.copytree(data_home() / "mnist", cache / "mnist")
    labels = cache / "mnist" / "t10k-labels-idx1-ubyte.gz"
    tampered = bytearray(labels.read_bytes())
    tampered[-1] ^= 0x01
    labels.write_bytes(bytes(tampered))
    monkeypatch.setenv("MARKETPLACE_DATA", str(cache))
    with pytest.raises(ChecksumMismatch, match=r"t10k-labels-idx1-ubyte.gz: expected 4542 bytes with SHA-256 fc607395"):
        load_source(SourceConfig(kind="mnist"), rng())


@pytest.mark.data
@needs_data("adult")
def test_adult_loads_complete_rows_one_hot_and_standardised():
    data = load_source(SourceConfig(kind="adult"), rng())
    assert data.X.shape == (45_222, 104)  # 30,162 + 15,060 rows without '?'
    assert data.group_names == ("Amer-Indian-Eskimo", "Asian-Pac-Islander", "Black", "Other", "White")
    assert 0.24 < data.y.mean() < 0.25
    age = data.X[:, data.feature_names.index("age")]
    assert abs(age.mean()) < 1e-9 and abs(age.std() - 1) < 1e-9
    sex = [data.feature_names.index("sex=Female"), data.feature_names.index("sex=Male")]
    assert np.all(data.X[:, sex].sum(axis=1) == 1)


def test_adult_group_must_be_categorical():
    cfg = SourceConfig(kind="adult", adult=AdultSource(group="age"))
    with pytest.raises(SchemaError, match="race") as err:
        check_source_available(cfg)
    assert err.value.path == "data.source.adult.group"


@pytest.mark.data
@needs_data("mnist")
def test_mnist_loads_the_standard_test_set():
    data = load_source(SourceConfig(kind="mnist"), rng())
    assert data.X.shape == (10_000, 784)
    assert data.group_counts().tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert abs(data.X.mean() * 255 - 33.79) < 0.01


@pytest.mark.data
@needs_data("mnist")
def test_mnist_projection_is_fixed_by_the_rng():
    cfg = SourceConfig(kind="mnist", mnist=MnistSource(project_dim=8))
    first, again, other = (load_source(cfg, rng(s)) for s in (1, 1, 2))
    assert first.X.shape == (10_000, 8)
    assert np.array_equal(first.X, again.X) and not np.allclose(first.X, other.X)


# --------------------------------------------------------------------------- world


def test_build_world_is_a_function_of_config_owners_and_seed():
    config = small_config()
    a, b, c = build_world(config, 3, 5), build_world(config, 3, 5), build_world(config, 3, 6)
    for part_a, part_b in zip(world_parts(a), world_parts(b)):
        assert np.array_equal(part_a.X, part_b.X) and np.array_equal(part_a.y, part_b.y)
    assert not np.array_equal(a.validation.X, c.validation.X)


def test_changing_the_partition_leaves_consumer_and_seed_set_unchanged():
    config = small_config()
    base = build_world(config, 3, 5)
    other = build_world(replace(config, partition=PartitionConfig(scheme="even")), 4, 5)
    for part in ("validation", "test", "seed_set"):
        assert np.array_equal(getattr(base, part).X, getattr(other, part).X)
    assert sum(map(len, base.owners)) == sum(map(len, other.owners))


def test_world_parts_are_disjoint_and_from_the_right_groups(tmp_path):
    path = id_csv(tmp_path / "ids.csv")
    source = SourceConfig(kind="csv", csv=CsvSource(path=str(path), label="label", group="region"))
    config = DataConfig(
        source=source,
        partition=PartitionConfig(scheme="attribute_distance", attribute=1),
        consumer=ConsumerConfig(target_groups=(1,), target_share=0.5, validation_size=30, test_size=50),
        seed_set=SeedSetConfig(groups=(3,), size=20),
    )
    world = build_world(config, 3, 7)
    parts = world_parts(world)
    ids = np.concatenate([part.X[:, 0] for part in parts])
    assert len(np.unique(ids)) == ids.size
    assert ids.size == 800 - (100 - 80)  # only the unused rows of the target pool are left out
    assert set(world.validation.group.tolist()) == {1} and set(world.test.group.tolist()) == {1}
    assert set(world.seed_set.group.tolist()) == {3}


def test_world_parts_share_no_row_on_generated_data():
    world = build_world(small_config(), 4, 8)
    parts = world_parts(world)
    rows = [row.tobytes() for part in parts for row in part.X]
    assert len(set(rows)) == len(rows)
    assert set(world.validation.group.tolist()) == {0} and set(world.test.group.tolist()) == {0}
    assert 0 not in world.seed_set.group.tolist() and len(world.seed_set) == 50
    assert len(world.validation) == 40 and len(world.test) == 60


def test_owners_keep_the_rest_of_the_target_groups():
    world = build_world(small_config(), 2, 9)
    target_rows_of_owners = sum(int((owner.group == 0).sum()) for owner in world.owners)
    assert target_rows_of_owners == 400 - 200  # target_share 0.5 of 400 rows set aside


def test_a_target_pool_too_small_is_explained():
    with pytest.raises(ValueError, match=r"target pool has 200 rows.*validation_size.*test_size.*= 400.*target_share"):
        build_world(small_config(validation_size=100, test_size=300), 2, 0)


def test_unknown_target_group_lists_the_available_groups():
    config = replace(small_config(), consumer=ConsumerConfig(target_groups=(9,)))
    with pytest.raises(ValueError, match=r"data\.consumer\.target_groups.*\[9\].*0 \(component-0, 400 rows\)"):
        build_world(config, 2, 0)


def test_seed_groups_must_avoid_the_target():
    config = replace(small_config(), seed_set=SeedSetConfig(groups=(0, 2)))
    with pytest.raises(ValueError, match=r"data\.seed_set\.groups.*\[0\]"):
        build_world(config, 2, 0)


def test_an_owner_left_without_rows_is_an_error():
    config = replace(small_config(), partition=PartitionConfig(scheme="by_group", skew=1.0))
    with pytest.raises(ValueError, match=r"parties.owners: owner-6, owner-7 would receive no rows"):
        build_world(config, 7, 0)


def test_world_summary_reports_sizes_and_group_histograms():
    world = build_world(small_config(), 3, 10)
    summary = world_summary(world)
    assert summary["dim"] == 4
    assert summary["validation"]["rows"] == 40 and summary["validation"]["groups"] == {"component-0": 40}
    assert sum(summary["validation"]["labels"].values()) == 40
    assert [o["rows"] for o in summary["owners"]] == [len(o) for o in world.owners]
    assert sum(summary["owners"][0]["groups"].values()) == len(world.owners[0])


def test_target_to_one_gives_every_target_row_to_the_first_owner_and_splits_the_rest_evenly():
    flags = np.array([True, False] * 10 + [False] * 5)
    shares = partition_target_to_one(flags, 4, np.random.default_rng(3))
    assert set(np.flatnonzero(flags)) <= set(shares[0].tolist())
    others = [np.setdiff1d(share, np.flatnonzero(flags)).size for share in shares]
    assert sorted(others) == [3, 4, 4, 4] and sum(others) == 15
    assert sorted(np.concatenate(shares).tolist()) == list(range(flags.size))


def test_the_papers_shape_gives_owner_1_seventy_percent_of_the_target_and_only_the_listed_groups():
    config = replace(
        small_config(validation_size=30, test_size=90),
        partition=PartitionConfig(scheme="target_to_one", groups=(1, 0)),
        consumer=ConsumerConfig(target_groups=(0,), target_share=0.3, validation_size=30, test_size=90),
        seed_set=SeedSetConfig(groups=(2,), size=20),
    )
    world = build_world(config, 4, 3)
    target_rows = [int((owner.group == 0).sum()) for owner in world.owners]
    assert target_rows == [280, 0, 0, 0]  # 70% of the 400 target rows
    assert all(set(owner.group.tolist()) <= {0, 1} for owner in world.owners)
    base_rows = [int((owner.group == 1).sum()) for owner in world.owners]
    assert base_rows == [100, 100, 100, 100]
    assert len(world.validation) == 30 and len(world.test) == 90


def test_partition_groups_must_exist():
    config = replace(small_config(), partition=PartitionConfig(scheme="even", groups=(9,)))
    with pytest.raises(ValueError, match=r"data.partition.groups: group\(s\) \[9\] hold no rows"):
        build_world(config, 2, 1)
