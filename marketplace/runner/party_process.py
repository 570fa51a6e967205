"""One party as its own OS process: build its role from the scenario, serve it over ZeroMQ, write
its part of the report. This is what `marketplace curator|owner|consumer` runs (and what each
container runs under docker-compose).

Exit status: 0 the party finished its part; 3 the run failed for it (a peer was lost, the curator
ended the run as failed, a timeout); 2 bad arguments or scenario; 1 an internal error.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits

from marketplace import plugins
from marketplace.data.dataset import World
from marketplace.parties import build_role, host_label, load_owner_file, make_world, party_ids, share_of
from marketplace.roles.lifetime import settle as settle_lifetime
from marketplace.roles import CURATOR
from marketplace.runner.identity import scenario_identity
from marketplace.runner.party_reports import host_bundle, host_reports_path
from marketplace.runner.scheduling import scheduling_policy
from marketplace.privacy import noise as noise_keys
from marketplace.scenario import Scenario, ScenarioConfig
from marketplace.warm_imports import load_in_background
from marketplace.transport.curve import CurveKeys
from marketplace.transport.node import Node
from marketplace.transport.host import serve_owners
from marketplace.transport.zmq_driver import LinkSettings, scaled_heartbeats, serve_curator, serve_party

log = logging.getLogger(__name__)

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_RUN_FAILED = 0, 1, 2, 3


def single_threaded_blas():
    """One BLAS thread per party. The marketplace's parallelism is one process per party; BLAS
    threads on top of that fight over the cores, and an owner's bid (one matrix-vector product over
    its rows) measured 10-40x slower with two OpenBLAS threads than with one on a 2-core machine."""
    return threadpool_limits(limits=1)


def default_run_id(scenario: Scenario) -> str:
    return f"{scenario.config.name}-seed{scenario.config.seed}"


def link_settings(scenario: Scenario) -> LinkSettings:
    t = scenario.config.transport
    interval, timeout = scaled_heartbeats(t.heartbeat_interval_s, t.heartbeat_timeout_s, scenario.config.parties.owners + 2)
    return LinkSettings(
        heartbeat_interval_s=interval, heartbeat_timeout_s=timeout,
        start_timeout_s=t.start_timeout_s, run_timeout_s=t.run_timeout_s, progress_timeout_s=t.progress_timeout_s,
        max_message_bytes=t.max_message_bytes,
        high_water_mark=t.high_water_mark, send_timeout_s=t.send_timeout_s, max_queued_frames=t.max_queued_frames,
        refusal_budget=t.refusal_budget, quarantine_s=t.quarantine_s,
        curve_keys=t.curve_keys if t.security == "curve" else None,
    )


def check_own_keys(scenario: Scenario, settings: LinkSettings, parties: list[str]) -> None:
    """Under CURVE, each of ``parties`` must find its own key pair in the key folder: a missing
    folder or key file fails here, before any work (ValueError, naming what to pass)."""
    if scenario.config.transport.security != "curve":
        return
    if settings.curve_keys is None:
        raise ValueError("CURVE is on (transport.security) but no key folder was given: pass --keys DIR "
                         "(made by `marketplace keys generate DIR --owners K`) or --insecure for development")
    for party in parties:
        CurveKeys(Path(settings.curve_keys), party).own()


def noise_origin(config: ScenarioConfig, party: str) -> noise_keys.NoiseOrigin:
    """Where ``party``'s noise comes from under ``config.noise``, for a party started alone or by
    the runner (which has resolved ``auto``): its key file in ``noise.keys`` or its CURVE key folder,
    else a fresh key."""
    folders = [config.noise.keys, config.transport.curve_keys]
    return noise_keys.resolve(config.noise.source, party, folders, started_alone=True)


def party_report(node: Node, *, role_name: str, wall_s: float, driver: dict[str, Any],
                 scenario: Scenario | None = None, identity: dict[str, Any] | None = None) -> dict[str, Any]:
    """This party's part of the run report. It names the run and the scenario (``scenario``, or its
    :func:`scenario_identity` already computed: an owner host writes hundreds of reports), so that
    ``marketplace assemble`` can refuse reports of another run."""
    role = node.role
    lifetime = settle_lifetime(role)
    timing = node.timing() | {"io_s": driver.get("io_s", 0.0), "idle_s": driver.get("idle_s", 0.0), "wall_s": wall_s}
    if identity is None and scenario is not None:
        identity = scenario_identity(scenario)
    return {
        "id": node.party_id,
        "run_id": node.run_id,
        **({"scenario": identity} if identity is not None else {}),
        "role": role_name,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "status": "failed" if role.failure else "completed",
        "failure": role.failure,
        "result": role.result(),
        **({"noise": role.noise} if role.noise is not None else {}),
        **({"lifetime": lifetime} if lifetime is not None else {}),
        "counters": node.counters.to_dict(),
        "timing": timing,
        "driver": driver,
        "errors": node.errors[:100],
        "errors_dropped": node.errors_dropped,
        "refused_by_peer": node.error_summary()["by_peer"],
        "errors_received": role.errors_received[:100],
        "errors_received_dropped": role.errors_received_dropped,
    }


def write_json(path: str | Path, data: Any, *, indent: int | None = 2) -> None:
    """Write ``data`` as JSON, whole: to a temporary file first, then renamed into place, so that a
    reader waiting for the file never sees half of it. (``indent=None`` for large files read by
    programs: the compact form is written by the C encoder, several times faster.)"""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=indent, default=_json_default))
    os.replace(tmp, path)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot write {type(value).__name__} to JSON")


def run_party(scenario: Scenario, *, party: str, endpoint: str, report_path: str | None, run_id: str | None,
              endpoint_file: str | None = None, data_file: str | None = None, share: World | None = None) -> int:
    """Build ``party``'s role and serve it until the run ends; returns the process exit status.

    ``share`` is the party's part of the world when the launcher already has it; otherwise the
    party rebuilds the world from the scenario and keeps only its own share.
    """
    started = time.perf_counter()
    config = scenario.config
    settings = link_settings(scenario)
    check_own_keys(scenario, settings, [party])
    owner_data = load_owner_file(data_file) if data_file else None
    protocol = plugins.exchange(config.protocol)  # resolved once for this party, and passed along
    if share is None:
        share = share_of(make_world(config, protocol), party)
    role = build_role(config, party, world=share, owner_data=owner_data, noise=noise_origin(config, party),
                      exchange=protocol)
    load_in_background(role.warm_imports)  # after the role is built (see marketplace.warm_imports)
    node = Node(role, run_id=run_id or default_run_id(scenario), max_message_bytes=config.transport.max_message_bytes,
                parties=frozenset(party_ids(config)))
    log.info("%s (pid %d) starting: %s", party, os.getpid(), endpoint)
    try:
        with single_threaded_blas():
            if party == CURATOR:
                stats = serve_curator(node, endpoint, settings, on_bound=lambda ep: _announce(ep, endpoint_file))
            else:
                stats = serve_party(node, endpoint, settings)
    except Exception:  # report the crash, then exit with a clear status
        role.fail("internal error: " + traceback.format_exc(limit=5))
        log.exception("%s crashed", party)
        if report_path:
            write_json(report_path, party_report(node, role_name=role.role_name, wall_s=time.perf_counter() - started, driver={},
                                                  scenario=scenario))
        return EXIT_INTERNAL
    report = party_report(node, role_name=role.role_name, wall_s=time.perf_counter() - started,
                          driver=stats.to_dict() | {"scheduling": scheduling_policy()}, scenario=scenario)
    if report_path:
        write_json(report_path, report)
        log.info("%s: report written to %s", party, report_path)
    if role.failure:
        log.error("%s: run failed: %s", party, role.failure)
        return EXIT_RUN_FAILED
    log.info("%s finished", party)
    return EXIT_OK


def run_owner_host(scenario: Scenario, *, owners: list[str], endpoint: str, report_dir: str | Path | None,
                   run_id: str | None, shares: dict[str, World] | None = None) -> int:
    """Serve ``owners`` from this one process (an owner host, :mod:`marketplace.transport.host`)
    until the run ends; the owners' reports go to one file, ``report_dir/<first>..<last>.json``
    (:mod:`marketplace.runner.party_reports`).

    Exit status: 0 when every hosted owner finished its part, 3 when the run failed for any of
    them (each owner's report says which), 1 an internal error.
    """
    started = time.perf_counter()
    config = scenario.config
    settings = link_settings(scenario)
    check_own_keys(scenario, settings, owners)
    protocol = plugins.exchange(config.protocol)  # resolved once for the host's owners, and passed along
    if shares is None:
        world = make_world(config, protocol)
        shares = {owner: share_of(world, owner) for owner in owners}
        del world
    parties = frozenset(party_ids(config))  # one set for every hosted node
    identity = scenario_identity(scenario)  # one for every hosted owner's report
    rid = run_id or default_run_id(scenario)
    nodes = [Node(build_role(config, owner, world=shares[owner], noise=noise_origin(config, owner), exchange=protocol), run_id=rid,
                  max_message_bytes=config.transport.max_message_bytes, parties=parties) for owner in owners]

    def file_reports(wall_s: float, driver_of: Callable[[Node], dict[str, Any]]) -> None:
        """Every hosted owner's report, in the host's one file (:mod:`marketplace.runner.party_reports`)."""
        if report_dir is not None:
            reports = [party_report(node, role_name=node.role.role_name, wall_s=wall_s, driver=driver_of(node), identity=identity)
                       for node in nodes]
            write_json(host_reports_path(report_dir, owners), host_bundle(owners, reports), indent=None)

    log.info("owner host (pid %d) serving %d owners (%s..%s): %s", os.getpid(), len(owners), owners[0], owners[-1], endpoint)
    try:
        with single_threaded_blas():
            stats = serve_owners(nodes, endpoint, settings)
    except Exception:
        trace = traceback.format_exc(limit=5)
        log.exception("owner host crashed")
        for node in nodes:
            if not node.role.failure:
                node.role.fail("internal error in its owner host: " + trace)
        file_reports(time.perf_counter() - started, lambda node: {})
        return EXIT_INTERNAL
    wall = time.perf_counter() - started
    failed = [node.party_id for node in nodes if node.role.failure]
    policy = scheduling_policy()
    file_reports(wall, lambda node: stats[node.party_id].to_dict() | {"hosted_with": len(nodes), "scheduling": policy})
    if failed:
        log.error("run failed for %d of %d hosted owners (%s)", len(failed), len(nodes), ", ".join(failed[:10]))
        return EXIT_RUN_FAILED
    log.info("owner host finished: %d owners", len(nodes))
    return EXIT_OK


def _announce(endpoint: str, endpoint_file: str | None) -> None:
    log.info("curator bound at %s", endpoint)
    if endpoint_file:
        tmp = Path(endpoint_file + ".tmp")
        tmp.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(endpoint)
        os.replace(tmp, endpoint_file)


def forked_party_main(scenario: Scenario, party: str, share: World, endpoint: str, report_path: str, run_id: str,
                      endpoint_file: str | None, log_path: str) -> None:
    """Entry point of a party forked by the runner's forkserver (modules already imported, the
    party's share handed over): the same party as `marketplace <role>`, minus the start-up cost."""
    import sys

    _child_setup(log_path, party)
    sys.exit(run_party(scenario, party=party, endpoint=endpoint, report_path=report_path, run_id=run_id,
                       endpoint_file=endpoint_file, share=share))


def forked_host_main(scenario: Scenario, owners: list[str], shares: dict[str, World], endpoint: str, report_dir: str,
                     run_id: str, log_path: str) -> None:
    """Entry point of an owner host forked by the runner's forkserver (see :func:`forked_party_main`)."""
    import sys

    _child_setup(log_path, host_label(owners))
    sys.exit(run_owner_host(scenario, owners=owners, endpoint=endpoint, report_dir=report_dir, run_id=run_id,
                            shares=shares))


def _child_setup(log_path: str, label: str) -> None:
    """A forked child: set up as every party the runner starts, then log to ``log_path``."""
    import sys

    from marketplace.runner.scheduling import start_as_party

    start_as_party()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {label} %(levelname)s %(message)s", stream=sys.stderr, force=True)
