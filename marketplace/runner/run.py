"""`marketplace run`: validate a scenario, run it with one driver, assemble and write the report."""

from __future__ import annotations

import copy
import dataclasses
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from marketplace import plugins
from marketplace.data.dataset import World
from marketplace.parties import party_ids, role_of
from marketplace.plugins import Exchange
from marketplace.privacy import noise as noise_keys
from marketplace.reporting.history import write_history_files
from marketplace.roles import CURATOR
from marketplace.roles.pricing import refusal
from marketplace.runner.blame import failure_lines
from marketplace.runner.processes import Child, Launch, ProcessRun, last_line, run_processes
from marketplace.runtime.assemble import assemble_report
from marketplace.runtime.forkserver import forkserver_context
from marketplace.runtime.json_files import write_json
from marketplace.runtime.lifetime import with_request_id
from marketplace.runtime.losses import excluded_owners
from marketplace.runtime.nodes import build_node, default_run_id
from marketplace.runtime.party_process import EXIT_OK, EXIT_RUN_FAILED
from marketplace.runtime.party_reports import OWN_REPORTS, party_report, read_reports
from marketplace.runtime.report import write_messages_csv
from marketplace.runtime.run_folder import check_run_folder
from marketplace.runtime.scheduling import single_threaded_blas
from marketplace.runtime.world import prepare_world
from marketplace.scenario import Scenario, ScenarioConfig, ScenarioError
from marketplace.transport.inprocess import StalledRun, run_inprocess

log = logging.getLogger(__name__)
Driver = Literal["processes", "inprocess"]


def run_scenario(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    driver: Driver = "processes",
    launch: Launch = "forkserver",
    on_round: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run ``scenario`` and write ``out_dir/report.json``, ``messages.csv`` and the resolved scenario.

    ``launch`` says how the processes driver starts parties: forked from a preloaded server and
    handed their share (``forkserver``), or as ``python -m marketplace <role>`` (``exec``).
    ``on_round(done, total)`` follows the protocol's rounds; ``on_phase(text)`` is told when the
    run moves on to work that has no rounds (the evaluation and the baselines, which can take a
    minute after the last round).

    Raises :class:`~marketplace.runtime.run_folder.RunFolderError` if ``out_dir`` is a file or already
    holds files, ValueError for an unknown ``driver`` or ``launch``, and :class:`ScenarioError` if the
    data cannot be built as described (all before anything starts). Returns the report; its
    ``status`` says whether the run completed.
    """
    check_driver(driver, launch)
    return run_in_folder(
        scenario, check_run_folder(out_dir), driver=driver, launch=launch, on_round=on_round, on_phase=on_phase
    )


_DRIVERS: dict[str, Driver] = {"processes": "processes", "inprocess": "inprocess"}
_LAUNCHES: dict[str, Launch] = {"forkserver": "forkserver", "exec": "exec"}


def check_driver(driver: str, launch: str) -> tuple[Driver, Launch]:
    """``driver`` and ``launch`` as the driver and the way to start parties they name; ValueError
    unless they name one."""
    if driver not in ("processes", "inprocess"):
        raise ValueError(f"driver: expected 'processes' or 'inprocess', got {driver!r}")
    if launch not in ("forkserver", "exec"):
        raise ValueError(f"launch: expected 'forkserver' or 'exec', got {launch!r}")
    return _DRIVERS[driver], _LAUNCHES[launch]


def run_in_folder(
    scenario: Scenario,
    out: Path,
    *,
    driver: Driver = "processes",
    launch: Launch = "forkserver",
    on_round: Callable[[int, int], None] | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """:func:`run_scenario` in ``out``, a new or empty folder, with ``driver`` and ``launch`` both
    already checked (:func:`~marketplace.runtime.run_folder.check_run_folder`, :func:`check_driver`): for
    callers that check them before they start the run (a run in the background, a sweep)."""
    config = scenario.config
    if config.data.schema_only:
        raise ScenarioError(
            scenario.source,
            "data.schema",
            "a marketplace described by its public schema holds no rows "
            "to simulate: serve it (`marketplace serve`), each owner bringing its own file to `marketplace "
            "agent --data` and each consumer its target to `marketplace request --data`; `marketplace "
            "run` simulates a dataset (data.source)",
        )
    exchange = plugins.exchange(config.protocol)  # resolved once for the run, and passed along
    refused = refusal(config, exchange) if config.lifetime.spending_budget is not None else None
    if refused is not None:  # its price is over the consumer's spending budget: nothing is reserved
        raise ScenarioError(scenario.source, "lifetime.spending_budget", refused)
    if driver == "processes" and launch == "forkserver":
        forkserver_context()  # imports its libraries while we build the world
    world = prepare_world(scenario, exchange)
    out.mkdir(parents=True, exist_ok=True)
    scenario = with_noise_keys(scenario, out)
    scenario = with_request_id(scenario)
    if driver == "processes":
        scenario = with_run_keys(scenario, out)
    resolved = out / "scenario.resolved.yaml"
    resolved.write_text(scenario.dump_yaml())
    run_id = default_run_id(scenario)
    started = time.perf_counter()
    failure: str | list[str] | None
    if driver == "inprocess":
        parties, failure, extra_transport = _run_inprocess(scenario, world, run_id, on_round, exchange)
    else:
        parties, failure = _run_processes(scenario, resolved, out, run_id, on_round, launch, world)
        extra_transport = 0.0
    wall_s = time.perf_counter() - started
    if on_phase is not None:
        on_phase(evaluation_phase(config))
    report = assemble_report(scenario, world, driver, parties, failure, wall_s, extra_transport, run_id, exchange)
    if driver == "processes":
        report["launch"] = launch
    exchange.artifacts(report, out)  # files of the protocol's own in the run folder, if any
    write_json(out / "report.json", report)
    write_messages_csv(report, out / "messages.csv")
    write_history_files(report, out)
    return report


def evaluation_phase(config: ScenarioConfig) -> str:
    """What the runner does after the protocol's rounds, for progress displays."""
    section = getattr(config, config.protocol, None)
    baselines = [str(b) for b in (getattr(section, "baselines", None) or ())]
    return "evaluating the run" + (f" and computing the baselines ({', '.join(baselines)})" if baselines else "")


def with_run_keys(scenario: Scenario, out: Path) -> Scenario:
    """A CURVE run without a key folder gets fresh keys in ``out/keys`` (one pair per party, made
    for this run only); the returned scenario points every party at them."""
    t = scenario.config.transport
    if t.security != "curve" or t.curve_keys is not None:
        return scenario
    from marketplace.transport.curve import generate_keys

    folder = out / "keys"
    generate_keys(folder, owners=scenario.config.parties.owners, overwrite=True)
    config = dataclasses.replace(scenario.config, transport=dataclasses.replace(t, curve_keys=str(folder.resolve())))
    raw = copy.deepcopy(scenario.raw)
    raw.setdefault("transport", {})["curve_keys"] = str(folder.resolve())
    return Scenario(config=config, raw=raw, source=scenario.source)


def with_noise_keys(scenario: Scenario, out: Path) -> Scenario:
    """The scenario as this run's parties get it, with ``noise.source`` resolved: ``auto`` becomes
    ``keys`` when ``noise.keys`` names a folder (the parties use its keys), else ``seed`` (a
    simulation: the report says every party could strip every other's noise); ``keys`` without a
    folder gets a fresh key per party in ``out/keys`` (the runner holds them all, so a rerun with
    ``--set noise.keys=OUT/keys`` reproduces the noise). ``seed`` with a folder never gets here: the
    scenario refuses it (:class:`marketplace.scenario.config.NoiseConfig`)."""
    n = scenario.config.noise
    if n.source == "auto":
        noise = dataclasses.replace(n, source="seed" if n.keys is None else "keys")
    elif n.source == "keys" and n.keys is None:
        folder = (out / "keys").resolve()
        noise_keys.write_keys(folder, party_ids(scenario.config))
        noise = dataclasses.replace(n, keys=str(folder))
    else:
        return scenario
    raw = copy.deepcopy(scenario.raw)
    raw["noise"] = {"source": noise.source, "keys": noise.keys}
    return Scenario(config=dataclasses.replace(scenario.config, noise=noise), raw=raw, source=scenario.source)


def _run_inprocess(
    scenario: Scenario, world: World, run_id: str, on_round: Callable[[int, int], None] | None, exchange: Exchange
) -> tuple[list[dict[str, Any]], str | None, float]:
    config = scenario.config
    parties = frozenset(party_ids(config))
    nodes = [
        build_node(config, p, world=world, run_id=run_id, exchange=exchange, parties=parties) for p in party_ids(config)
    ]
    curator = nodes[0].role
    shown = {"rounds": 0}

    def progress() -> None:
        done, total = exchange.progress(config, curator)
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
    reports = [
        party_report(n, role_name=n.role.role_name, wall_s=wall, driver={}, scenario=scenario, own=True) for n in nodes
    ]
    return reports, failure, transport_s


def _run_processes(
    scenario: Scenario,
    resolved: Path,
    out: Path,
    run_id: str,
    on_round: Callable[[int, int], None] | None,
    launch: Launch,
    world: World,
) -> tuple[list[dict[str, Any]], list[str]]:
    run = run_processes(scenario, resolved, out, run_id, on_round=on_round, launch=launch, world=world)
    parties = []
    for child in run.children:
        written = _written_reports(out / "parties", child.party)
        for party in child.parties:
            rep = written.get(party)
            if rep is None:
                rep = {
                    "id": party,
                    "role": role_of(party),
                    "pid": child.proc.pid,
                    "host": socket.gethostname(),
                    "status": "failed",
                    "failure": f"no report (exit status {child.exit_code}); last log line: {last_line(child.log_path)}",
                }
            rep["exit_code"] = _exit_code_of(rep, child)
            rep["log"] = str(child.log_path)
            if len(child.parties) > 1:
                rep["process"] = child.party
            parties.append(rep)
    order = {p: i for i, p in enumerate(party_ids(scenario.config))}
    parties.sort(key=lambda rep: order.get(rep["id"], len(order)))
    return parties, _process_failures(run, parties)


def _written_reports(folder: Path, label: str) -> dict[str | None, dict[str, Any]]:
    """The reports a party (or an owner host, ``label``) wrote: its own report file in ``folder/own``
    (what it published and what it kept to itself: the runner of a simulation holds every party's
    data anyway), else the one it published in ``folder``; empty when neither can be read."""
    for path in (folder / OWN_REPORTS / f"{label}.json", folder / f"{label}.json"):
        try:
            return {rep.get("id"): rep for rep in read_reports(path)}
        except (OSError, ValueError):
            continue
    return {}


def _exit_code_of(rep: dict[str, Any], child: Child) -> int | None:
    """A party's exit status. An owner host exits 3 when the run failed for any of its owners; each
    hosted owner's own status then comes from its report (0 completed, 3 failed). Any other status
    of the host (an internal error, killed) is every hosted owner's."""
    if len(child.parties) == 1 or child.exit_code not in (EXIT_OK, EXIT_RUN_FAILED):
        return child.exit_code
    return EXIT_OK if rep.get("status") == "completed" else EXIT_RUN_FAILED


def _process_failures(run: ProcessRun, parties: list[dict[str, Any]]) -> list[str]:
    """Why a party process failed the run, if one did. An owner the curator excluded (a dropout:
    crashed, hung; or flagged) does not by itself: the protocol went on with the others, the
    report lists the loss (``owners_lost``), and :func:`assemble_report` fails a run that lost
    every owner or kept nothing of theirs."""
    failures = [run.failure] if run.failure else []
    curator = next((p for p in parties if p["id"] == CURATOR), {})
    dropouts = set(excluded_owners(curator.get("result") or {}))
    stragglers = [p for p in run.stragglers if p not in dropouts]
    if stragglers:
        failures.append(f"{', '.join(stragglers)} still running after the curator exited; killed")
    failed = [
        (rep["id"], rep["exit_code"], rep.get("failure") or last_line(Path(rep["log"])))
        for rep in parties
        if rep["exit_code"] != 0 and rep["id"] not in dropouts
    ]
    return failures + failure_lines(failed)  # the party at fault first (marketplace.runner.blame)
