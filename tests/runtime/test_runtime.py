"""The runtime end to end: real processes, both drivers, the same seed, the brute-force reference."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from conftest import QUICKSTART, run_cli

from marketplace import plugins
from marketplace.parties import make_world
from marketplace.protocols.summarize import rff_greedy_bruteforce
from marketplace.protocols.summarize.public import public_features
from marketplace.roles import owner_id
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario, parse_scenario

DETERMINISTIC_KEYS = ("selection", "metrics", "value", "parsimony", "end_reason")


@pytest.fixture(scope="module")
def quickstart_processes(tmp_path_factory) -> tuple[dict, int]:
    """The quickstart exactly as a new user runs it: the CLI, every party its own process."""
    out = tmp_path_factory.mktemp("quickstart") / "run"
    result = run_cli("run", str(QUICKSTART), "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    return json.loads((out / "report.json").read_text()), result.returncode


@pytest.mark.slow
def test_quickstart_runs_the_parties_in_processes_of_their_own(quickstart_processes):
    """The curator and the consumer each in a process of its own; the owners in owner hosts (by
    default one per core, at most one per owner), apart from the others."""
    from marketplace.runner.processes import available_cores, owner_hosts

    report, _ = quickstart_processes
    pid = {p["id"]: p["pid"] for p in report["parties"]}
    assert report["status"] == "completed"
    assert list(pid) == ["curator", "owner-1", "owner-2", "owner-3", "owner-4", "consumer"]
    owners = [pid[f"owner-{i}"] for i in range(1, 5)]
    assert (
        len(set(owners))
        == len(owner_hosts(["owner-1", "owner-2", "owner-3", "owner-4"], "auto"))
        == min(4, available_cores())
    )
    assert len({pid["curator"], pid["consumer"], *owners}) == 2 + len(set(owners))
    assert report["pid_of_runner"] not in pid.values()
    assert all(p["exit_code"] == 0 for p in report["parties"])


@pytest.mark.slow
def test_quickstart_sender_and_receiver_counters_agree(quickstart_processes):
    report, _ = quickstart_processes
    consistency = report["messages"]["consistency"]
    assert consistency["agree"], consistency["mismatches"]
    assert consistency["sent"] == consistency["received"] == report["messages"]["total"]
    assert report["messages"]["heartbeats"]["sent"] > 0


@pytest.mark.slow
def test_quickstart_report_has_the_promised_fields(quickstart_processes):
    report, _ = quickstart_processes
    for key in (
        "scenario",
        "protocol",
        "seed",
        "driver",
        "status",
        "parties",
        "messages",
        "privacy",
        "timing",
        "parsimony",
        "selection",
        "value",
        "metrics",
    ):
        assert key in report, key
    assert set(report["messages"]) >= {"total", "bytes", "by_kind", "by_party"}
    assert set(report["timing"]) >= {"wall_s", "compute_s", "transport_s"}
    assert set(report["parsimony"]) >= {"points_seen", "summary_size", "validation_size", "rho"}
    assert len(report["selection"]) == report["parsimony"]["summary_size"] == 40
    assert set(report["metrics"]["baselines"]) == {"uniform", "exact_greedy"}
    assert set(report["metrics"]) >= {"mmd2", "accuracy"}
    # non-private greedy: the curator sees D_v and exactly the points it keeps
    assert report["parsimony"]["rho"] == 1.0
    assert report["checks"]["central_replay"]["matches"]


@pytest.mark.slow
def test_same_seed_same_report_with_either_driver(quickstart_processes, tmp_path):
    processes, _ = quickstart_processes
    inprocess = run_scenario(load_scenario(QUICKSTART), tmp_path / "a", driver="inprocess")
    for key in DETERMINISTIC_KEYS:
        assert inprocess[key] == processes[key], key
    assert inprocess["messages"]["by_kind"] == processes["messages"]["by_kind"]


def test_same_seed_same_report_across_two_runs(tiny_scenario, tmp_path):
    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    first = run_scenario(scenario, tmp_path / "a", driver="inprocess")
    second = run_scenario(scenario, tmp_path / "b", driver="inprocess")
    for key in DETERMINISTIC_KEYS:
        assert first[key] == second[key], key


def test_another_seed_gives_another_selection(tiny_scenario, tmp_path):
    a = run_scenario(
        parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path), tmp_path / "a", driver="inprocess"
    )
    tiny_scenario["seed"] = 12
    b = run_scenario(
        parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path), tmp_path / "b", driver="inprocess"
    )
    assert a["selection"] != b["selection"]


def selected_rows(report: dict) -> list[list]:
    """Each point of the selection as [owner, row]: a selection names a point by its owner's serial, and
    the owner's own serial -> row map is what a simulation's report shows as the simulator's view."""
    details = report["party_details"]
    return [[o, details[o]["simulator_view"]["result"]["sent_rows"][k]] for o, k, _ in report["selection"]]


def _bruteforce_selection(scenario) -> list[list]:
    config = scenario.config
    world = make_world(config, plugins.exchange(config.protocol))
    h1 = public_features(config, world.dim)
    picks = rff_greedy_bruteforce(
        [h1.transform(o.X) for o in world.owners],
        h1.transform(world.validation.X),
        h1.transform(world.seed_set.X),
        config.summarize.rounds,
    )
    return [[owner_id(o), r] for o, r in picks]


def test_protocol_selection_equals_bruteforce_greedy_on_a_small_case(tiny_scenario, tmp_path):
    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")
    assert selected_rows(report) == _bruteforce_selection(scenario)


@pytest.mark.slow
def test_processes_selection_equals_bruteforce_greedy_on_a_small_case(tiny_scenario, tmp_path):
    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    report = run_scenario(scenario, tmp_path / "run", driver="processes")
    assert report["status"] == "completed", report["failures"]
    assert selected_rows(report) == _bruteforce_selection(scenario)


def test_owners_never_offer_a_point_twice_and_nothing_is_counted_twice(tiny_scenario, tmp_path):
    tiny_scenario["summarize"]["rounds"] = 20
    report = run_scenario(
        parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path), tmp_path / "run", driver="inprocess"
    )
    selection = [tuple(s) for s in report["selection"]]
    assert len(selection) == len(set(selection)) == 20
    rows = selected_rows(report)
    for owner, details in report["party_details"].items():
        if owner.startswith("owner-"):
            sent = details["simulator_view"]["result"]["sent_rows"]  # a simulation: the runner saw every owner's
            assert len(sent) == len(set(sent))
            assert sorted(sent) == sorted(r for o, r in rows if o == owner)
            assert sorted(k for o, k, _ in selection if o == owner) == list(range(len(sent)))  # serials, not rows


def test_value_adds_up_to_the_objective_gain(tiny_scenario, tmp_path):
    report = run_scenario(
        parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path), tmp_path / "run", driver="inprocess"
    )
    values = report["value"]
    chosen_owners = {o for o, *_ in report["selection"]}
    assert set(values) == {"owner-1", "owner-2", "owner-3"}
    assert all(values[o] == 0.0 for o in values if o not in chosen_owners)


def test_run_writes_report_csv_and_resolved_scenario(tiny_scenario, tmp_path):
    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    run_scenario(scenario, tmp_path / "run", driver="inprocess")
    assert json.loads((tmp_path / "run" / "report.json").read_text())["scenario"] == "tiny"
    assert (tmp_path / "run" / "messages.csv").read_text().startswith("scope,name,count,bytes")
    resolved = yaml.safe_load((tmp_path / "run" / "scenario.resolved.yaml").read_text())
    assert resolved["summarize"]["rounds"] == 6 and resolved["seed"] == 11


@pytest.mark.slow
def test_exec_launched_parties_give_the_same_report_as_inprocess(tiny_scenario, tmp_path):
    """Parties started as `python -m marketplace <role>` (as in a container) rebuild the world from
    the scenario file alone, and still reach the same result."""
    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    execd = run_scenario(scenario, tmp_path / "exec", driver="processes", launch="exec")
    inprocess = run_scenario(scenario, tmp_path / "inproc", driver="inprocess")
    assert execd["status"] == "completed", execd["failures"]
    assert execd["launch"] == "exec"
    for key in DETERMINISTIC_KEYS:
        assert execd[key] == inprocess[key], key


def test_mmd2_with_seed_set_is_the_objective_of_the_whole_summary(tiny_scenario, tmp_path):
    from marketplace.protocols.summarize import mmd2

    scenario = parse_scenario(tiny_scenario, source="tiny", base_dir=tmp_path)
    report = run_scenario(scenario, tmp_path / "run", driver="inprocess")
    world = make_world(scenario.config, plugins.exchange(scenario.config.protocol))
    chosen = np.stack([world.owners[int(o.split("-")[1]) - 1].X[r] for o, r in selected_rows(report)])
    gamma = scenario.config.summarize.gamma
    assert report["metrics"]["mmd2"] == pytest.approx(mmd2(chosen, world.validation.X, gamma), rel=1e-12)
    assert report["metrics"]["mmd2_with_seed_set"] == pytest.approx(
        mmd2(np.vstack([world.seed_set.X, chosen]), world.validation.X, gamma), rel=1e-12
    )
