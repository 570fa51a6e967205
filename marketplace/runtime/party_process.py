"""Parties as OS processes: build their nodes from the scenario, serve them over ZeroMQ, write
their part of the report. This is what `marketplace curator|owner|consumer|owners` runs (and what
each container runs under docker-compose), and what every party the runner forks runs.

A process is a *host* of one or more nodes: a party alone (the curator binds, any other party
connects), or an owner host serving many owners in one loop (:mod:`marketplace.transport.host`).

Exit status: 0 every party finished its part; 3 the run failed for one of them (a peer was lost,
the curator ended the run as failed, a timeout); 2 bad arguments or scenario; 1 an internal error.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from marketplace import plugins
from marketplace.data.dataset import World
from marketplace.data.own_files import ReadLimits
from marketplace.parties import (
    host_label,
    make_world,
    own_rows,
    party_ids,
    share_of,
    with_own_rows,
)
from marketplace.plugins import Exchange
from marketplace.roles import CURATOR
from marketplace.runtime.identity import scenario_identity
from marketplace.runtime.json_files import write_json
from marketplace.runtime.links import check_own_keys, link_settings
from marketplace.runtime.nodes import build_node, default_run_id
from marketplace.runtime.party_reports import (
    host_bundle,
    host_reports_path,
    party_report,
)
from marketplace.runtime.scheduling import scheduling_policy, single_threaded_blas
from marketplace.scenario import Scenario
from marketplace.transport.host import serve_owners
from marketplace.transport.link_settings import DriverStats, LinkSettings
from marketplace.transport.node import Node
from marketplace.transport.zmq_driver import serve_curator, serve_party
from marketplace.warm_imports import load_in_background

log = logging.getLogger(__name__)

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_RUN_FAILED = 0, 1, 2, 3


def run_host(
    scenario: Scenario,
    parties: list[str],
    *,
    endpoint: str,
    run_id: str | None,
    report_to: str | Path | None,
    own_report_to: str | Path | None = None,
    hosted: bool = False,
    endpoint_file: str | None = None,
    shares: Mapping[str, World] | None = None,
    data_files: Mapping[str, str | Path] | None = None,
    test_file: str | Path | None = None,
    limits: ReadLimits | None = None,
) -> int:
    """Build the nodes of ``parties`` and serve them from this process until the run ends; returns
    the process exit status (module docstring; 3 when the run failed for any of them, each
    party's report says which).

    ``hosted`` serves owners as an owner host (:func:`~marketplace.transport.host.serve_owners`),
    whose reports go to one file, ``report_to/<first>..<last>.json``
    (:mod:`marketplace.runtime.party_reports`); otherwise ``parties`` is one party, served alone,
    and ``report_to`` is its report file. ``None``: no report. That report holds only what the
    party may publish (:mod:`marketplace.runtime.publication`): it is what ``marketplace assemble``
    reads. ``own_report_to`` (a file, or for a host a folder, as ``report_to``) also writes the
    party's own report: that and what it kept to itself (an owner's row count, its timings), for
    the party alone or a simulation's runner.

    ``shares`` are the parties' parts of the world when the launcher already has them; otherwise
    the world is rebuilt from the scenario and each party keeps only its own share. ``data_files``
    (and the consumer's ``test_file``) are the parties' own rows (:func:`marketplace.parties.own_rows`),
    all read within ``limits`` and checked before anything connects.
    """
    started = time.perf_counter()
    settings = link_settings(scenario)
    check_own_keys(scenario, settings, parties)
    exchange = plugins.exchange(scenario.config.protocol)  # resolved once for the process, and passed along
    nodes = host_nodes(
        scenario,
        parties,
        run_id=run_id,
        exchange=exchange,
        shares=shares,
        data_files=data_files,
        test_file=test_file,
        limits=limits,
    )
    # after the roles are built (see marketplace.warm_imports)
    load_in_background(tuple(dict.fromkeys(name for node in nodes for name in node.role.warm_imports)))
    identity = scenario_identity(scenario)  # one for every node's report
    report_file, own_file = (
        None if to is None else host_reports_path(to, parties) if hosted else Path(to)
        for to in (report_to, own_report_to)
    )

    def file_reports(driver_of: Any) -> None:
        wall_s = time.perf_counter() - started
        for path, own in ((report_file, False), (own_file, True)):
            if path is None:
                continue
            reports = [
                party_report(
                    node,
                    role_name=node.role.role_name,
                    wall_s=wall_s,
                    driver=driver_of(node),
                    identity=identity,
                    own=own,
                )
                for node in nodes
            ]
            if hosted:
                write_json(path, host_bundle(parties, reports), indent=None)
            else:
                write_json(path, reports[0])
            if own:
                path.chmod(0o600)  # what the party keeps to itself: for its own eyes

    if hosted:
        log.info(
            "owner host (pid %d) serving %d owners (%s..%s): %s",
            os.getpid(),
            len(parties),
            parties[0],
            parties[-1],
            endpoint,
        )
    else:
        log.info("%s (pid %d) starting: %s", parties[0], os.getpid(), endpoint)
    try:
        with single_threaded_blas():
            stats = _serve(nodes, endpoint, settings, hosted=hosted, endpoint_file=endpoint_file)
    except Exception:  # report the crash, then exit with a clear status
        trace = traceback.format_exc(limit=5)
        log.exception("owner host crashed" if hosted else f"{parties[0]} crashed")
        for node in nodes:
            node.role.fail(("internal error in its owner host: " if hosted else "internal error: ") + trace)
        file_reports(lambda node: {})
        return EXIT_INTERNAL
    policy = scheduling_policy()
    hosted_with = {"hosted_with": len(nodes)} if hosted else {}
    file_reports(lambda node: stats[node.party_id].to_dict() | hosted_with | {"scheduling": policy})
    failed = [node for node in nodes if node.role.failure]
    if not hosted:
        if report_file is not None:
            log.info("%s: report written to %s", parties[0], report_file)
        if failed:
            log.error("%s: run failed: %s", parties[0], failed[0].role.failure)
        else:
            log.info("%s finished", parties[0])
    elif failed:
        log.error(
            "run failed for %d of %d hosted owners (%s)",
            len(failed),
            len(nodes),
            ", ".join(node.party_id for node in failed[:10]),
        )
    else:
        log.info("owner host finished: %d owners", len(nodes))
    return EXIT_RUN_FAILED if failed else EXIT_OK


def host_nodes(
    scenario: Scenario,
    parties: list[str],
    *,
    run_id: str | None,
    exchange: Exchange,
    shares: Mapping[str, World] | None = None,
    world: World | None = None,
    data_files: Mapping[str, str | Path] | None = None,
    test_file: str | Path | None = None,
    limits: ReadLimits | None = None,
    own: Mapping[str, dict[str, Any]] | None = None,
    run_parties: frozenset[str] | None = None,
) -> list[Node]:
    """The nodes of ``parties``, each built from its own share of the world only: ``shares`` when
    the launcher has them, else the shares of ``world`` (a marketplace that keeps its world between
    sessions), else of the world rebuilt from the scenario. ``data_files`` (and the consumer's
    ``test_file``) are the parties' own rows, read within ``limits`` and checked against the schema;
    ``own`` holds them already read, for the parties it names. ``exchange`` is the scenario's exchange,
    resolved once where the process or the session starts. ``run_parties`` is the run's party ids when
    the caller has them (an agent finds them once per session for all its owners: O(owners) each time)."""
    config = scenario.config
    own = {
        party: (own or {}).get(party)
        or own_rows(config, party, data=(data_files or {}).get(party), test=test_file, limits=limits)
        for party in parties
    }
    if shares is None:
        whole = world if world is not None else make_world(config, exchange)
        shares = {party: share_of(whole, party) for party in parties}
        del whole
    ids = run_parties if run_parties is not None else frozenset(party_ids(config))  # one set for every node
    rid = run_id or default_run_id(scenario)
    return [
        build_node(
            config,
            party,
            world=with_own_rows(shares[party], own[party]),
            run_id=rid,
            exchange=exchange,
            owner_data=own[party].get("owner"),
            parties=ids,
        )
        for party in parties
    ]


def _serve(
    nodes: list[Node], endpoint: str, settings: LinkSettings, *, hosted: bool, endpoint_file: str | None
) -> dict[str, DriverStats]:
    """Serve ``nodes`` to the end; each one's driver statistics by party id."""
    if hosted:
        return serve_owners(nodes, endpoint, settings)
    (node,) = nodes
    if node.party_id == CURATOR:
        return {CURATOR: serve_curator(node, endpoint, settings, on_bound=lambda ep: _announce(ep, endpoint_file))}
    return {node.party_id: serve_party(node, endpoint, settings)}


def _announce(endpoint: str, endpoint_file: str | None) -> None:
    log.info("curator bound at %s", endpoint)
    if endpoint_file:
        tmp = Path(endpoint_file + ".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(endpoint)
        os.replace(tmp, endpoint_file)


def forked_main(
    scenario: Scenario,
    parties: list[str],
    shares: dict[str, World],
    endpoint: str,
    report_to: str,
    run_id: str,
    endpoint_file: str | None,
    log_path: str,
    hosted: bool,
    own_report_to: str | None = None,
) -> None:
    """Entry point of a party or an owner host forked by the runner's forkserver (modules already
    imported, the parties' shares handed over): the same as `marketplace <role>` or `marketplace
    owners`, minus the start-up cost."""
    import sys

    _child_setup(log_path, host_label(parties))
    sys.exit(
        run_host(
            scenario,
            parties,
            endpoint=endpoint,
            report_to=report_to,
            own_report_to=own_report_to,
            run_id=run_id,
            hosted=hosted,
            endpoint_file=endpoint_file,
            shares=shares,
        )
    )


def _child_setup(log_path: str, label: str) -> None:
    """A forked child: set up as every party the runner starts, then log to ``log_path``."""
    import sys

    from marketplace.runtime.scheduling import start_as_party

    start_as_party()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {label} %(levelname)s %(message)s", stream=sys.stderr, force=True
    )
