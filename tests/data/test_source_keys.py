"""A scenario missing required keys of its data source hears about all of them at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from marketplace.scenario.load import ScenarioError, parse_scenario


def scenario(source: dict) -> dict:
    return {"name": "keys", "protocol": "summarize", "data": {"source": source}}


def refusal(raw: dict, tmp_path: Path) -> ScenarioError:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(raw, source="s.yaml", base_dir=tmp_path)
    return caught.value


def test_a_csv_section_without_path_and_label_names_both_key_paths(tmp_path):
    err = refusal(scenario({"kind": "csv", "csv": {"delimiter": ";"}}), tmp_path)
    assert err.path == "data.source.csv"
    assert str(err) == (
        "s.yaml: data.source.csv: expected the required keys data.source.csv.path (a string) and "
        "data.source.csv.label (a string), got nothing for any of them"
    )


def test_a_csv_kind_without_its_section_names_every_required_key(tmp_path):
    err = refusal(scenario({"kind": "csv"}), tmp_path)
    assert err.path == "data.source.csv"
    assert "a csv section (data.source.kind is 'csv')" in str(err)
    assert "data.source.csv.path (a string) and data.source.csv.label (a string)" in str(err)


def test_one_missing_key_is_named_by_its_own_path(tmp_path):
    err = refusal(scenario({"kind": "csv", "csv": {"label": "y"}}), tmp_path)
    assert str(err) == "s.yaml: data.source.csv.path: expected a string (required), got nothing"


def test_with_both_keys_the_section_is_accepted(tmp_path):
    (tmp_path / "d.csv").write_text("a,y\n1,0\n2,1\n")
    raw = scenario({"kind": "csv", "csv": {"path": "d.csv", "label": "y"}})
    config = parse_scenario(raw, source="s.yaml", base_dir=tmp_path).config
    assert Path(config.data.source.csv.path) == tmp_path / "d.csv"


@pytest.mark.parametrize("source", [{"kind": "digits"}, {}, {"kind": "uniform", "uniform": {"rows": 5}}])
def test_a_kind_without_required_keys_needs_no_section(source, tmp_path):
    config = parse_scenario(scenario(source), source="s.yaml", base_dir=tmp_path).config
    assert config.data.source.kind == source.get("kind", "covariate_shift")
