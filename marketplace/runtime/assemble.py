"""The run report, assembled from every party's own report: the common sections (deployment, data, noise,
privacy per owner, lifetime, history, messages and timing) around the protocol's own, whether the parties
ran under ``marketplace run`` (:mod:`marketplace.runner.run`) or on their own and left their reports in a folder
(:func:`assemble_from_party_reports`, for ``marketplace assemble`` and ``marketplace serve``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from marketplace import plugins
from marketplace.data import World, world_summary
from marketplace.messages import PROTOCOL_VERSION
from marketplace.parties import make_world, party_ids, role_of
from marketplace.plugins import Exchange
from marketplace.privacy import noise as noise_keys
from marketplace.reporting.absent import REFERENCES_ABSENT, absent, why_absent
from marketplace.reporting.history import empty_history, history_section, write_history_files
from marketplace.roles import CURATOR
from marketplace.runtime.identity import check_reports
from marketplace.runtime.json_files import write_json
from marketplace.runtime.lifetime import lifetime_section
from marketplace.runtime.losses import declined_owners, excluded_owners, loss_failures, owners_lost
from marketplace.runtime.nodes import default_run_id
from marketplace.runtime.party_reports import find_party_reports
from marketplace.runtime.per_owner import owner_section
from marketplace.runtime.publication import OWN, PARTS, SIMULATION_DRIVERS, published
from marketplace.runtime.report import message_summary, timing_summary, write_messages_csv
from marketplace.scenario import Scenario, ScenarioConfig
from marketplace.version import __version__


def assemble_report(
    scenario: Scenario,
    world: World,
    driver: str,
    parties: list[dict[str, Any]],
    failure: str | list[str] | None,
    wall_s: float,
    extra_transport_s: float,
    run_id: str,
    exchange: Exchange,
    *,
    references: bool = True,
) -> dict[str, Any]:
    """The run report from every party's own report (``parties``) and what the driver saw go
    wrong (``failure``). The run is ``failed`` when a party that was not excluded failed, when it
    lost every owner, or when nothing of the owners reached its result (the exchange's
    ``nothing_released``): ``failures`` then says why, and ``owners_lost`` names every lost owner.
    ``exchange`` is the scenario's exchange, resolved once where the run starts. For a world
    that does not hold every party's rows (``world.central`` False: a marketplace described by its
    public schema), ``data`` holds the schema and no row counts, and ``references_absent`` names
    every figure the report lacks and why (:mod:`marketplace.reporting.absent`). ``references`` False
    (a served session that did not ask for them) leaves out the references the exchange would compute
    on the whole world, where it has a form without them
    (:meth:`~marketplace.plugins.Exchange.report_without_references`), and ``references_absent`` names them."""
    config = scenario.config
    simulation = driver in SIMULATION_DRIVERS
    parties = [_as_published(config.protocol, p, keep_own=simulation) for p in parties]
    by_id = {p["id"]: p for p in parties}
    # a simulation's sections may use what each party kept to itself (its runner held every party's
    # data); a deployment's use only what the parties published
    results = {p["id"]: (p.get("result") or {}) | ((p.get(OWN) or {}).get("result") or {}) for p in parties}
    curator = results.get(CURATOR) or {}
    failures = ([failure] if isinstance(failure, str) else list(failure)) if failure else []
    failure = "; ".join(failures)
    declined = declined_owners(curator)
    # an owner the curator saw decline released nothing and was charged nothing: its report going
    # missing after (its process died) does not fail the run
    dropped = set(excluded_owners(curator)) | set(declined)
    failures += [
        f"{p['id']}: {p['failure']}"
        for p in parties
        if p.get("failure") and p["id"] not in dropped and (not failure or p["id"] not in failure)
    ]
    lost = owners_lost(config.parties.owners, curator)
    failures += loss_failures(
        lost, exchange.nothing_released(config, results) if by_id.get(CURATOR) else None, len(declined)
    )
    status = "failed" if failures else "completed"
    sections = (None if references else exchange.report_without_references(config, world, results)) or exchange.report(
        config, world, results
    )
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
            {
                "id": p["id"],
                "role": p.get("role"),
                "pid": p.get("pid"),
                "host": p.get("host"),
                "status": p.get("status"),
                **({"exit_code": p["exit_code"]} if "exit_code" in p else {}),
                **({"process": p["process"]} if "process" in p else {}),
            }
            for p in parties
        ],
        "transport_security": (
            "in-process (no sockets)"
            if driver == "inprocess"
            else "curve (authenticated, encrypted)"
            if config.transport.security == "curve"
            else "none (plaintext)"
        ),
        "messages": message_summary(parties, dropped=dropped),
        "timing": timing_summary(
            [p | {"timing": p.get("timing") or (p.get(OWN) or {}).get("timing")} for p in parties],
            wall_s,
            extra_transport_s,
        ),
        "dropouts": curator.get("dropouts", {}),
        "owners_lost": lost,
        "lifetime": lifetime,
        "noise": noise_summary(config, parties, sections.get("privacy") or {}, (lifetime or {}).get("request_id")),
        "deployment": deployment_section(config),
        **sections,
        "history": history,
        "data": data_section(config, world),
        "config": scenario.raw,
        "party_details": {
            p["id"]: {k: p.get(k) for k in ("result", "timing", "driver", "errors", "errors_received", "log")}
            | ({SIMULATOR_VIEW: p[OWN]} if p.get(OWN) else {})
            for p in parties
        },
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


SIMULATOR_VIEW = "simulator_view"
"""The key of ``party_details.<party>`` that holds, in a simulation's report, what the party kept to
itself (what a deployment's report never holds)."""


def _as_published(protocol: str, party: dict[str, Any], *, keep_own: bool) -> dict[str, Any]:
    """A party's report as the run report may use it: only what the party may publish
    (:func:`marketplace.runtime.publication.published`, applied again here: a deployment's report never
    holds more, whatever a party handed over), and, in a simulation (``keep_own``), what it kept to
    itself under ``own``. Its own, the report as read, is not changed."""
    shown = published(protocol, party.get("role"), {k: party.get(k) for k in PARTS})
    out = {k: v for k, v in party.items() if k != OWN} | {k: v for k, v in shown.items() if k in party}
    if keep_own and party.get(OWN):
        out[OWN] = party[OWN]
    return out


def deployment_section(config: ScenarioConfig) -> dict[str, str]:
    """Whose rows the run's parties held: ``simulated`` (every party's rows built from one dataset,
    ``data.source``, and the seed, so a reader of the report could rebuild any party's data, and the
    central references are computed), or ``own`` (a marketplace described by its public schema: each
    party read only its own files, and the figures that need everyone's rows are absent)."""
    if config.data.schema_only:
        return {
            "data": "own",
            "note": "each party held only its own rows (its own files, checked against the public "
            "schema data.schema); nobody held everyone's rows",
        }
    return {
        "data": "simulated",
        "note": f"a simulation: every party's rows were built from one dataset "
        f"({config.data.source.kind}) and the run seed, which anyone with the scenario "
        f"can rebuild",
    }


def data_section(config: ScenarioConfig, world: World) -> dict[str, Any]:
    """The report's ``data``: the size, group and label counts of every part of a simulation's
    world; for a marketplace described by its public schema (``world.central`` False), the schema
    alone (feature names and ranges, classes, groups) and no row counts, which nobody there holds
    (each party's rows are its own)."""
    if world.central:
        return world_summary(world)
    from marketplace.data.public_schema import schema_summary

    rows = absent(why_absent("every party's rows (or their counts, which each party keeps to itself)"))
    if config.data.schema is None:  # a world without rows that no schema describes: its columns only
        return {
            "dim": world.dim,
            "group_names": list(world.validation.group_names),
            "features": [{"name": name} for name in world.validation.feature_names],
            "label": None,
            "group": None,
            "rows": rows,
        }
    return {**schema_summary(config.data.schema), "rows": rows}


def noise_summary(
    config: ScenarioConfig, parties: list[dict[str, Any]], privacy: dict[str, Any], request_id: str | None = None
) -> dict[str, Any]:
    """Who could strip each party's privacy noise (from each party's own report), and one line
    that says it for the whole run: the report's ``noise`` section. The line follows each party's
    ``origin`` (:func:`marketplace.privacy.noise.describe`), never the wording of its source, and
    names every ledger whose coins (a sampled choice, such as the auction's) any party can
    reproduce from the seed. A run none of whose ledgers records a noisy release has no noise to
    strip, and says that instead.
    ``request_id``: the lifetime request id the run was charged under (mixed into every stream)."""
    by_party = {p["id"]: p["noise"] for p in parties if isinstance(p.get("noise"), dict)}
    if not any(isinstance(ledger, dict) and "noise" in ledger for ledger in privacy.values()):
        return {
            "source": config.noise.source,
            "parties": {},
            "summary": "no privacy noise: nothing in this run was released with noise (see privacy)",
        }
    kept = ("origin", "source", "who_can_strip", "reproducible")
    parties_out = {
        p: {k: d[k] for k in kept if k in d} | {"origin": noise_keys.origin_of(d)} for p, d in by_party.items()
    }
    line = noise_line({p: d["origin"] for p, d in parties_out.items()}, request_id)
    coined = [
        name
        for name, ledger in privacy.items()
        if isinstance(ledger, dict)
        and isinstance(ledger.get("noise"), dict)
        and ledger["noise"].get("coins")
        and noise_keys.origin_of(ledger["noise"]) == "seed"
    ]
    if coined:  # a sampled choice (the auction's) rather than added noise: reproducing it voids the ledger's eps
        whose, eps = (
            (f"the {coined[0]} ledger's", f"the {coined[0]} ledger's eps")
            if len(coined) == 1
            else (f"the {', '.join(coined)} ledgers'", "their eps")
        )
        line += (
            f"; {whose} coins come from the seed too: any party that knows it can reproduce them, so {eps} does "
            "not hold against such a party"
        )
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
    request = (
        (
            f" and the request id ({request_id}), which the scenario every party reads holds too, so it hides "
            "nothing (it only makes each request's noise differ)"
        )
        if request_id
        else ""
    )
    if len(seeded) == len(origins):
        return (
            f"from the run seed{request}: any party of this run (and any reader of this report) can recompute and "
            "strip every party's noise; a simulation's choice (noise.source: keys gives each party a secret key)"
        )
    parts = []
    if seeded:
        parts.append(
            f"{len(seeded)} of {len(origins)} parties ({_few(seeded)}) draw noise from the run seed{request} "
            "and no key: anyone with the seed can strip theirs"
        )
    if keyed:
        parts.append(
            (
                "each party's own noise key: "
                if len(keyed) == len(origins)
                else f"{len(keyed)} of {len(origins)} parties ({_few(keyed)}) draw noise with their own noise key: "
            )
            + "only whoever can read a party's key file can strip that party's noise"
        )
    if secret:
        parts.append(
            "secret to each party: nobody else can recompute it (OS entropy, or keys never written down)"
            if len(secret) == len(origins)
            else f"nobody else can recompute the noise of {_few(secret)} (OS entropy, or a key never written down)"
        )
    return "; ".join(parts)


def _few(parties: list[str], shown: int = 5) -> str:
    return ", ".join(parties[:shown]) + (f" and {len(parties) - shown} more" if len(parties) > shown else "")


def assemble_from_party_reports(
    scenario: Scenario, parties_dir: Path, out: Path, *, wait_s: float = 0.0, driver: str = "compose"
) -> dict[str, Any]:
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
    read, paths, problems = find_party_reports(parties_dir, party_ids(scenario.config), wait_s=wait_s)
    exchange = plugins.exchange(scenario.config.protocol)  # resolved once, and passed along
    report = assemble_from_reports(scenario, read, problems, paths=paths, driver=driver, exchange=exchange)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "report.json", report)
    write_messages_csv(report, out / "messages.csv")
    write_history_files(report, out)
    return report


def assemble_from_reports(
    scenario: Scenario,
    read: dict[str, dict[str, Any]],
    problems: dict[str, str],
    *,
    paths: dict[str, Path] | None = None,
    world: Any = None,
    driver: str = "compose",
    exchange: Exchange,
    references: bool = True,
) -> dict[str, Any]:
    """The run report from the parties' own reports held in memory (``read``: party id -> report;
    ``problems``: why each missing one is missing), as :func:`assemble_from_party_reports` makes it
    from files (``paths`` names where each came from, for its errors). ``world`` is the scenario's
    world when the caller keeps it (a marketplace that serves many sessions), else it is rebuilt.
    ``exchange`` is the scenario's exchange, resolved once by the caller; ``references`` as for
    :func:`assemble_report`."""
    config = scenario.config
    paths = paths or {party: Path(f"<{party}'s report>") for party in read}
    parties, missing = [], {}
    for party in party_ids(config):
        rep = read.get(party)
        if rep is None:
            rep = {"id": party, "role": role_of(party), "status": "failed", "failure": problems.get(party, "no report")}
            missing[party] = rep["failure"]
        parties.append(rep)
    curator = (read.get(CURATOR) or {}).get("result") or {}
    dropped = set(excluded_owners(curator))
    check_reports(scenario, {p: r for p, r in read.items() if p not in dropped}, paths)
    # an owner the curator saw decline (its ledger refused the request: it released and was charged
    # nothing) whose own report went missing (its process died after) does not fail the run
    declined = set(declined_owners(curator))
    failures = [text for party, text in missing.items() if party not in dropped | declined]
    if world is None:
        world = make_world(config, exchange)
    wall_s = max(((p.get("timing") or {}).get("wall_s") or 0.0) for p in parties)
    run_id = next((p["run_id"] for p in parties if p.get("run_id")), default_run_id(scenario))
    return assemble_report(
        scenario,
        world,
        driver,
        parties,
        "; ".join(failures) or None,
        wall_s,
        0.0,
        run_id,
        exchange,
        references=references,
    )


def _history(section: dict[str, Any] | None) -> dict[str, Any]:
    """The report's ``history`` from the exchange's section (re-checked: columns, ``x`` and
    ``plot`` agree), or an empty one from an exchange that records none."""
    if section is None:
        return empty_history()
    checked = history_section(
        section.get("rounds") or [],
        x=section.get("x", "round"),
        columns=section.get("columns") or [],
        plot=section.get("plot") or (),
        about=section.get("about"),
    )
    return checked | ({"note": section["note"]} if section.get("note") else {})
