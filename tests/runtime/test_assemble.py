"""`marketplace assemble`: the run report from the parties' own reports, and refusals (exit 2) of
reports that belong to another scenario or another run."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time

import pytest
import yaml
from conftest import ROOT, run_cli, tiny_raw

from marketplace import plugins
from marketplace.runner.run import run_scenario
from marketplace.scenario import parse_scenario

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One tiny run whose parties wrote their own reports (parties/<party>.json: one process per
    owner, as under docker compose), and its scenario file."""
    folder = tmp_path_factory.mktemp("assemble")
    raw = tiny_raw()
    raw["parties"]["owners_per_process"] = 1
    (folder / "tiny.yaml").write_text(yaml.safe_dump(raw))
    report = run_scenario(
        parse_scenario(raw, source="tiny", base_dir=folder), folder / "run", driver="processes", launch="exec"
    )
    assert report["status"] == "completed", report["failures"]
    return folder, report


def copy_parties(finished, tmp_path):
    folder, _ = finished
    shutil.copytree(folder / "run" / "parties", tmp_path / "parties")
    return folder / "tiny.yaml", tmp_path / "parties"


def test_the_parties_reports_assemble_into_the_runs_report(finished, tmp_path):
    scenario, parties = copy_parties(finished, tmp_path)
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assembled = json.loads((tmp_path / "out" / "report.json").read_text())
    original = finished[1]
    assert assembled["status"] == "completed" and assembled["driver"] == "compose"
    assert assembled["selection"] == original["selection"] and assembled["metrics"] == original["metrics"]
    assert assembled["messages"]["by_kind"] == original["messages"]["by_kind"]


def test_an_owner_hands_over_no_row_count_no_rows_it_handed_over_and_no_timings(finished, tmp_path):
    """parties/<owner>.json is what an owner hands to the report step: its own report (parties/own/,
    which the runner of this simulation reads) keeps its row count, the rows it handed over and its
    timings, and the simulation's report shows them as the simulator's view; the report assembled from
    the handed-over files has none of them."""
    scenario, parties = copy_parties(finished, tmp_path)
    simulated = finished[1]
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assembled = json.loads((tmp_path / "out" / "report.json").read_text())
    for i, owner in enumerate(("owner-1", "owner-2", "owner-3")):
        handed = json.loads((parties / f"{owner}.json").read_text())
        own_file = finished[0] / "run" / "parties" / "own" / f"{owner}.json"
        own = json.loads(own_file.read_text())["own"]
        assert own_file.stat().st_mode & 0o077 == 0  # for the owner's eyes only
        assert own["result"]["rows"] == simulated["data"]["owners"][i]["rows"]
        assert "sent_rows" in own["result"] and own["timing"]["compute_s"] > 0
        assert simulated["party_details"][owner]["simulator_view"]["result"] == own["result"]
        assert not {"rows", "sent_rows"} & set(handed["result"]) and handed["timing"] is None and "own" not in handed
        details = assembled["party_details"][owner]
        assert details["result"] == handed["result"] and details["timing"] is None
        assert "simulator_view" not in details and owner not in assembled["timing"]["by_party"]
        assert str(own["timing"]["compute_s"]) not in json.dumps(assembled)


def test_another_scenario_is_refused_with_exit_2_naming_both(finished, tmp_path):
    _, parties = copy_parties(finished, tmp_path)
    result = run_cli(
        "assemble",
        str(parties),
        "--scenario",
        str(ROOT / "scenarios" / "quickstart.yaml"),
        "--out",
        str(tmp_path / "out"),
    )
    assert result.returncode == 2, result.stderr
    assert "written for scenario 'tiny'" in result.stderr and "the scenario given is 'quickstart'" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_same_scenario_with_another_seed_is_refused(finished, tmp_path):
    scenario, parties = copy_parties(finished, tmp_path)
    result = run_cli(
        "assemble", str(parties), "--scenario", str(scenario), "--set", "seed=12", "--out", str(tmp_path / "out")
    )
    assert result.returncode == 2 and "seed 11" in result.stderr and "seed 12" in result.stderr


def test_reports_of_two_runs_are_refused(finished, tmp_path):
    scenario, parties = copy_parties(finished, tmp_path)
    report = json.loads((parties / "owner-2.json").read_text())
    report["run_id"] = "tiny-seed11-another"
    (parties / "owner-2.json").write_text(json.dumps(report))
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert (
        result.returncode == 2
        and "different runs" in result.stderr
        and "owner-2 'tiny-seed11-another'" in result.stderr
    )


def test_a_report_filed_under_another_partys_name_is_refused(finished, tmp_path):
    scenario, parties = copy_parties(finished, tmp_path)
    shutil.copy(parties / "owner-1.json", parties / "owner-2.json")
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "owner-2.json: the report of party 'owner-1', expected 'owner-2'" in result.stderr


def test_a_missing_report_fails_the_run_with_exit_3_naming_the_party(finished, tmp_path):
    scenario, parties = copy_parties(finished, tmp_path)
    (parties / "owner-3.json").unlink()
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 3 and "owner-3.json" in result.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["status"] == "failed"


def test_a_missing_folder_exits_2(finished, tmp_path):
    scenario, _ = copy_parties(finished, tmp_path)
    result = run_cli("assemble", str(tmp_path / "nowhere"), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "no such folder" in result.stderr


def test_wait_takes_reports_that_arrive_later(finished, tmp_path):
    from marketplace.runtime.assemble import assemble_from_party_reports

    scenario_file, parties = copy_parties(finished, tmp_path)
    late = (parties / "consumer.json").read_text()
    (parties / "consumer.json").unlink()

    def arrive() -> None:  # as a party writes its report: whole, then renamed into place
        (parties / "consumer.json.tmp").write_text(late)
        os.replace(parties / "consumer.json.tmp", parties / "consumer.json")

    threading.Timer(1.0, arrive).start()
    scenario = parse_scenario(yaml.safe_load(scenario_file.read_text()), source="tiny", base_dir=tmp_path)
    t0 = time.monotonic()
    report = assemble_from_party_reports(scenario, parties, tmp_path / "out", wait_s=30)
    assert report["status"] == "completed" and 0.9 < time.monotonic() - t0 < 10


@pytest.fixture(scope="module")
def hosted(tmp_path_factory):
    """The same tiny run with its three owners served by one owner host: their reports come in one
    file, parties/owner-1..owner-3.json."""
    folder = tmp_path_factory.mktemp("assemble-hosted")
    raw = tiny_raw()
    raw["parties"]["owners_per_process"] = 3
    (folder / "tiny.yaml").write_text(yaml.safe_dump(raw))
    report = run_scenario(parse_scenario(raw, source="tiny", base_dir=folder), folder / "run", driver="processes")
    assert report["status"] == "completed", report["failures"]
    return folder, report


def test_an_owner_hosts_file_holds_each_owners_report_and_assembles(hosted, tmp_path):
    scenario, parties = copy_parties(hosted, tmp_path)
    assert sorted(p.name for p in parties.glob("*.json")) == ["consumer.json", "curator.json", "owner-1..owner-3.json"]
    bundle = json.loads((parties / "owner-1..owner-3.json").read_text())
    assert bundle["owner_host"] == "owner-1..owner-3"
    assert [rep["id"] for rep in bundle["reports"]] == ["owner-1", "owner-2", "owner-3"]
    own = json.loads((parties / "own" / "owner-1..owner-3.json").read_text())  # what each kept, for the runner
    assert [rep["own"]["result"]["rows"] for rep in own["reports"]] == [o["rows"] for o in hosted[1]["data"]["owners"]]
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assembled = json.loads((tmp_path / "out" / "report.json").read_text())
    assert assembled["status"] == "completed"
    assert (
        assembled["selection"] == hosted[1]["selection"]
        and assembled["messages"]["by_kind"] == hosted[1]["messages"]["by_kind"]
    )


def test_a_party_reported_in_two_files_is_refused(hosted, finished, tmp_path):
    """A host's file left from an earlier grouping next to an owner's own file: one of the two
    reports would be counted twice, so neither is chosen silently."""
    scenario, parties = copy_parties(hosted, tmp_path)
    shutil.copy(finished[0] / "run" / "parties" / "owner-2.json", parties / "owner-2.json")
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    assert "two reports of owner-2" in result.stderr and "owner-1..owner-3.json" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_missing_hosted_owner_names_the_party_and_unreadable_files(hosted, tmp_path):
    scenario, parties = copy_parties(hosted, tmp_path)
    (parties / "owner-1..owner-3.json").write_text("{ half a file")
    result = run_cli("assemble", str(parties), "--scenario", str(scenario), "--out", str(tmp_path / "out"))
    assert result.returncode == 3, result.stderr
    failures = json.loads((tmp_path / "out" / "report.json").read_text())["failures"]
    text = " ".join(failures) if isinstance(failures, list) else str(failures)
    assert "owner-2.json" in text and "owner-1..owner-3.json: not JSON" in text


def test_an_owner_that_declined_and_then_sent_no_report_does_not_fail_the_run(tmp_path):
    """A served session's owner that declined (its ledger refused: it released nothing, was charged
    nothing) and whose process then died before its report left: the run stands; an owner that took
    part and sent no report still fails it, named."""
    from marketplace.runtime.assemble import assemble_from_reports
    from marketplace.runtime.party_reports import find_party_reports
    from marketplace.scenario import load_scenario

    market = ROOT / "scenarios" / "market-serve.yaml"
    overrides = {"lifetime.ledgers": str(tmp_path / "ledgers"), "lifetime.owner_budgets.owner-3.epsilon": 0.01}
    scenario = load_scenario(market).with_overrides(overrides)
    report = run_scenario(scenario, tmp_path / "run", driver="processes", launch="exec")
    assert report["status"] == "completed" and report["lifetime"]["declined"] == ["owner-3"], report["failures"]
    read, _, problems = find_party_reports(tmp_path / "run" / "parties", [p["id"] for p in report["parties"]])
    assert not problems
    without_decliner = {p: r for p, r in read.items() if p != "owner-3"}
    kept = assemble_from_reports(
        scenario,
        without_decliner,
        {"owner-3": "owner-3 sent no report of session s1"},
        exchange=plugins.exchange(scenario.config.protocol),
    )
    assert kept["status"] == "completed" and kept["failures"] == []
    without_owner = {p: r for p, r in read.items() if p != "owner-1"}
    failed = assemble_from_reports(
        scenario,
        without_owner,
        {"owner-1": "owner-1 sent no report of session s1"},
        exchange=plugins.exchange(scenario.config.protocol),
    )
    assert failed["status"] == "failed" and any("owner-1 sent no report" in f for f in failed["failures"])
