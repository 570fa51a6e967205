"""Where the parties' own reports are filed, and how they are read back.

A party in a process of its own writes ``<party>.json``. An owner host writes one file for all of
its owners, named after the host (``owner-1..owner-500.json``): a map ``{"owner_host": label,
"reports": [...]}`` holding each hosted owner's report, every one exactly what that owner would
have written alone. One file rather than hundreds because creating a file is the expensive part:
on an ext4 disk it cost 0.7 ms with the machine idle and 2.3 ms during a run, so a host of 500
owners spent more than a second writing reports after its last message, and the run was not over
until it had.

The runner reads a host's file back directly; ``marketplace assemble`` reads every file in the
folder, so the reports of parties started by hand, in containers or by Kubernetes are found however
the owners were grouped into processes.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marketplace.parties import host_label
from marketplace.roles.lifetime import settle as settle_lifetime
from marketplace.runtime.identity import ReportMismatch, scenario_identity
from marketplace.runtime.publication import OWN, split

if TYPE_CHECKING:
    from marketplace.scenario import Scenario
    from marketplace.transport.node import Node


OWN_REPORTS = "own"
"""The folder, beside the parties' reports of a run that ``marketplace run`` started, that holds each
party's own report (what it published and what it kept to itself: ``--own-report``)."""


def party_report(
    node: Node,
    *,
    role_name: str,
    wall_s: float,
    driver: dict[str, Any],
    scenario: Scenario | None = None,
    identity: dict[str, Any] | None = None,
    own: bool = False,
) -> dict[str, Any]:
    """This party's part of the run report: what it hands to whoever assembles the run report, so
    only what it may publish (:mod:`marketplace.runtime.publication`: an owner's result keys that its
    protocol lists, none of its timings, and its failure in a declared form only). ``own``: also
    what it keeps to itself, under ``own``, for its own report file or a simulation's runner. It
    names the run and the scenario (``scenario``, or its :func:`scenario_identity` already computed:
    an owner host writes hundreds of reports), so that ``marketplace assemble`` can refuse reports
    of another run."""
    role = node.role
    lifetime = settle_lifetime(node.party)
    timing = node.timing() | {"io_s": driver.get("io_s", 0.0), "idle_s": driver.get("idle_s", 0.0), "wall_s": wall_s}
    if identity is None and scenario is not None:
        identity = scenario_identity(scenario)
    account = {
        "result": role.result(),
        "timing": timing,
        "driver": driver,
        "errors_received": role.errors_received[:100],
        "failure": role.failure,
    }
    shown, kept = split((identity or {}).get("protocol"), role_name, account)
    return {
        "id": node.party_id,
        "run_id": node.run_id,
        **({"scenario": identity} if identity is not None else {}),
        "role": role_name,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "status": "failed" if role.failure else "completed",
        "failure": shown["failure"],
        "result": shown["result"],
        **({"noise": node.party.noise} if node.party.noise is not None else {}),
        **({"lifetime": lifetime} if lifetime is not None else {}),
        "counters": node.counters.to_dict(),
        "timing": shown["timing"],
        "driver": shown["driver"],
        "errors": node.errors[:100],
        "errors_dropped": node.errors_dropped,
        "refused_by_peer": node.error_summary()["by_peer"],
        "errors_received": shown["errors_received"],
        "errors_received_dropped": role.errors_received_dropped,
        **({OWN: kept} if own and kept else {}),
    }


def host_reports_path(report_dir: str | Path, owners: list[str]) -> Path:
    """The one file an owner host serving ``owners`` writes its owners' reports to."""
    return Path(report_dir) / f"{host_label(owners)}.json"


def host_bundle(owners: list[str], reports: list[dict[str, Any]]) -> dict[str, Any]:
    """What an owner host writes: its label and its owners' reports, in the order of ``owners``."""
    return {"owner_host": host_label(owners), "reports": reports}


def reports_in(data: Any) -> list[dict[str, Any]] | None:
    """The reports a host's file holds, or None when ``data`` is not a host's file (one party's report)."""
    if isinstance(data, dict) and "owner_host" in data and isinstance(data.get("reports"), list):
        return [rep for rep in data["reports"] if isinstance(rep, dict)]
    return None


def read_reports(path: Path) -> list[dict[str, Any]]:
    """Every report in ``path``: a host's owners', or the one report of a party's own file.
    Raises OSError or ValueError (not JSON) as reading does."""
    data = json.loads(path.read_text())
    found = reports_in(data)
    return found if found is not None else [data]


def find_party_reports(
    folder: Path, parties: list[str], *, wait_s: float = 0.0
) -> tuple[dict[str, dict[str, Any]], dict[str, Path], dict[str, str]]:
    """Find the report of every party in ``parties`` among the files of ``folder``.

    Returns (reports, paths, problems): each found party's report and the file it came from, and
    for each party not found, why (no file, or the file that should hold it was unreadable).
    ``<party>.json`` is that party's file, whatever the report inside says its id is (so that
    :func:`~marketplace.runtime.identity.check_reports` can refuse one filed under another's name);
    any other ``*.json`` file is read as an owner host's. ``wait_s`` waits that long, reading the
    folder again every second, for reports that are still to come.

    Raises :class:`ReportMismatch` when two files hold a report of the same party (say a host's file
    left from an earlier run that grouped the owners differently): one would be counted twice.
    """
    wanted = set(parties)
    deadline = time.monotonic() + wait_s
    while True:
        reports, paths, unreadable = _scan(folder, wanted)
        if len(reports) == len(wanted) or time.monotonic() >= deadline:
            break
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
    problems = {}
    for party in parties:
        if party in reports:
            continue
        own = folder / f"{party}.json"
        problems[party] = unreadable.get(own) or (
            f"no report at {own}"
            + (f" nor in any owner host's file ({'; '.join(unreadable.values())})" if unreadable else "")
        )
    return reports, paths, problems


def _scan(folder: Path, wanted: set[str]) -> tuple[dict[str, dict[str, Any]], dict[str, Path], dict[Path, str]]:
    reports: dict[str, dict[str, Any]] = {}
    paths: dict[str, Path] = {}
    unreadable: dict[Path, str] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except OSError as err:
            unreadable[path] = f"{path}: unreadable ({err.strerror or err})"
            continue
        except ValueError as err:
            unreadable[path] = f"{path}: not JSON ({err})"
            continue
        hosted = reports_in(data)
        if hosted is None:
            if path.stem not in wanted:
                continue  # not a party of this scenario (another file in the folder)
            found = [(path.stem, data)]
        else:
            found = [(rep["id"], rep) for rep in hosted if rep.get("id") in wanted]
        for party, rep in found:
            if party in reports:
                raise ReportMismatch(
                    f"two reports of {party}: {paths[party]} and {path} (files of two runs in one "
                    f"folder?): keep one run's files only"
                )
            reports[party], paths[party] = rep, path
    return reports, paths, unreadable
