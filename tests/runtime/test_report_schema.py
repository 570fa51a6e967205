"""The JSON Schema of report.json: it is valid, shipped in the package, strict at the top level,
open inside protocol sections, and docs/report.md is generated from it. (conftest.py checks every
report.json the whole suite writes against it.)"""

from __future__ import annotations

import copy
import json
import tomllib

import jsonschema
import pytest
from conftest import QUICKSTART, ROOT

from marketplace.runner.report_schema import markdown, report_problems, report_schema
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    scenario = load_scenario(QUICKSTART, ["summarize.rounds=3", "summarize.baselines=[]"])
    return run_scenario(scenario, tmp_path_factory.mktemp("schema") / "run", driver="inprocess")


def test_the_schema_is_a_valid_draft_2020_12_schema_inside_the_package():
    jsonschema.Draft202012Validator.check_schema(report_schema())
    assert (ROOT / "marketplace" / "report.schema.json").is_file()
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert {"report.schema.json", "protocols/*/report.schema.json"} <= set(package_data["marketplace"])
    for name in ("pfds", "sketch", "stc", "summarize"):  # each shipped protocol's fragment joins the schema
        assert (ROOT / "marketplace" / "protocols" / name / "report.schema.json").is_file()
        assert any(branch["if"]["properties"]["protocol"]["const"] == name for branch in report_schema()["allOf"])


def test_a_report_follows_the_schema_after_a_json_round_trip(report):
    assert report_problems(json.loads(json.dumps(report, default=lambda v: v.tolist()))) == []


def test_an_unknown_or_missing_top_level_key_is_refused(report):
    extra = copy.deepcopy(report) | {"surprise": 1}
    assert any("surprise" in problem for problem in report_problems(extra))
    missing = copy.deepcopy(report)
    del missing["messages"]
    assert any("'messages' is a required property" in problem for problem in report_problems(missing))


def test_a_protocol_section_is_required_and_typed(report):
    missing = copy.deepcopy(report)
    del missing["selection"]
    assert any("'selection' is a required property" in p for p in report_problems(missing))
    wrong = copy.deepcopy(report)
    wrong["selection"] = [["owner-1", "seven"]]
    assert any(p.startswith("selection/0/1:") for p in report_problems(wrong))
    wrong = copy.deepcopy(report)
    wrong["status"] = "mostly done"
    assert any(p.startswith("status:") for p in report_problems(wrong))


def test_fields_may_be_added_inside_ledgers_sections_and_party_details(report):
    grown = copy.deepcopy(report)
    for ledger in grown["privacy"].values():
        ledger["neighbouring"] = "replace one record"
    grown["dropouts"] = {"owner-2": {"round": 3, "reason": "lost (no heartbeat for 10 s)"}}
    grown["party_details"]["owner-1"]["host_layout"] = {"host": "a"}
    grown["metrics"]["new_figure"] = 1.0
    grown["parties"][0]["address"] = "tcp://10.0.0.1:5555"
    assert report_problems(grown) == []


def test_the_report_page_is_generated_from_the_schema():
    assert (ROOT / "docs" / "report.md").read_text() == markdown(), (
        "docs/report.md is stale: python -m marketplace.runner.report_schema > docs/report.md"
    )


def test_every_top_level_key_is_documented_on_the_page():
    page = markdown()
    for key in report_schema()["properties"]:
        assert f"| `{key}` |" in page, key
