"""Building parties from the scenario alone, and an owner that brings its own data file."""

from __future__ import annotations

import re

import numpy as np
import pytest
import yaml
from conftest import run_cli

from marketplace import plugins
from marketplace.parties import build_role, load_owner_file, make_world, party_ids
from marketplace.protocols.summarize.public import public_features
from marketplace.scenario import parse_scenario


def test_every_party_derives_the_same_public_h1_from_the_seed(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    a, b = public_features(config, 3), public_features(config, 3)
    assert np.array_equal(a.W, b.W) and np.array_equal(a.b, b.b)


def test_party_ids_are_curator_owners_consumer(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    assert party_ids(config) == ["curator", "owner-1", "owner-2", "owner-3", "consumer"]


def test_each_party_keeps_only_its_share(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    owner = build_role(config, "owner-2", world=world, exchange=plugins.exchange(config.protocol))
    assert np.array_equal(owner.data.X, world.owners[1].X)
    assert not hasattr(owner, "validation")


def test_an_owner_can_read_its_own_npz_file(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    X = np.arange(30, dtype=float).reshape(10, 3)
    np.savez(tmp_path / "own.npz", X=X, y=np.arange(10) % 2)
    owner = build_role(
        config,
        "owner-1",
        owner_data=load_owner_file(str(tmp_path / "own.npz")),
        exchange=plugins.exchange(config.protocol),
    )
    assert np.array_equal(owner.data.X, X) and owner.phi.shape == (10, 30)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"X": np.zeros((4, 3))}, "expected arrays 'X', 'y', found arrays ['X']"),
        (
            {"X": np.zeros((4, 3)), "y": np.zeros(3)},
            "array y: expected shape (4,), one value per row of X, found shape (3,)",
        ),
        ({"X": np.full((4, 3), np.nan), "y": np.zeros(4)}, "array X: row 0, column 0 holds a value that is not finite"),
        (
            {"X": np.array([[1.0, 2.0], [3.0, -np.inf]]), "y": np.zeros(2)},
            "array X: row 1, column 1 holds a value that is not finite",
        ),
        (
            {"X": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 1e308]]), "y": np.zeros(3)},
            "array X: row 2, column 1 holds a value too large (its row's squared norm overflows",
        ),
        ({"X": np.array([[1.0, 1e160, 2.0]]), "y": np.zeros(1)}, "array X: row 0, column 1 holds a value too large"),
    ],
)
def test_a_bad_owner_file_is_refused_with_a_clear_error(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(ValueError, match=re.escape(message)):
        load_owner_file(str(tmp_path / "bad.npz"))


def test_an_owner_file_with_the_wrong_width_is_refused(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    np.savez(tmp_path / "wide.npz", X=np.zeros((5, 7)), y=np.zeros(5))
    with pytest.raises(ValueError, match="7 features"):
        build_role(
            config,
            "owner-1",
            owner_data=load_owner_file(str(tmp_path / "wide.npz")),
            exchange=plugins.exchange(config.protocol),
        )


def test_unknown_party_is_refused(tiny_scenario, tmp_path):
    config = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path).config
    with pytest.raises(ValueError, match="unknown party 'owner-7'"):
        build_role(config, "owner-7", exchange=plugins.exchange(config.protocol))


def test_an_owner_whose_file_holds_1e308_is_refused_before_the_run_starts_with_exit_2(tiny_scenario, tmp_path):
    """1e308 is finite, but its square is not: the owner's bids would be NaN and the curator would
    drop it in round 1. Refused at load instead, naming the file, row and column."""
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    X = np.zeros((6, 3))
    X[4, 2] = 1e308
    np.savez(tmp_path / "huge.npz", X=X, y=np.zeros(6))
    result = run_cli(
        "owner",
        "--scenario",
        str(path),
        "--endpoint",
        "tcp://127.0.0.1:9",
        "--id",
        "owner-1",
        "--insecure",
        "--no-report",
        "--data",
        str(tmp_path / "huge.npz"),
        timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert f"{tmp_path / 'huge.npz'}: array X: row 4, column 2 holds a value too large" in result.stderr
    assert "1e+308" not in result.stderr


def test_a_data_source_with_values_that_overflow_is_refused_naming_the_key_row_and_column(tmp_path):
    from marketplace.runtime import prepare_world
    from marketplace.scenario import ScenarioError

    csv = tmp_path / "big.csv"
    csv.write_text("a,b,label\n" + "".join(f"{i},{i % 3},{i % 2}\n" for i in range(60)) + "1,1e200,1\n")
    raw = {
        "name": "big",
        "protocol": "summarize",
        "seed": 1,
        "parties": {"owners": 2},
        "data": {
            "source": {"kind": "csv", "csv": {"path": str(csv), "label": "label"}},
            "partition": {"scheme": "even"},
            "consumer": {"target_groups": [0], "target_share": 0.5, "validation_size": 5, "test_size": 5},
            "seed_set": {"groups": [1], "size": 2},
        },
        "summarize": {"rounds": 2, "features": 10, "baselines": []},
    }
    with pytest.raises(ScenarioError, match=r"big.csv: line 62, column 'b' holds a value too large"):
        prepare_world(
            parse_scenario(raw, source="s", base_dir=tmp_path),
            plugins.exchange(parse_scenario(raw, source="s", base_dir=tmp_path).config.protocol),
        )


# --- an owner file's size is bounded before it is loaded ---------------------------------------------


def npz_claiming(path, shape: tuple[int, ...]) -> None:
    """A small .npz archive whose X.npy header states ``shape`` (float64) but holds no data: loading
    it would allocate the whole array before finding the data missing."""
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("X.npy", header.getvalue())
        y = io.BytesIO()
        np.save(y, np.zeros(3))
        archive.writestr("y.npy", y.getvalue())


def test_an_owner_file_larger_than_the_limit_is_refused_naming_the_limit_and_the_option(tmp_path):
    np.savez(tmp_path / "own.npz", X=np.ones((10, 3)), y=np.arange(10) % 2)
    size = (tmp_path / "own.npz").stat().st_size
    with pytest.raises(
        ValueError,
        match=rf"own\.npz: the file is {size} bytes, more than the limit of {size - 1} bytes; "
        rf"raise it with --max-data to read it",
    ):
        load_owner_file(str(tmp_path / "own.npz"), max_bytes=size - 1, option="--max-data")
    assert len(load_owner_file(str(tmp_path / "own.npz"), max_bytes=size)) == 10


def test_an_owner_file_whose_arrays_would_be_too_large_is_refused_from_their_headers(tmp_path):
    npz_claiming(tmp_path / "claims.npz", (10**6, 10**4))
    with pytest.raises(
        ValueError,
        match=r"claims\.npz: its arrays \(X \(1000000, 10000\) of float64, y \(3,\) of "
        r"float64\) would take 80000000024 bytes in memory, more than the limit of "
        r"1073741824 bytes$",
    ):
        load_owner_file(str(tmp_path / "claims.npz"))
    # compressed: a few kilobytes on disk, 16 MB of float64 once loaded
    np.savez_compressed(tmp_path / "zeros.npz", X=np.zeros((2000, 1000)), y=np.zeros(2000))
    assert (tmp_path / "zeros.npz").stat().st_size < 100_000
    with pytest.raises(ValueError, match=r"zeros\.npz: its arrays .* would take 16016000 bytes in memory"):
        load_owner_file(str(tmp_path / "zeros.npz"), max_bytes=10_000_000)
    assert len(load_owner_file(str(tmp_path / "zeros.npz"), max_bytes=16_016_000)) == 2000


def test_a_single_npy_array_is_refused_before_it_is_loaded(tmp_path):
    np.save(tmp_path / "own.npy", np.zeros((4, 3)))
    with pytest.raises(
        ValueError,
        match=r"own\.npy: expected a \.npz archive \(numpy\.savez\) with arrays X and y, found a single \.npy array",
    ):
        load_owner_file(str(tmp_path / "own.npy"))
