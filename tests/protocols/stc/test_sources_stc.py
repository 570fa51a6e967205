"""The stc data sources: Office-Caltech10 (domains as groups) and Superconductivity (a public
reference sample fixes the standardisation and the temperature groups), their config errors, the
checksum of a nested file and a small end-to-end stc run."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from conftest import ROOT, needs_data

from marketplace.data import SourceConfig, build_world, check_source_available, load_source
from marketplace.data.sources.office_caltech import OFFICE_DOMAINS, OfficeCaltechSource
from marketplace.data.sources.superconductivity import (
    TEMPERATURE_GROUPS,
    SuperconductivitySource,
    reference_statistics,
    superconductivity_tables,
)
from marketplace.datasets import ChecksumMismatch, DatasetMissing, data_home
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario, parse_scenario
from marketplace.schema import SchemaError

SCENARIOS = ROOT / "scenarios"
needs_office = needs_data("office_caltech10_features")
needs_superconductivity = needs_data("superconductivity_subsample")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def office(**options) -> SourceConfig:
    return SourceConfig(kind="office_caltech", office_caltech=OfficeCaltechSource(**options))


def superconductivity(**options) -> SourceConfig:
    return SourceConfig(kind="superconductivity", superconductivity=SuperconductivitySource(**options))


# --------------------------------------------------------------------------- Office-Caltech10


@pytest.mark.data
@needs_office
def test_office_surf_rows_are_unit_norm_with_fixed_domain_groups():
    data = load_source(office(project_dim=0), rng())
    assert data.X.shape == (958 + 295 + 157 + 1123, 800)
    assert data.group_names == OFFICE_DOMAINS == ("amazon", "webcam", "dslr", "caltech10")
    assert data.group_counts().tolist() == [958, 295, 157, 1123]
    assert sorted(np.unique(data.y).tolist()) == list(range(1, 11))
    assert np.allclose(np.linalg.norm(data.X, axis=1), 1.0)
    assert data.name == "office_caltech/surf"


@pytest.mark.data
@needs_office
def test_office_group_ids_stay_fixed_whatever_domains_are_listed():
    data = load_source(office(domains=("dslr", "amazon"), project_dim=0), rng())
    assert data.group_counts().tolist() == [958, 0, 157, 0]
    assert data.group[0] == 0 and data.group[-1] == 2  # loaded in the fixed order, amazon first


@pytest.mark.data
@needs_office
def test_office_googlenet_labels_of_shape_1_by_n_are_read():
    data = load_source(office(features="googlenet", domains=("webcam", "dslr"), project_dim=0), rng())
    assert data.X.shape == (295 + 157, 1024)
    assert data.group_counts().tolist() == [0, 295, 157, 0]
    assert np.bincount(data.y[data.group == 2]).tolist() == [0, 12, 21, 12, 13, 10, 24, 22, 12, 8, 23]
    assert np.allclose(np.linalg.norm(data.X, axis=1), 1.0)


@pytest.mark.data
@needs_office
def test_office_projection_is_fixed_by_the_rng():
    cfg = office(domains=("amazon", "webcam"))
    first, again, other = (load_source(cfg, rng(s)) for s in (1, 1, 2))
    assert first.X.shape == (958 + 295, 8) and first.feature_names == tuple(f"proj{j}" for j in range(8))
    assert np.array_equal(first.X, again.X) and not np.allclose(first.X, other.X)
    # the projection does not depend on which domains are loaded: webcam's rows are the same alone
    alone = load_source(office(domains=("webcam",)), rng(1))
    assert np.allclose(alone.X, first.X[first.group == 1])


# --------------------------------------------------------------------------- Superconductivity


@pytest.mark.data
@needs_superconductivity
def test_superconductivity_experiment_rows_are_the_n1000_rows_not_in_the_reference():
    tables = superconductivity_tables()
    assert tables.reference.shape == (500, 81) and tables.experiment.shape == (972, 81)  # 1000 - 28 shared rows
    reference = {tuple(r) for r in np.column_stack([tables.reference, tables.reference_temp])}
    experiment = np.column_stack([tables.experiment, tables.experiment_temp])
    assert not any(tuple(r) in reference for r in experiment)


@pytest.mark.data
@needs_superconductivity
def test_superconductivity_statistics_and_groups_come_from_the_reference_file():
    tables = superconductivity_tables()
    stats = reference_statistics(tables)
    assert stats.cuts.tolist() == pytest.approx([4.18, 14.45, 53.0])  # quartiles of the n500 temperatures
    counts = np.bincount(stats.groups(tables.reference_temp), minlength=4)
    assert counts.sum() == 500 and np.all(np.abs(counts - 125) <= 3)  # balanced quartiles (ties at the cuts)
    data = load_source(superconductivity(project_dim=0), rng())
    assert data.X.shape == (972, 81) and data.group_names == TEMPERATURE_GROUPS == (
        "low",
        "middle-low",
        "middle-high",
        "high",
    )
    assert np.allclose(data.X, (tables.experiment - tables.reference.mean(axis=0)) / stats.sd)
    assert not np.allclose(data.X.mean(axis=0), 0.0, atol=0.05)  # not the experiment's own z-scores
    temp = tables.experiment_temp
    expected = np.select([temp < 4.18, temp < 14.45, temp < 53.0], [0, 1, 2], default=3)
    assert np.array_equal(data.group, expected)
    assert data.group_counts().tolist() == [175, 216, 285, 296]
    assert np.array_equal(data.y, np.rint(temp).astype(np.int64))


@pytest.mark.data
@needs_superconductivity
def test_superconductivity_projection_is_fixed_by_the_rng():
    first, again, other = (load_source(superconductivity(), rng(s)) for s in (3, 3, 4))
    assert first.X.shape == (972, 8)
    assert np.array_equal(first.X, again.X) and not np.allclose(first.X, other.X)


# --------------------------------------------------------------------------- config errors


def test_a_dataset_missing_from_the_cache_names_it_and_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("MARKETPLACE_DATA", str(tmp_path))
    with pytest.raises(DatasetMissing, match="marketplace data fetch office_caltech10_features") as err:
        check_source_available(office())
    assert "surf/amazon.mat" in str(err.value) and str(tmp_path) in str(err.value)
    with pytest.raises(
        DatasetMissing, match="subsampled_superconduct_n1000.csv.*marketplace data fetch superconductivity_subsample"
    ):
        check_source_available(superconductivity())


def test_googlenet_has_no_caltech10():
    with pytest.raises(SchemaError, match="no googlenet file for \\['caltech10'\\]") as err:
        check_source_available(office(features="googlenet", domains=("amazon", "caltech10")))
    assert err.value.path == "data.source.office_caltech.domains"


@needs_office
def test_by_default_every_domain_with_a_file_for_the_features_is_loaded():
    surf = load_source(office(project_dim=0), rng())
    googlenet = load_source(office(features="googlenet", project_dim=0), rng())
    assert sorted(set(surf.group.tolist())) == [0, 1, 2, 3]
    assert sorted(set(googlenet.group.tolist())) == [0, 1, 2]  # no caltech10 file for googlenet


def test_unknown_or_repeated_domains_and_bad_widths_are_named():
    for domains in (("amazon", "clipart"), (), ("webcam", "webcam")):
        with pytest.raises(SchemaError) as err:
            check_source_available(office(domains=domains))
        assert err.value.path == "data.source.office_caltech.domains"
    with pytest.raises(SchemaError) as err:
        check_source_available(office(project_dim=801))
    assert err.value.path == "data.source.office_caltech.project_dim"
    with pytest.raises(SchemaError) as err:
        check_source_available(superconductivity(project_dim=82))
    assert err.value.path == "data.source.superconductivity.project_dim"


def test_a_source_whose_options_all_have_defaults_needs_no_section():
    for kind in ("office_caltech", "superconductivity"):
        assert getattr(SourceConfig(kind=kind), kind) is not None


def test_a_scenario_names_the_bad_key(tmp_path):
    raw = {
        "name": "x",
        "protocol": "stc",
        "data": {"source": {"kind": "office_caltech", "office_caltech": {"features": "vgg"}}},
        "stc": {"domain": {"low": [-1], "high": [1]}},
    }
    with pytest.raises(ValueError, match="data.source.office_caltech.features"):
        parse_scenario(raw, source="t", base_dir=tmp_path)


# --------------------------------------------------------------------------- checksums of nested files


@needs_office
def test_a_corrupted_nested_office_file_is_refused_before_use(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    shutil.copytree(data_home() / "office_caltech10_features", cache / "office_caltech10_features")
    monkeypatch.setenv("MARKETPLACE_DATA", str(cache))
    cfg = office(domains=("webcam",), project_dim=0)
    assert load_source(cfg, rng()).X.shape == (295, 800)
    webcam = cache / "office_caltech10_features" / "surf" / "webcam.mat"
    corrupt = bytearray(webcam.read_bytes())
    corrupt[-1] ^= 0xFF  # same size: only the checksum can tell
    webcam.write_bytes(bytes(corrupt))
    with pytest.raises(
        ChecksumMismatch,
        match=r"surf/webcam\.mat: expected 32406 bytes with SHA-256 a6a9c78b.*"
        r"marketplace data fetch office_caltech10_features",
    ):
        load_source(cfg, rng())


# --------------------------------------------------------------------------- scenarios and a run


@pytest.mark.data
@needs_office
def test_the_office_scenario_takes_nearly_all_of_webcam_or_dslr_as_t():
    config = load_scenario(SCENARIOS / "stc-office.yaml").config
    world = build_world(config.data, 1, config.seed)
    assert len(world.validation) == 294 and set(world.validation.group.tolist()) == {1}
    assert len(world.owners[0]) == 958 and set(world.owners[0].group.tolist()) == {0}
    dslr = load_scenario(
        SCENARIOS / "stc-office.yaml", ["data.consumer.target_groups=[2]", "data.consumer.validation_size=156"]
    ).config
    assert len(build_world(dslr.data, 1, dslr.seed).validation) == 156


@pytest.mark.data
@needs_office
def test_a_small_office_stc_run_completes_in_process(tmp_path):
    raw = {
        "name": "stc-office-tiny",
        "protocol": "stc",
        "seed": 2,
        "parties": {"owners": 1},
        "data": {
            "source": {"kind": "office_caltech", "office_caltech": {"domains": ["webcam", "dslr"], "project_dim": 8}},
            "partition": {"scheme": "even", "groups": [2]},
            "consumer": {"target_groups": [1], "target_share": 0.999, "validation_size": 294, "test_size": 1},
            "seed_set": {"size": 0},
        },
        "stc": {"release": "nna", "k": 5, "domain": {"low": [-0.5], "high": [0.5]}},
    }
    report = run_scenario(parse_scenario(raw, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    assert report["status"] == "completed", report.get("failures")
    metrics = report["metrics"]
    assert metrics["k"] == 5 and metrics["target_size"] == 294 and metrics["source_size"] == 157
    assert len(set(report["choice"])) == 5
    refs = metrics["baselines"]
    assert {"source_only", "cluster_t", "nonprivate_stc"} <= set(refs)
    assert refs["nonprivate_stc"]["cost"] <= refs["cluster_t"]["cost"] and np.isfinite(metrics["cost"])
    assert report["privacy"]["owner-1"]["eps"] == pytest.approx(3.0)
