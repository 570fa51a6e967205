"""`marketplace run`: validate a scenario, run it with one driver, assemble and write the report."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from marketplace import __version__
from marketplace.messages import PROTOCOL_VERSION
from marketplace.parties import build_role, make_world, party_ids, role_of
from marketplace.roles import CONSUMER, CURATOR
from marketplace.runner.party_process import default_run_id, party_report, single_threaded_blas, write_json
from marketplace.data import world_summary
from marketplace.runner.processes import Launch, forkserver_context, last_line, run_processes
from marketplace.runner.report import message_summary, timing_summary, write_messages_csv
from marketplace.scenario import Scenario, ScenarioError
from marketplace.transport.inprocess import StalledRun, run_inprocess
from marketplace.transport.node import Node
from marketplace.exchanges import exchange

log = logging.getLogger(__name__)
Driver = Literal["processes", "inprocess"]


def run_scenario(scenario: Scenario, out_dir: str | Path, *, driver: Driver = "processes", launch: Launch = "forkserver",
                 on_round: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Run ``scenario`` and write ``out_dir/report.json``, ``messages.csv`` and the resolved scenario.

    ``launch`` says how the processes driver starts parties: forked from a preloaded server and
    handed their share (``forkserver``), or as ``python -m marketplace <role>`` (``exec``).

    Raises :class:`ScenarioError` (before anything starts) if the data cannot be built as described.
    Returns the report; its ``status`` says whether the run completed.
    """
    config = scenario.config
    if driver == "processes" and launch == "forkserver":
        forkserver_context()  # imports its libraries while we build the world
    try:
        world = make_world(config)
    except (ValueError, OSError) as err:
        raise ScenarioError(scenario.source, "data", str(err)) from None
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    resolved = out / "scenario.resolved.yaml"
    resolved.write_text(scenario.dump_yaml())
    run_id = default_run_id(scenario)
    started = time.perf_counter()
    if driver == "inprocess":
        parties, failure, extra_transport = _run_inprocess(scenario, world, run_id, on_round)
    elif driver == "processes":
        parties, failure = _run_processes(scenario, resolved, out, run_id, on_round, launch, world)
        extra_transport = 0.0
    else:
        raise ValueError(f"unknown driver {driver!r}: use 'processes' or 'inprocess'")
    wall_s = time.perf_counter() - started
    report = assemble_report(scenario, world, driver, parties, failure, wall_s, extra_transport, run_id)
    if driver == "processes":
        report["launch"] = launch
    write_json(out / "report.json", report)
    write_messages_csv(report, out / "messages.csv")
    return report


def _run_inprocess(scenario: Scenario, world, run_id: str, on_round) -> tuple[list[dict[str, Any]], str | None, float]:
    config = scenario.config
    nodes = [Node(build_role(config, p, world=world), run_id=run_id, max_message_bytes=config.transport.max_message_bytes)
             for p in party_ids(config)]
    curator = nodes[0].role
    shown = {"rounds": 0}
    protocol = exchange(config.protocol)

    def progress() -> None:
        done, total = protocol.progress(config, curator)
        if on_round is not None and done > shown["rounds"]:
            shown["rounds"] = done
            on_round(done, total)

    failure = None
    t0 = time.perf_counter()
    try:
        with single_threaded_blas():  # the same setting as each party process, for a fair comparison
            stats = run_inprocess(nodes, after_delivery=progress if on_round else None)
        transport_s = stats.transport_s
    except StalledRun as err:
        failure, transport_s = str(err), 0.0
    wall = time.perf_counter() - t0
    reports = [party_report(n, role_name=n.role.role_name, wall_s=wall, driver={}) for n in nodes]
    return reports, failure, transport_s


def _run_processes(scenario: Scenario, resolved: Path, out: Path, run_id: str, on_round, launch: Launch,
                   world) -> tuple[list[dict[str, Any]], str | None]:
    run = run_processes(scenario, resolved, out, run_id, on_round=on_round, launch=launch, world=world)
    parties = []
    for child in run.children:
        path = out / "parties" / f"{child.party}.json"
        try:
            rep = json.loads(path.read_text())
        except (OSError, ValueError):
            rep = {"id": child.party, "role": role_of(child.party), "pid": child.proc.pid, "host": socket.gethostname(),
                   "status": "failed", "failure": f"no report (exit status {child.exit_code}); last log line: {last_line(child.log_path)}"}
        rep["exit_code"] = child.exit_code
        rep["log"] = str(child.log_path)
        parties.append(rep)
    return parties, _process_failures(run, parties)


def _process_failures(run, parties: list[dict[str, Any]]) -> str | None:
    """Why the run failed, if it did. An owner the curator excluded as a dropout (crashed, hung) does
    not fail the run: the protocol completed with the others, and the report lists the dropout."""
    failures = [run.failure] if run.failure else []
    curator = next((p for p in parties if p["id"] == CURATOR), {})
    dropouts = set(((curator.get("result") or {}).get("dropouts") or {}))
    for rep in parties:
        if rep["exit_code"] != 0 and rep["id"] not in dropouts:
            failures.append(f"{rep['id']} exited with status {rep['exit_code']}: {rep.get('failure') or last_line(Path(rep['log']))}")
    return "; ".join(failures) or None


def assemble_report(scenario: Scenario, world, driver: str, parties: list[dict[str, Any]], failure: str | None,
                    wall_s: float, extra_transport_s: float, run_id: str) -> dict[str, Any]:
    config = scenario.config
    by_id = {p["id"]: p for p in parties}
    curator = (by_id.get(CURATOR) or {}).get("result") or {}
    failures = [failure] if failure else []
    dropped = set(curator.get("dropouts") or {})
    failures += [f"{p['id']}: {p['failure']}" for p in parties
                 if p.get("failure") and p["id"] not in dropped and (not failure or p["id"] not in failure)]
    status = "failed" if failures else "completed"
    results = {p["id"]: p.get("result") or {} for p in parties}
    sections = exchange(config.protocol).report(config, world, results)
    report: dict[str, Any] = {
        "scenario": config.name,
        "protocol": config.protocol,
        "seed": config.seed,
        "driver": driver,
        "status": status,
        "failures": failures,
        "run_id": run_id,
        "versions": {"marketplace": __version__, "wire_protocol": PROTOCOL_VERSION},
        "parties": [
            {"id": p["id"], "role": p.get("role"), "pid": p.get("pid"), "host": p.get("host"), "status": p.get("status"),
             **({"exit_code": p["exit_code"]} if "exit_code" in p else {})}
            for p in parties
        ],
        "messages": message_summary(parties),
        "timing": timing_summary(parties, wall_s, extra_transport_s),
        "dropouts": curator.get("dropouts", {}),
        **sections,
        "data": world_summary(world),
        "config": scenario.raw,
        "party_details": {p["id"]: {k: p.get(k) for k in ("result", "timing", "driver", "errors", "errors_received", "log")} for p in parties},
        "pid_of_runner": os.getpid(),
    }
    return report
