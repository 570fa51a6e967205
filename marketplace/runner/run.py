"""`marketplace run`: validate a scenario, run it with one driver, assemble and write the report."""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from marketplace.version import __version__
from marketplace.messages import PROTOCOL_VERSION
from marketplace.parties import make_world, party_ids, role_of
from marketplace.privacy import noise as noise_keys
from marketplace.roles import CURATOR
from marketplace.reporting.absent import REFERENCES_ABSENT, absent, why_absent
from marketplace.runner.blame import failure_lines
from marketplace.runner.identity import check_reports
from marketplace.runner.json_files import write_json
from marketplace.runner.nodes import build_node, default_run_id
from marketplace.runner.party_process import EXIT_OK, EXIT_RUN_FAILED
from marketplace.runner.party_reports import find_party_reports, party_report, read_reports
from marketplace.runner.scheduling import single_threaded_blas
from marketplace.data import world_summary
from marketplace.runner.forkserver import forkserver_context
from marketplace.reporting.history import empty_history, history_section, write_history_files
from marketplace.runner.losses import declined_owners, excluded_owners, loss_failures, owners_lost
from marketplace.runner.lifetime import lifetime_section, with_request_id
from marketplace.runner.processes import Launch, last_line, run_processes
from marketplace.runner.per_owner import owner_section
from marketplace.runner.report import message_summary, timing_summary, write_messages_csv
from marketplace.scenario import Scenario, ScenarioError
from marketplace.transport.inprocess import StalledRun, run_inprocess
from marketplace import plugins
from marketplace.plugins import Exchange

log = logging.getLogger(__name__)
Driver = Literal["processes", "inprocess"]


class RunFolderError(ValueError):
    """The output folder is a file, or already holds files (an earlier run's): nothing was started."""


def check_run_folder(out_dir: str | Path) -> Path:
    """``out_dir`` as a Path if a run may write there: a new folder or an empty one.

    A file, or a folder that already holds files (say, an earlier run's), is refused with
    :class:`RunFolderError`: two runs' reports, logs and keys would otherwise mix.
    """
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunFolderError(f"{out} is a file; a run writes a folder (give a new or an empty one)")
    if out.is_dir():
        held = sorted(p.name + ("/" if p.is_dir() else "") for p in out.iterdir())
        if held:
            shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
            raise RunFolderError(f"{out} already holds files ({shown}), perhaps from an earlier run; give a new "
                                 "folder, or remove this one, so that two runs' files do not mix")
    return out


def default_run_folder(name: str, kind: str = "") -> Path:
    """``runs/<name>[-kind]-<timestamp>``, with ``-2``, ``-3``, ... when that folder already exists."""
    from datetime import datetime

    base = Path("runs") / f"{name}{'-' + kind if kind else ''}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def prepare_world(scenario: Scenario, exchange: Exchange | None = None):
    """Build the world of ``scenario`` and run the checks that need the data (what ``run`` does
    before it starts anything, and ``validate`` too). ``exchange`` is the scenario's exchange, when
    the caller resolved it already. Raises :class:`ScenarioError` naming the key when the data
    cannot be built or split as described."""
    config = scenario.config
    exchange = exchange or plugins.exchange(config.protocol)
    try:
        world = make_world(config, exchange)
    except (ValueError, OSError) as err:
        key, sep, text = str(err).partition(": ")
        if sep and _is_key_path(key):
            raise ScenarioError(scenario.source, key, text) from None
        raise ScenarioError(scenario.source, "data", str(err)) from None
    try:  # settings that can only be checked against the data's shape
        exchange.check_world(config, world)
    except ValueError as err:
        key, _, text = str(err).partition(": ")
        raise ScenarioError(scenario.source, key, text) from None
    return world


def _is_key_path(text: str) -> bool:
    """Whether ``text`` looks like a scenario key path (``data.consumer.validation_size``)."""
    return bool(text) and "." in text and all(part.isidentifier() for part in text.split("."))


def run_scenario(scenario: Scenario, out_dir: str | Path, *, driver: Driver = "processes", launch: Launch = "forkserver",
                 on_round: Callable[[int, int], None] | None = None,
                 on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``scenario`` and write ``out_dir/report.json``, ``messages.csv`` and the resolved scenario.

    ``launch`` says how the processes driver starts parties: forked from a preloaded server and
    handed their share (``forkserver``), or as ``python -m marketplace <role>`` (``exec``).
    ``on_round(done, total)`` follows the protocol's rounds; ``on_phase(text)`` is told when the
    run moves on to work that has no rounds (the evaluation and the baselines, which can take a
    minute after the last round).

    Raises :class:`RunFolderError` if ``out_dir`` is a file or already holds files, ValueError for
    an unknown ``driver`` or ``launch``, and :class:`ScenarioError` if the data cannot be built as
    described (all before anything starts). Returns the report; its ``status`` says whether the run
    completed.
    """
    check_driver(driver, launch)
    return run_in_folder(scenario, check_run_folder(out_dir), driver=driver, launch=launch, on_round=on_round,
                         on_phase=on_phase)


def check_driver(driver: str, launch: str) -> None:
    """ValueError unless ``driver`` and ``launch`` name a driver and a way to start parties."""
    if driver not in ("processes", "inprocess"):
        raise ValueError(f"driver: expected 'processes' or 'inprocess', got {driver!r}")
    if launch not in ("forkserver", "exec"):
        raise ValueError(f"launch: expected 'forkserver' or 'exec', got {launch!r}")


def run_in_folder(scenario: Scenario, out: Path, *, driver: Driver = "processes", launch: Launch = "forkserver",
                  on_round: Callable[[int, int], None] | None = None,
                  on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """:func:`run_scenario` in ``out``, a new or empty folder, with ``driver`` and ``launch`` both
    already checked (:func:`check_run_folder`, :func:`check_driver`): for callers that check them
    before they start the run (a run in the background, a sweep)."""
    config = scenario.config
    if config.data.schema_only:
        raise ScenarioError(scenario.source, "data.schema", "a marketplace described by its public schema holds no rows "
                            "to simulate: serve it (`marketplace serve`), each owner bringing its own file to `marketplace "
                            "agent --data` and each consumer its target to `marketplace request --data`; `marketplace "
                            "run` simulates a dataset (data.source)")
    exchange = plugins.exchange(config.protocol)  # resolved once for the run, and passed along
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


def evaluation_phase(config) -> str:
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


def _run_inprocess(scenario: Scenario, world, run_id: str, on_round,
                   exchange: Exchange) -> tuple[list[dict[str, Any]], str | None, float]:
    config = scenario.config
    parties = frozenset(party_ids(config))
    nodes = [build_node(config, p, world=world, run_id=run_id, exchange=exchange, parties=parties) for p in party_ids(config)]
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
    reports = [party_report(n, role_name=n.role.role_name, wall_s=wall, driver={}, scenario=scenario) for n in nodes]
    return reports, failure, transport_s


def _run_processes(scenario: Scenario, resolved: Path, out: Path, run_id: str, on_round, launch: Launch,
                   world) -> tuple[list[dict[str, Any]], str | None]:
    run = run_processes(scenario, resolved, out, run_id, on_round=on_round, launch=launch, world=world)
    parties = []
    for child in run.children:
        path = out / "parties" / f"{child.party}.json"  # a party's own file, or an owner host's
        try:
            written = {rep.get("id"): rep for rep in read_reports(path)}
        except (OSError, ValueError):
            written = {}
        for party in child.parties:
            rep = written.get(party)
            if rep is None:
                rep = {"id": party, "role": role_of(party), "pid": child.proc.pid, "host": socket.gethostname(),
                       "status": "failed", "failure": f"no report (exit status {child.exit_code}); last log line: {last_line(child.log_path)}"}
            rep["exit_code"] = _exit_code_of(rep, child)
            rep["log"] = str(child.log_path)
            if len(child.parties) > 1:
                rep["process"] = child.party
            parties.append(rep)
    order = {p: i for i, p in enumerate(party_ids(scenario.config))}
    parties.sort(key=lambda rep: order.get(rep["id"], len(order)))
    return parties, _process_failures(run, parties)


def _exit_code_of(rep: dict[str, Any], child) -> int | None:
    """A party's exit status. An owner host exits 3 when the run failed for any of its owners; each
    hosted owner's own status then comes from its report (0 completed, 3 failed). Any other status
    of the host (an internal error, killed) is every hosted owner's."""
    if len(child.parties) == 1 or child.exit_code not in (EXIT_OK, EXIT_RUN_FAILED):
        return child.exit_code
    return EXIT_OK if rep.get("status") == "completed" else EXIT_RUN_FAILED


def _process_failures(run, parties: list[dict[str, Any]]) -> list[str]:
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
    failed = [(rep["id"], rep["exit_code"], rep.get("failure") or last_line(Path(rep["log"])))
              for rep in parties if rep["exit_code"] != 0 and rep["id"] not in dropouts]
    return failures + failure_lines(failed)  # the party at fault first (marketplace.runner.blame)


def assemble_report(scenario: Scenario, world, driver: str, parties: list[dict[str, Any]], failure: str | list[str] | None,
                    wall_s: float, extra_transport_s: float, run_id: str,
                    exchange: Exchange | None = None) -> dict[str, Any]:
    """The run report from every party's own report (``parties``) and what the driver saw go
    wrong (``failure``). The run is ``failed`` when a party that was not excluded failed, when it
    lost every owner, or when nothing of the owners reached its result (the exchange's
    ``nothing_released``): ``failures`` then says why, and ``owners_lost`` names every lost owner.
    ``exchange`` is the scenario's exchange, when the caller resolved it already. For a world
    that does not hold every party's rows (``world.central`` False: a marketplace described by its
    public schema), ``data`` holds the schema and no row counts, and ``references_absent`` names
    every figure the report lacks and why (:mod:`marketplace.reporting.absent`)."""
    config = scenario.config
    exchange = exchange or plugins.exchange(config.protocol)
    by_id = {p["id"]: p for p in parties}
    curator = (by_id.get(CURATOR) or {}).get("result") or {}
    failures = ([failure] if isinstance(failure, str) else list(failure)) if failure else []
    failure = "; ".join(failures)
    dropped = set(excluded_owners(curator))
    failures += [f"{p['id']}: {p['failure']}" for p in parties
                 if p.get("failure") and p["id"] not in dropped and (not failure or p["id"] not in failure)]
    results = {p["id"]: p.get("result") or {} for p in parties}
    lost = owners_lost(config.parties.owners, curator)
    declined = declined_owners(curator)
    failures += loss_failures(lost, exchange.nothing_released(config, results) if by_id.get(CURATOR) else None,
                              len(declined))
    status = "failed" if failures else "completed"
    sections = exchange.report(config, world, results)
    history = _history(sections.pop("history", None))
    lifetime = lifetime_section(config, parties, declined)
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
             **({"exit_code": p["exit_code"]} if "exit_code" in p else {}),
             **({"process": p["process"]} if "process" in p else {})}
            for p in parties
        ],
        "transport_security": ("in-process (no sockets)" if driver == "inprocess" else
                               "curve (authenticated, encrypted)" if config.transport.security == "curve" else "none (plaintext)"),
        "messages": message_summary(parties, dropped=dropped),
        "timing": timing_summary(parties, wall_s, extra_transport_s),
        "dropouts": curator.get("dropouts", {}),
        "owners_lost": lost,
        "lifetime": lifetime,
        "noise": noise_summary(config, parties, sections.get("privacy") or {}, (lifetime or {}).get("request_id")),
        "deployment": deployment_section(config),
        **sections,
        "history": history,
        "data": data_section(config, world),
        "config": scenario.raw,
        "party_details": {p["id"]: {k: p.get(k) for k in ("result", "timing", "driver", "errors", "errors_received", "log")} for p in parties},
        "pid_of_runner": os.getpid(),
    }
    per_owner = owner_section(config, report, exchange)
    if per_owner is not None:
        report["privacy_per_owner"] = per_owner
    if not world.central:  # every figure the report lacks, in one place (marketplace.reporting.absent)
        missing = {**(sections.get(REFERENCES_ABSENT) or {}), "data.rows": report["data"]["rows"]["absent"]}
        report.pop(REFERENCES_ABSENT, None)
        report[REFERENCES_ABSENT] = missing
    return report


def deployment_section(config) -> dict[str, str]:
    """Whose rows the run's parties held: ``simulated`` (every party's rows built from one dataset,
    ``data.source``, and the seed, so a reader of the report could rebuild any party's data, and the
    central references are computed), or ``own`` (a marketplace described by its public schema: each
    party read only its own files, and the figures that need everyone's rows are absent)."""
    if config.data.schema_only:
        return {"data": "own", "note": "each party held only its own rows (its own files, checked against the public "
                                       "schema data.schema); nobody held everyone's rows"}
    return {"data": "simulated", "note": f"a simulation: every party's rows were built from one dataset "
                                         f"({config.data.source.kind}) and the run seed, which anyone with the scenario "
                                         f"can rebuild"}


def data_section(config, world) -> dict[str, Any]:
    """The report's ``data``: the size, group and label counts of every part of a simulation's
    world; for a marketplace described by its public schema (``world.central`` False), the schema
    alone (feature names and ranges, classes, groups) and no row counts, which nobody there holds
    (each party's rows are its own)."""
    if world.central:
        return world_summary(world)
    from marketplace.data.public_schema import schema_summary

    rows = absent(why_absent("every party's rows (or their counts, which each party keeps to itself)"))
    if config.data.schema is None:  # a world without rows that no schema describes: its columns only
        return {"dim": world.dim, "group_names": list(world.validation.group_names),
                "features": [{"name": name} for name in world.validation.feature_names], "label": None,
                "group": None, "rows": rows}
    return {**schema_summary(config.data.schema), "rows": rows}


def noise_summary(config, parties: list[dict[str, Any]], privacy: dict[str, Any],
                  request_id: str | None = None) -> dict[str, Any]:
    """Who could strip each party's privacy noise (from each party's own report), and one line
    that says it for the whole run: the report's ``noise`` section. The line follows each party's
    ``origin`` (:func:`marketplace.privacy.noise.describe`), never the wording of its source, and
    names every ledger whose coins (a sampled choice, such as the auction's) any party can
    reproduce from the seed. A run none of whose ledgers records a noisy release has no noise to
    strip, and says that instead.
    ``request_id``: the lifetime request id the run was charged under (mixed into every stream)."""
    by_party = {p["id"]: p["noise"] for p in parties if isinstance(p.get("noise"), dict)}
    if not any(isinstance(ledger, dict) and "noise" in ledger for ledger in privacy.values()):
        return {"source": config.noise.source, "parties": {},
                "summary": "no privacy noise: nothing in this run was released with noise (see privacy)"}
    kept = ("origin", "source", "who_can_strip", "reproducible")
    parties_out = {p: {k: d[k] for k in kept if k in d} | {"origin": noise_keys.origin_of(d)} for p, d in by_party.items()}
    line = noise_line({p: d["origin"] for p, d in parties_out.items()}, request_id)
    coined = [name for name, ledger in privacy.items() if isinstance(ledger, dict) and isinstance(ledger.get("noise"), dict)
              and ledger["noise"].get("coins") and noise_keys.origin_of(ledger["noise"]) == "seed"]
    if coined:  # a sampled choice (the auction's) rather than added noise: reproducing it voids the ledger's eps
        whose, eps = ((f"the {coined[0]} ledger's", f"the {coined[0]} ledger's eps") if len(coined) == 1 else
                      (f"the {', '.join(coined)} ledgers'", "their eps"))
        line += (f"; {whose} coins come from the seed too: any party that knows it can reproduce them, so {eps} does "
                 "not hold against such a party")
    return {"source": config.noise.source, "summary": line, "parties": parties_out}


def noise_line(origins: dict[str, str], request_id: str | None = None) -> str:
    """The run's noise line from each party's noise ``origin`` (``seed``, ``key``, ``fresh``,
    ``secure``). ``request_id``: the lifetime request id mixed into every stream, which the
    scenario every party reads holds as well as the seed (so it hides nothing)."""
    if not origins:
        return "unknown (no party reported where its noise came from)"
    seeded = [p for p, o in origins.items() if o == "seed"]
    keyed = [p for p, o in origins.items() if o == "key"]
    secret = [p for p, o in origins.items() if o in ("fresh", "secure")]
    request = (f" and the request id ({request_id}), which the scenario every party reads holds too, so it hides "
               "nothing (it only makes each request's noise differ)") if request_id else ""
    if len(seeded) == len(origins):
        return (f"from the run seed{request}: any party of this run (and any reader of this report) can recompute and "
                "strip every party's noise; a simulation's choice (noise.source: keys gives each party a secret key)")
    parts = []
    if seeded:
        parts.append(f"{len(seeded)} of {len(origins)} parties ({_few(seeded)}) draw noise from the run seed{request} "
                     "and no key: anyone with the seed can strip theirs")
    if keyed:
        parts.append(("each party's own noise key: " if len(keyed) == len(origins) else
                      f"{len(keyed)} of {len(origins)} parties ({_few(keyed)}) draw noise with their own noise key: ")
                     + "only whoever can read a party's key file can strip that party's noise")
    if secret:
        parts.append("secret to each party: nobody else can recompute it (OS entropy, or keys never written down)"
                     if len(secret) == len(origins) else
                     f"nobody else can recompute the noise of {_few(secret)} (OS entropy, or a key never written down)")
    return "; ".join(parts)


def _few(parties: list[str], shown: int = 5) -> str:
    return ", ".join(parties[:shown]) + (f" and {len(parties) - shown} more" if len(parties) > shown else "")


def assemble_from_party_reports(scenario: Scenario, parties_dir: Path, out: Path, *, wait_s: float = 0.0,
                                driver: str = "compose") -> dict[str, Any]:
    """The run report of parties that ran on their own (containers, other machines): read each
    party's report from ``parties_dir``, rebuild the world from the scenario for the evaluation, and
    write ``out/report.json`` and ``out/messages.csv``.

    ``wait_s`` waits that long for every report to appear (a report step started alongside the
    parties, as a Kubernetes Job is). A report still missing then makes the run failed, naming the
    party. Reports written for another scenario or run raise :class:`ReportMismatch` (nothing is
    written): they would mix two runs into one report. A party the curator dropped is the exception:
    it may have run another configuration (that is often why it was dropped) or written no report at
    all, and neither fails the run; the curator's report says why it was dropped. ``driver`` names
    who ran the parties in the report: ``compose`` (on their own), or ``market`` (a session of
    ``marketplace serve``).
    """
    config = scenario.config
    read, paths, problems = find_party_reports(parties_dir, party_ids(config), wait_s=wait_s)
    parties, missing = [], {}
    for party in party_ids(config):
        rep = read.get(party)
        if rep is None:
            rep = {"id": party, "role": role_of(party), "status": "failed", "failure": problems[party]}
            missing[party] = rep["failure"]
        parties.append(rep)
    dropped = set(excluded_owners((read.get(CURATOR) or {}).get("result") or {}))
    check_reports(scenario, {p: r for p, r in read.items() if p not in dropped}, paths)
    failures = [text for party, text in missing.items() if party not in dropped]
    exchange = plugins.exchange(config.protocol)  # resolved once, and passed along
    world = make_world(config, exchange)
    wall_s = max(((p.get("timing") or {}).get("wall_s") or 0.0) for p in parties)
    run_id = next((p.get("run_id") for p in parties if p.get("run_id")), default_run_id(scenario))
    report = assemble_report(scenario, world, driver, parties, "; ".join(failures) or None, wall_s, 0.0, run_id,
                             exchange)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "report.json", report)
    write_messages_csv(report, out / "messages.csv")
    write_history_files(report, out)
    return report


def _history(section: dict[str, Any] | None) -> dict[str, Any]:
    """The report's ``history`` from the exchange's section (re-checked: columns, ``x`` and
    ``plot`` agree), or an empty one from an exchange that records none."""
    if section is None:
        return empty_history()
    checked = history_section(section.get("rounds") or [], x=section.get("x", "round"),
                              columns=section.get("columns") or [], plot=section.get("plot") or (),
                              about=section.get("about"))
    return checked | ({"note": section["note"]} if section.get("note") else {})
