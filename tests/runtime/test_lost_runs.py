"""What a run reports when it loses owners: a run that loses every owner, or keeps nothing of
theirs, is failed (exit 3) and says why; a run that loses some names them; a dropped owner's own
report is not `completed`; the central replay replays the dropouts."""

from __future__ import annotations

import io
import json

import pytest
import yaml
from hostile_roles import make_hostile
from rich.console import Console

import marketplace.runner.run as runner
import marketplace.runtime.nodes as nodes
from marketplace import plugins
from marketplace.cli import main
from marketplace.messages import ProtocolError
from marketplace.messages.kinds import Shutdown
from marketplace.protocols.pfds.curator import PfdsCurator
from marketplace.runner.display import summary_tables
from marketplace.runner.run import run_scenario
from marketplace.runtime.losses import loss_failures, owners_lost
from marketplace.scenario import parse_scenario


def with_hostile_owners(monkeypatch, owners: set[str], change) -> None:
    """Every run of this test builds ``owners`` changed by ``change(role)`` (in process only)."""
    honest = nodes.build_role

    def build(config, party, **kwargs):
        role = honest(config, party, **kwargs)
        return change(role) if party in owners else role

    monkeypatch.setattr(nodes, "build_role", build)


def refuses(kind: str):
    """An owner that refuses every message of ``kind`` (the curator drops it at once)."""

    def change(role):
        honest = role.handle

        def handle(message):
            if message.kind == kind:
                raise ProtocolError(party=message.sender, kind=kind, reason=f"this owner will not take {kind}")
            return honest(message)

        role.handle = handle
        return role

    return change


def owner_statuses(report: dict) -> dict[str, str]:
    return {p["id"]: p["status"] for p in report["parties"] if p["id"].startswith("owner-")}


# --- every owner lost ----------------------------------------------------------------------------


def test_a_run_that_loses_every_owner_fails_with_exit_3_naming_them(monkeypatch, tiny_scenario, tmp_path, capsys):
    with_hostile_owners(
        monkeypatch, {"owner-1", "owner-2", "owner-3"}, lambda role: make_hostile(role, "refuses_target")
    )
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario))
    code = main(["run", str(path), "--out", str(tmp_path / "run"), "--driver", "inprocess", "--quiet"])
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    stderr = capsys.readouterr().err
    assert code == 3
    assert report["status"] == "failed"
    assert any(f.startswith("every owner was lost (3 of 3 owners lost: owner-1 (round") for f in report["failures"])
    assert "run failed: every owner was lost" in stderr
    assert report["owners_lost"]["count"] == 3 and set(report["owners_lost"]["lost"]) == {
        "owner-1",
        "owner-2",
        "owner-3",
    }
    assert owner_statuses(report) == {"owner-1": "failed", "owner-2": "failed", "owner-3": "failed"}


def test_a_pfds_run_whose_sharers_are_all_lost_in_round_2_fails_and_reports_no_protocol_error(monkeypatch, tmp_path):
    raw = {
        "name": "pfds-tiny",
        "protocol": "pfds",
        "seed": 4,
        "parties": {"owners": 3},
        "data": {"source": {"kind": "table", "table": {"dataset": "synthetic", "synthetic": {"rows": 900}}}},
        "pfds": {"epsilon": 1.0, "h_max": 5, "folds": 5, "max_leaves": 256, "baselines": []},
    }
    with_hostile_owners(monkeypatch, {"owner-1", "owner-2", "owner-3"}, refuses("pfds_phase"))
    report = run_scenario(parse_scenario(raw, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    assert report["status"] == "failed"
    assert any("no sharer left" in f for f in report["failures"]), report["failures"]
    assert any(f.startswith("every owner was lost") for f in report["failures"])
    assert {r["round"] for r in report["dropouts"].values()} == {2}
    pfds = report["metrics"]["pfds"]
    assert pfds["mean"] is None and pfds["consumer"] is None and "not the protocol's result" in pfds["note"]
    assert "without_shared_records" in pfds  # what the agents' own models scored, kept aside and labelled
    assert report["fidelity"]["pfds"]["synthetic_rows"] == 0
    assert owner_statuses(report) == {"owner-1": "failed", "owner-2": "failed", "owner-3": "failed"}


def test_the_pfds_curator_ends_failed_when_its_last_sharer_is_lost_in_round_2():
    curator = PfdsCurator(scenario_name="s", sharers=("owner-1", "owner-2"), schema=None)
    curator.present = {"owner-1", "owner-2", "consumer"}
    curator.phase, curator.voters = "data", ["owner-1", "owner-2"]
    assert curator.peer_lost("owner-1", "silent") == []
    sends = curator.peer_lost("owner-2", "silent")
    assert curator.closing_status == "failed" and "no sharer left" in curator.end_reason
    assert [(s.to, s.body.status) for s in sends if isinstance(s.body, Shutdown)] == [("consumer", "failed")]


# --- some owners lost ------------------------------------------------------------------------------


def test_a_dropped_owner_is_told_its_report_is_not_completed_and_the_run_names_it(monkeypatch, tiny_scenario, tmp_path):
    with_hostile_owners(monkeypatch, {"owner-2"}, lambda role: make_hostile(role, "refuses_target"))
    report = run_scenario(
        parse_scenario(tiny_scenario, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess"
    )
    assert report["status"] == "completed", report["failures"]
    assert owner_statuses(report) == {"owner-1": "completed", "owner-2": "failed", "owner-3": "completed"}
    lost = report["owners_lost"]
    assert lost["count"] == 1 and lost["owners"] == 3
    assert lost["summary"].startswith("1 of 3 owners lost: owner-2 (round 1: refused the curator's 'target_embedding'")
    text = io.StringIO()
    console = Console(file=text, width=400)
    for table in summary_tables(report):
        console.print(table)
    assert "1 of 3 owners lost: owner-2 (round 1" in text.getvalue()


def test_the_owner_learns_why_it_was_dropped(monkeypatch, tiny_scenario, tmp_path):
    from marketplace.runtime import party_reports

    seen = {}
    honest_report = party_reports.party_report

    def keep(node, **kwargs):
        seen[node.party_id] = node.role.failure
        return honest_report(node, **kwargs)

    monkeypatch.setattr(runner, "party_report", keep)
    with_hostile_owners(monkeypatch, {"owner-3"}, lambda role: make_hostile(role, "refuses_target"))
    run_scenario(parse_scenario(tiny_scenario, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    assert seen["owner-3"].startswith(
        "the curator ended the run as failed for this party: dropped from the run in round 1"
    )
    assert seen["owner-1"] is None


def test_the_loss_line_counts_the_rest_past_ten_owners():
    curator = {"dropouts": {f"owner-{i}": {"round": 2, "reason": "silent"} for i in range(1, 13)}}
    lost = owners_lost(100, curator)
    assert lost["count"] == 12
    assert lost["summary"].startswith("12 of 100 owners lost: owner-1 (round 2: silent), owner-2 (round 2: silent)")
    assert lost["summary"].endswith("and 2 more (report.json: owners_lost)")
    assert loss_failures(lost, None) == []
    assert loss_failures(lost, "no sketch") == ["nothing from the owners reached the result: no sketch"]
    assert loss_failures(owners_lost(12, curator), None)[0].startswith("every owner was lost (12 of 12")
    assert owners_lost(3, {"flagged": {"owner-2": "bad tree"}})["lost"] == {"owner-2": "flagged: bad tree"}


# --- the central replay ---------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["refuses_target", "never_bids_from_round_3"])
def test_the_central_replay_replays_a_dropout(monkeypatch, tiny_scenario, tmp_path, change):
    if change == "refuses_target":
        alter = lambda role: make_hostile(role, "refuses_target")  # noqa: E731
    else:
        alter = refuses_from_round(3)
    with_hostile_owners(monkeypatch, {"owner-1"}, alter)
    report = run_scenario(
        parse_scenario(tiny_scenario, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess"
    )
    replay = report["checks"]["central_replay"]
    dropped_in = report["dropouts"]["owner-1"]["round"]
    assert replay["dropouts_replayed"] == {"owner-1": max(1, dropped_in)}
    assert replay["matches"] is True, replay
    assert all(owner != "owner-1" for owner, *_ in report["selection"][dropped_in - 1 :])


def test_the_central_replay_still_catches_a_selection_that_ignores_a_dropout(tiny_scenario, tmp_path):
    """The replay is not made to agree: without the owner's exclusion the same selection differs."""
    from marketplace.parties import make_world
    from marketplace.protocols.summarize.evaluate import central_replay

    config = parse_scenario(tiny_scenario, source="t", base_dir=tmp_path).config
    world = make_world(config, plugins.exchange(config.protocol))
    honest = run_scenario(
        parse_scenario(tiny_scenario, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess"
    )
    winner = honest["selection"][0][0]
    replay = central_replay(config, world, honest["selection"], {winner: 1})
    assert replay["matches"] is False and replay["first_difference"] == 0


def refuses_from_round(first: int):
    """An owner that refuses ``round_open`` from round ``first`` on (dropped in that round)."""

    def change(role):
        honest = role.handle

        def handle(message):
            if message.kind == "round_open" and message.body.round >= first:
                raise ProtocolError(party=message.sender, kind="round_open", reason="done bidding")
            return honest(message)

        role.handle = handle
        return role

    return change


def test_an_stc_run_without_any_release_fails_and_reports_no_protocol_cost(monkeypatch, tmp_path):
    raw = {
        "name": "stc-tiny",
        "protocol": "stc",
        "seed": 5,
        "parties": {"owners": 2},
        "data": {
            "source": {"kind": "stc_synthetic", "stc_synthetic": {"which": 2, "n_source": 400, "n_target": 300}},
            "partition": {"scheme": "even", "groups": [0]},
            "consumer": {"target_groups": [1], "target_share": 0.99, "validation_size": 280, "test_size": 5},
            "seed_set": {"size": 0},
        },
        "stc": {"release": "nna", "k": 6, "domain": {"low": [0.0], "high": [1.0]}, "baselines": []},
    }
    with_hostile_owners(monkeypatch, {"owner-1", "owner-2"}, refuses("stc_request"))
    report = run_scenario(parse_scenario(raw, source="t", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    assert report["status"] == "failed"
    assert any(f.startswith("every owner was lost (2 of 2") for f in report["failures"]), report["failures"]
    metrics = report["metrics"]
    assert report["choice"] is not None  # the consumer chose from T alone: kept aside, not the protocol's cost
    assert metrics["cost"] is None and "not the protocol's result" in metrics["note"]
    assert metrics["without_owner_releases"]["cost"] is not None
    assert owner_statuses(report) == {"owner-1": "failed", "owner-2": "failed"}
