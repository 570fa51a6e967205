"""A sketch request to a marketplace described by its public schema may leave out its box: the box
is the schema's ranges, filled in by the consumer's side (from the marketplace's file in its kit, or
``--schema``) and by the server alike. A box the request gives is its own public choice and is kept,
but one that does not give a bound per column of the schema is refused on either side, naming the
field, the schema's columns and what the request gave."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, run_cli

from marketplace.scenario import ScenarioError
from marketplace.scenario.load import parse_scenario
from marketplace.service.api import load_request
from marketplace.service.sessions import session_scenario

MARKET = {
    "name": "hospitals",
    "protocol": "sketch",
    "seed": 3,
    "parties": {"owners": 2},
    "data": {
        "schema": {
            "features": [{"name": "age", "lower": 0, "upper": 100}, {"name": "systolic", "lower": 60, "upper": 220}],
            "label": {"name": "readmitted", "classes": ["no", "yes"]},
        }
    },
}
BOXLESS = {"name": "ask", "protocol": "sketch", "sketch": {"epsilon": 0.5, "samples": 2000}}
WRONG_WIDTH = {**BOXLESS, "sketch": {"lower": [0], "upper": [100]}}
ONE_UPPER = {**BOXLESS, "sketch": {"lower": [0, 60], "upper": [100]}}
OWN_BOX = {**BOXLESS, "sketch": {"lower": [18, 80], "upper": [90, 200]}}
DOC = ROOT / "docs" / "serve.md"


@pytest.fixture
def kit(tmp_path) -> Path:
    """A consumer's kit as `marketplace serve` writes it: the marketplace's file, market.yaml."""
    folder = tmp_path / "kit"
    folder.mkdir()
    (folder / "market.yaml").write_text(yaml.safe_dump(MARKET))
    return folder


def market():
    return parse_scenario(MARKET, source="market.yaml", base_dir=Path.cwd())


def write(tmp_path: Path, name: str, raw: dict) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(raw))
    return path


def test_a_request_without_a_box_takes_the_schemas_on_both_sides(kit, tmp_path):
    for given in (write(tmp_path, "ask.yaml", BOXLESS), BOXLESS):
        loaded = load_request(given, {"sketch.epsilon": 0.4}, keys=kit)
        assert (loaded.config.sketch.lower, loaded.config.sketch.upper) == ((0.0, 60.0), (100.0, 220.0))
        assert loaded.config.sketch.epsilon == 0.4
    elsewhere = load_request(BOXLESS, keys=tmp_path, schema=kit / "market.yaml")  # --schema: the market's file
    assert elsewhere.config.sketch.lower == (0.0, 60.0)
    served = session_scenario(market(), yaml.safe_dump(BOXLESS), session="s0001-x", consumer="alice")
    assert (served.config.sketch.lower, served.config.sketch.upper) == ((0.0, 60.0), (100.0, 220.0))
    same = load_request({**BOXLESS, "sketch": {"lower": [0, 60], "upper": [100, 220]}}, keys=kit)
    assert same.config.sketch.upper == (100.0, 220.0)  # the schema's own box, written out, is the box


def test_a_box_of_the_requests_own_is_kept_on_both_sides(kit):
    """A narrower box is the consumer's public choice (the owners' records are clipped to it)."""
    loaded = load_request(OWN_BOX, keys=kit)
    assert (loaded.config.sketch.lower, loaded.config.sketch.upper) == ((18.0, 80.0), (90.0, 200.0))
    served = session_scenario(market(), yaml.safe_dump(OWN_BOX), session="s0001-x", consumer="alice")
    assert (served.config.sketch.lower, served.config.sketch.upper) == ((18.0, 80.0), (90.0, 200.0))


def test_without_the_marketplaces_file_a_boxless_request_is_refused_as_before(tmp_path):
    with pytest.raises(ScenarioError, match=r"sketch\.lower: expected the public box of the records"):
        load_request(BOXLESS, keys=tmp_path)


@pytest.mark.parametrize(
    ("request_", "field", "got"),
    [(WRONG_WIDTH, "sketch.lower", "got [0]"), (ONE_UPPER, "sketch.upper", "got [100]")],
    ids=["too-few-bounds", "one-upper-bound"],
)
def test_a_box_without_a_bound_per_column_is_refused_naming_field_expected_and_got(kit, request_, field, got):
    side = field.split(".")[1]
    ranges = "[0, 60]" if side == "lower" else "[100, 220]"
    for refuse in (
        lambda: load_request(request_, keys=kit),
        lambda: session_scenario(market(), yaml.safe_dump(request_), session="s0001-x", consumer="alice"),
    ):
        with pytest.raises(ScenarioError) as err:
            refuse()
        text = str(err.value)
        assert f"{field}: expected one {side} bound per column of the marketplace's schema (2: age, systolic)" in text
        assert f"the schema's ranges, {side} {ranges})" in text and text.endswith(got), text


def test_the_request_command_refuses_a_box_too_narrow_before_connecting_as_docs_serve_quotes(kit, tmp_path):
    path = write(tmp_path, "ask.yaml", ONE_UPPER)
    result = run_cli("request", str(path), "--market", "tcp://127.0.0.1:9", "--keys", str(kit), "--out", str(tmp_path))
    assert result.returncode == 2, result.stderr
    printed = result.stderr.strip().replace(str(path), "ask.yaml")
    quoted = re.search(r"^\s*(marketplace request: bad scenario: ask\.yaml: .*)$", DOC.read_text(), re.MULTILINE)[1]
    assert printed == quoted
    assert set(tmp_path.iterdir()) == {kit, path}  # nothing written
