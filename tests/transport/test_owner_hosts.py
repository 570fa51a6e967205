"""Owner hosts: many owners served by one OS process, each still a party of its own on the wire.

The same seed must give the same selection, metrics and per-kind message and byte counts whether
every owner has a process of its own, eight share one, all K share one, or nothing moves over a
socket at all (the in-process driver). A host runs by hand too (`marketplace owners --ids ...`),
and under CURVE the curator tells its owners apart by their keys.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli, tiny_raw

from marketplace.parties import parse_owner_ids
from marketplace.runner.processes import owner_hosts
from marketplace.runner.run import run_scenario
from marketplace.scenario import ScenarioError, parse_scenario

DETERMINISTIC_KEYS = ("selection", "metrics", "value", "parsimony", "end_reason")


def ten_owners(tmp_path: Path, **parties) -> dict:
    raw = tiny_raw()
    raw["parties"] = {"owners": 10, **parties}
    raw["summarize"]["rounds"] = 8
    return raw


def counts(report: dict) -> dict:
    """Per kind: messages and bytes (heartbeats are timing, not protocol, and are counted apart)."""
    return report["messages"]["by_kind"]


@pytest.mark.parametrize(("per_process", "processes"), [(1, 10), (8, 2), (10, 1)])
def test_any_packing_of_owners_into_processes_gives_the_in_process_report(tmp_path, per_process, processes):
    raw = ten_owners(tmp_path, owners_per_process=per_process)
    scenario = parse_scenario(raw, source="ten", base_dir=tmp_path)
    hosted = run_scenario(scenario, tmp_path / "hosted", driver="processes")
    inprocess = run_scenario(scenario, tmp_path / "inprocess", driver="inprocess")
    assert hosted["status"] == "completed", hosted["failures"]
    for key in DETERMINISTIC_KEYS:
        assert hosted[key] == inprocess[key], key
    assert counts(hosted) == counts(inprocess)
    assert hosted["messages"]["consistency"]["agree"], hosted["messages"]["consistency"]
    owners = [p for p in hosted["parties"] if p["role"] == "owner"]
    assert [p["id"] for p in owners] == [f"owner-{i}" for i in range(1, 11)]
    assert len({p["pid"] for p in owners}) == processes
    assert all(p["exit_code"] == 0 for p in hosted["parties"])
    # each hosted owner keeps its own counters: it sent its own bids
    by_party = hosted["messages"]["by_party"]
    assert by_party == inprocess["messages"]["by_party"]
    assert all(by_party[p["id"]]["sent"] > 0 for p in owners)


def test_a_host_started_by_hand_serves_its_owners_under_their_own_keys(tmp_path):
    """curator, `marketplace owners --ids owner-1..owner-2`, `marketplace owner --id owner-3` and the
    consumer, under CURVE: the curator names every owner by its key, and the assembled report equals
    the in-process one."""
    raw = tiny_raw()
    scenario_path = tmp_path / "tiny.yaml"
    import yaml

    scenario_path.write_text(yaml.safe_dump(raw))
    keys = tmp_path / "keys"
    assert run_cli("keys", "generate", str(keys), "--owners", "3").returncode == 0
    parties = tmp_path / "parties"
    endpoint_file = tmp_path / "endpoint"
    base = [sys.executable, "-m", "marketplace"]
    common = ["--scenario", str(scenario_path), "--keys", str(keys)]
    logs = {}

    def start(name: str, args: list[str]) -> subprocess.Popen:
        logs[name] = (tmp_path / f"{name}.log").open("wb")
        return subprocess.Popen(base + args, cwd=tmp_path, stdout=logs[name], stderr=subprocess.STDOUT)

    procs = {
        "curator": start(
            "curator",
            [
                "curator",
                *common,
                "--endpoint",
                "tcp://127.0.0.1:0",
                "--endpoint-file",
                str(endpoint_file),
                "--report",
                str(parties / "curator.json"),
            ],
        )
    }
    try:
        import time

        deadline = time.monotonic() + 60
        while not endpoint_file.exists():
            assert time.monotonic() < deadline and procs["curator"].poll() is None, (
                tmp_path / "curator.log"
            ).read_text()
            time.sleep(0.05)
        endpoint = endpoint_file.read_text().strip()
        procs["host"] = start(
            "host",
            ["owners", *common, "--endpoint", endpoint, "--ids", "owner-1..owner-2", "--report-dir", str(parties)],
        )
        procs["owner-3"] = start(
            "owner-3",
            ["owner", *common, "--endpoint", endpoint, "--id", "owner-3", "--report", str(parties / "owner-3.json")],
        )
        procs["consumer"] = start(
            "consumer", ["consumer", *common, "--endpoint", endpoint, "--report", str(parties / "consumer.json")]
        )
        exits = {name: proc.wait(timeout=120) for name, proc in procs.items()}
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()
    assert exits == {"curator": 0, "host": 0, "owner-3": 0, "consumer": 0}, {
        n: (tmp_path / f"{n}.log").read_text()[-2000:] for n in exits
    }
    host_log = (tmp_path / "host.log").read_text()
    assert "serving 2 owners (owner-1..owner-2)" in host_log
    assembled = run_cli("assemble", str(parties), "--scenario", str(scenario_path), "--out", str(tmp_path / "run"))
    assert assembled.returncode == 0, assembled.stderr
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    reference = run_scenario(
        parse_scenario(raw, source="tiny", base_dir=tmp_path), tmp_path / "ref", driver="inprocess"
    )
    for key in DETERMINISTIC_KEYS:
        assert report[key] == reference[key], key
    pids = {p["id"]: p["pid"] for p in report["parties"]}
    assert pids["owner-1"] == pids["owner-2"] != pids["owner-3"]
    # started by hand, not by `marketplace run`: every party keeps the default scheduling policy
    assert {p: d["driver"]["scheduling"] for p, d in report["party_details"].items()} == dict.fromkeys(pids, "normal")
    # the curator heard each hosted owner under its own name: its bids are counted per owner
    by_party = report["messages"]["by_party"]
    assert by_party["owner-1"]["sent"] > 0 and by_party["owner-2"]["sent"] > 0


def test_owners_command_refuses_bad_ids_and_missing_keys_before_starting(tmp_path):
    import yaml

    scenario_path = tmp_path / "tiny.yaml"
    scenario_path.write_text(yaml.safe_dump(tiny_raw()))
    for ids, expected in (
        ("owner-0..owner-2", "expected owner ids owner-1 ... owner-3"),
        ("owner-2..owner-1", "a range runs from the lower owner"),
        ("owner-1,owner-1", "given more than once: owner-1"),
        ("curator", "got 'curator'"),
    ):
        result = run_cli(
            "owners", "--scenario", str(scenario_path), "--endpoint", "tcp://127.0.0.1:1", "--ids", ids, "--insecure"
        )
        assert result.returncode == 2, result.stderr
        assert "marketplace owners: --ids:" in result.stderr and expected in result.stderr, result.stderr
    keys = tmp_path / "keys"
    assert run_cli("keys", "generate", str(keys), "--owners", "3").returncode == 0
    (keys / "owner-2.key_secret").unlink()
    result = run_cli(
        "owners",
        "--scenario",
        str(scenario_path),
        "--endpoint",
        "tcp://127.0.0.1:1",
        "--ids",
        "owner-1..owner-3",
        "--keys",
        str(keys),
    )
    assert result.returncode == 2
    assert "owner-2.key_secret" in result.stderr, result.stderr
    result = run_cli("owners", "--scenario", str(scenario_path), "--ids", "owner-1", "--insecure")
    assert result.returncode == 2 and "no endpoint" in result.stderr


def test_owner_hosts_split_the_owners_evenly_and_in_order():
    owners = [f"owner-{i}" for i in range(1, 11)]
    assert owner_hosts(owners, 1) == [[o] for o in owners]
    assert owner_hosts(owners, 8) == [owners[:5], owners[5:]]  # two hosts, as even as possible
    assert owner_hosts(owners, 10) == [owners]
    assert owner_hosts(owners, 4) == [owners[:4], owners[4:7], owners[7:]]
    assert owner_hosts(owners, "auto", cores=2) == [owners[:5], owners[5:]]
    assert owner_hosts(owners[:1], "auto", cores=8) == [owners[:1]]
    for k, per in ((1000, 250), (7, 3), (5, 100)):
        ids = [f"owner-{i}" for i in range(1, k + 1)]
        groups = owner_hosts(ids, per)
        assert [o for g in groups for o in g] == ids
        assert max(len(g) for g in groups) <= per
        assert max(len(g) for g in groups) - min(len(g) for g in groups) <= 1


def test_owner_ids_parse_ranges_and_lists():
    assert parse_owner_ids("owner-1..owner-3,owner-7", 10) == ["owner-1", "owner-2", "owner-3", "owner-7"]
    assert parse_owner_ids(" owner-10 ", 10) == ["owner-10"]
    for bad in ("", "owner-11", "owner-1..", "owner-x", "owner-3..owner-2", "owner-1,owner-1"):
        with pytest.raises(ValueError):
            parse_owner_ids(bad, 10)


def test_owners_per_process_is_validated(tmp_path):
    for bad in (0, -1, "some", 1.5):
        raw = tiny_raw()
        raw["parties"]["owners_per_process"] = bad
        with pytest.raises(ScenarioError, match="owners_per_process"):
            parse_scenario(raw, source="tiny", base_dir=tmp_path)


def test_auto_hosts_fit_their_owners_in_the_open_files_limit():
    """Each hosted owner needs FILES_PER_OWNER descriptors: with a hard limit of 20,000 files one
    host per core cannot serve 10,000 owners (5,000 x 4 > 20,000), so ``auto`` makes more hosts."""
    from marketplace.runner.processes import owners_per_host_limit
    from marketplace.transport.host import FILES_PER_OWNER, HOST_SPARE_FILES

    ids = [f"owner-{i}" for i in range(1, 10_001)]
    per_host = owners_per_host_limit(20_000)
    assert per_host * FILES_PER_OWNER + HOST_SPARE_FILES <= 20_000 < (per_host + 1) * FILES_PER_OWNER + HOST_SPARE_FILES
    groups = owner_hosts(ids, "auto", cores=2, files=20_000)
    assert len(groups) == 3 and [o for g in groups for o in g] == ids
    assert max(len(g) for g in groups) <= per_host
    assert len(owner_hosts(ids, "auto", cores=2, files=1 << 20)) == 2  # room enough: one per core
    assert len(owner_hosts(ids[:100], "auto", cores=2, files=20_000)) == 2


def test_a_host_beyond_its_open_files_limit_fails_at_once_and_says_what_to_change(tmp_path):
    """Too many owners for the host's open-files limit: a clear error naming the limit and the
    setting, and the process exits (no half-made sockets left holding its ZeroMQ context open)."""
    raw = ten_owners(tmp_path, owners_per_process=10)
    scenario_path = tmp_path / "ten.yaml"
    import yaml

    scenario_path.write_text(yaml.safe_dump(raw))
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))\n"
        "from marketplace.cli import main\n"
        f"sys.exit(main(['owners', '--scenario', {str(scenario_path)!r}, '--ids', 'owner-1..owner-10',"
        " '--endpoint', 'tcp://127.0.0.1:9', '--insecure']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stderr
    assert "needs 296 open files" in result.stderr and "owners_per_process" in result.stderr, result.stderr


def test_a_host_that_fails_while_connecting_exits_instead_of_hanging(tmp_path):
    """A socket made before an error (here an endpoint ZeroMQ refuses) must not keep the host's
    context from closing: the host reports the failure and exits."""
    raw = ten_owners(tmp_path)
    scenario_path = tmp_path / "ten.yaml"
    import yaml

    scenario_path.write_text(yaml.safe_dump(raw))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "marketplace",
            "owners",
            "--scenario",
            str(scenario_path),
            "--ids",
            "owner-1..owner-4",
            "--endpoint",
            "tcp://no such host",
            "--insecure",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    assert "owner host crashed" in result.stderr, result.stderr
