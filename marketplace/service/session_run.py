"""One session of a served marketplace on the server's side: its curator, run on the live links.

A session is a context, not a process. When the server admits a request it builds the session's
curator node in its own process (from the public share of the world: the curator never holds an
owner's rows), drives it with a :class:`~marketplace.transport.shared_link.SharedLinkLoop` whose
frames travel on the owners' and the consumer's control connections, tagged with the session id,
and invites every present owner. When the curator is done it gathers the parties' reports, each as its
party hands it over (the owners' through their agents: what they publish; the consumer's from its
client: only what the server needs, :func:`~marketplace.runtime.publication.consumer_handover`),
assembles the run report in memory and hands it, with those reports (:func:`handed_back`), to the
consumer that asked, and to nobody else; the consumer assembles its own copy again with its whole
report (:func:`assemble_session`). The session's files (scenario, party reports, report) are written
to ``STATE/sessions/<id>/`` for the record; a disk that refuses them makes the session refuse to
start (before any owner is invited, so nothing is charged) or, once it ran, only costs the server's
copy: the consumer still gets its report.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from marketplace.roles import CONSUMER, CURATOR
from marketplace.runtime import host_nodes, link_settings, party_report, scenario_identity
from marketplace.scenario import Scenario
from marketplace.service.worlds import WorldCache
from marketplace.transport.shared_link import SharedLinkLoop

log = logging.getLogger("marketplace.serve")


@dataclass
class Session:
    """A request, from the moment it is queued to its report."""

    id: str
    consumer: str
    routing: bytes
    """The consumer's control connection (where its frames and its report go)."""
    scenario: Scenario
    folder: Path
    state: str = "queued"
    """queued, running (the curator works), collecting (the parties' reports), done."""
    loop: SharedLinkLoop | None = None
    invited: set[str] = field(default_factory=set)
    invited_on: dict[str, bytes] = field(default_factory=dict)
    """The control connection each invited owner was invited on: only that connection can report its part
    (an agent started again after a crash connects anew and never knew the session)."""
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    references: bool = False
    """Whether its report holds the central references of a simulated marketplace (serve
    ``--references``, or the request asked): computing them costs the server the protocol's work again."""
    declined: dict[str, str] = field(default_factory=dict)
    """Invited owner -> why its agent declined the session: it takes no part and sends no report."""
    queued_at: float = field(default_factory=time.monotonic)
    started: float = 0.0
    deadline: float = 0.0
    """Once its curator is done: until when the parties that took part to the end are waited for."""
    grace_end: float = 0.0
    """Once its curator is done: until when the parties the session lost are waited for."""
    consumer_gone: bool = False
    status: str = ""
    text: str = ""
    """The session's scenario as YAML: sent to every party."""
    to_consumer: list[bytes] = field(default_factory=list)
    """Every frame the curator addressed to the consumer, sent or not: what the consumer is owed
    (:mod:`.kept`)."""
    resumers: list[bytes] = field(default_factory=list)
    """Connections of the consumer that asked for the session again while it was ending: answered
    when it ends."""

    def wall_s(self) -> float:
        return round(time.monotonic() - self.started, 3) if self.started else 0.0


def write_session_files(s: Session) -> None:
    """The session's folder and scenario; raises OSError when the disk refuses (nothing started yet)."""
    s.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    (s.folder / "parties").mkdir(exist_ok=True, mode=0o700)
    (s.folder / "scenario.yaml").write_text(s.text)


def start_curator(
    s: Session, worlds: WorldCache, send: Callable[[bytes | None, bytes], None], route_of: Callable[[str], Any]
) -> SharedLinkLoop:
    """Build the session's curator from the public share of the world and start it on the live links."""
    from marketplace import plugins

    exchange = plugins.exchange(s.scenario.config.protocol)  # the curator's side of the session starts
    (node,) = host_nodes(s.scenario, [CURATOR], run_id=s.id, exchange=exchange, world=worlds.get(s.scenario, exchange))
    loop = SharedLinkLoop(node, link_settings(s.scenario), send, route_of)
    loop.stats.endpoint = "the marketplace's control connections"
    loop.begin()
    return loop


def curator_report(s: Session) -> dict[str, Any]:
    """The curator's own report, once its node is done (its local work run)."""
    assert s.loop is not None
    node = s.loop.node
    s.loop.close()
    node.finish()
    return party_report(
        node,
        role_name="curator",
        wall_s=s.wall_s(),
        driver=s.loop.stats.to_dict() | {"shared_links": True},
        identity=scenario_identity(s.scenario),
    )


def take_report(s: Session, sender: str, party: str, text: bytes, *, consumer: str | None = None) -> str | None:
    """File a party's report of session ``s`` sent by ``sender`` (the identity of its connection);
    returns why it was ignored, or None."""
    if s.state not in ("running", "collecting"):
        return f"session {s.id} is {s.state}"
    if consumer is not None and (consumer != s.consumer or party != CONSUMER):
        return f"{consumer} sent a report for session {s.id}, which is {s.consumer}'s"
    if consumer is None and (party != sender or sender not in s.invited):
        return f"{sender} sent a report as {party} for session {s.id}"
    try:
        report = json.loads(text)
    except ValueError:
        return f"{sender}: a report that is not JSON"
    if not isinstance(report, dict) or report.get("id") != party or report.get("run_id") != s.id:
        return f"{sender}: a report that is not its own for session {s.id}"
    s.reports[party] = report
    return None


def ended_early(s: Session, party: str) -> str | None:
    """Why the curator of session ``s`` loses owner ``party`` now that it reported, or None. An owner's
    agent reports once the owner's part is over; one that reports *failed* while the curator still
    waits for it (neither its ``bye`` came nor was it lost: its part broke in its agent, a ledger that
    failed mid-session, say) will send nothing more, and its connection stays open for its other
    sessions, so nothing else would tell the curator before its progress deadline. Call it once the
    frames the owner sent before its report were handed to the curator (its ``bye`` among them)."""
    report = s.reports.get(party)
    if s.state != "running" or s.loop is None or report is None or report.get("status") != "failed":
        return None
    if party in s.loop.lost or party in s.loop.node.finished_peers:
        return None
    return f"its part ended in its agent: {report.get('failure') or 'failed'}"


def missing_reports(s: Session) -> dict[str, str]:
    """Why each party of session ``s`` that sent no report sent none."""
    from marketplace.parties import party_ids

    missing = {}
    for party in party_ids(s.scenario.config):
        if party in s.reports:
            continue
        if party in s.declined:
            missing[party] = f"{party} declined session {s.id}: its agent could not take part: {s.declined[party]}"
        elif party in (CURATOR, CONSUMER) or party in s.invited:
            missing[party] = f"{party} sent no report of session {s.id}" + (
                " (the consumer left)" if party == CONSUMER and s.consumer_gone else ""
            )
        else:
            missing[party] = f"{party} not invited: not connected to the marketplace when the session started"
    return missing


def assemble(s: Session, worlds: WorldCache, failure: str | None) -> dict[str, Any]:
    """The session's run report from the reports gathered (a party that sent none is named)."""
    return assemble_session(s.scenario, s.reports, missing_reports(s), failure, worlds, references=s.references)


def assemble_session(
    scenario: Scenario,
    reports: dict[str, dict[str, Any]],
    missing: dict[str, str],
    failure: str | None,
    worlds: WorldCache,
    *,
    references: bool = True,
) -> dict[str, Any]:
    """A session's run report from its parties' reports (``missing``: why each absent one is absent)
    and the session's own ``failure``: what the server archives, and what the consumer assembles again
    with its whole report in place of the one it handed over (:func:`handed_back`). ``references``:
    whether it holds the central references of a simulated marketplace
    (:func:`~marketplace.runtime.assemble.assemble_report`)."""
    from marketplace import plugins
    from marketplace.runtime import assemble_from_reports

    try:
        exchange = plugins.exchange(scenario.config.protocol)  # the session's report is assembled once, here
        world = worlds.get(scenario, exchange)
        report = assemble_from_reports(
            scenario, dict(reports), missing, world=world, driver="market", exchange=exchange, references=references
        )
        if failure:
            report["status"], report["failures"] = "failed", [failure, *report["failures"]]
    except Exception as err:  # noqa: BLE001 - the consumer is told why; it writes no report.json of this
        log.exception("session %s: the report could not be assembled", scenario.config.lifetime.request_id)
        report = {"status": "failed", "failures": [failure or f"the report could not be assembled: {err}"]}
    return report


def handed_back(s: Session, failure: str | None, texts: dict[str, str]) -> bytes:
    """What the consumer of session ``s`` gets besides the run report, to assemble its own copy
    (:func:`assemble_session`) with what it kept to itself: the parties' reports as the server
    received them (each as its party published it), why any is missing, the session's failure, and
    whether the report holds the central references (the consumer's copy holds what the server's does).
    ``json.dumps`` of them, the reports' own texts taken from ``texts`` (:func:`report_texts`)."""
    reports = "{" + ", ".join(f"{json.dumps(party)}: {texts[party]}" for party in s.reports) + "}"
    rest = json.dumps({"missing": missing_reports(s), "failure": failure, "references": s.references})
    return f'{{"reports": {reports}, {rest[1:]}'.encode()


def report_texts(reports: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each report as compact JSON (``json.dumps``): written once, for the consumer and for the
    session's files (:func:`archive`)."""
    from marketplace.runtime import json_default

    return {party: json.dumps(data, default=json_default) for party, data in reports.items()}


def archive(s: Session, report: dict[str, Any], text: str, texts: dict[str, str]) -> str | None:
    """Write the parties' reports and the run report ``report`` into the session's folder, each
    indented from its compact text (``text``, and :func:`report_texts`' ``texts``); returns why it
    could not (a full disk, say), or None. The consumer's copy does not depend on it."""
    from marketplace.runtime import json_indented, write_text_whole

    try:
        parties = s.folder / "parties"
        parties.mkdir(parents=True, exist_ok=True, mode=0o700)
        for party, data in s.reports.items():
            write_text_whole(parties / f"{party}.json", json_indented(texts[party], data))
        write_text_whole(s.folder / "report.json", json_indented(text, report))
    except OSError as err:
        log.error("session %s: could not write its files to %s: %s", s.id, s.folder, err)
        return f"{s.folder}: {err.strerror or err}"
    return None
