"""Launching every party as its own OS process and watching them until the run ends.

The runner starts the curator first (it binds a free port and writes the endpoint to a file), then
the owners and the consumer. Two ways to start a party, the same party either way:

* ``forkserver`` (default): a clean server process imports the libraries once, and each party is
  forked from it and handed only its own share of the data. Start-up costs milliseconds instead
  of an interpreter start, imports and a world rebuild per party (seconds on a small machine).
* ``exec``: each party is ``python -m marketplace <role> ...``, exactly what a container runs; it
  rebuilds the world from the scenario and keeps its own share.

Children get SIGKILL if their parent dies (Linux parent-death signal; the forkserver itself exits
with the runner) and are killed on every exit path of the runner, so a run never leaves orphans.
A run that overstays its timeout is killed and reported as failed; a curator that dies takes the
run with it.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import multiprocessing.connection
import os
import re
import resource
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from marketplace.data.dataset import World
from marketplace.messages.errors import cut
from marketplace.parties import host_label, party_ids, role_of, share_of
from marketplace.roles import CURATOR
from marketplace.runtime.command_line import party_command
from marketplace.runtime.forkserver import BLAS_ENV, forkserver_context
from marketplace.runtime.links import link_settings
from marketplace.runtime.party_reports import OWN_REPORTS
from marketplace.runtime.scheduling import start_as_party
from marketplace.scenario import Scenario
from marketplace.transport.host import FILES_PER_OWNER, HOST_SPARE_FILES

Launch = Literal["forkserver", "exec"]
log = logging.getLogger(__name__)
WATCH_EVERY_S = 0.05
"""How often the runner checks its children (progress, deadlines) while none of them exits."""
ROUND_RE = re.compile(rb"round (\d+)/(\d+) done")


class _ForkedProcess:
    """A forked party behind the small part of the Popen interface the runner uses."""

    def __init__(self, process: multiprocessing.process.BaseProcess) -> None:
        self.process = process
        self.pid = process.pid

    def poll(self) -> int | None:
        return None if self.process.is_alive() else self.process.exitcode

    def kill(self) -> None:
        self.process.kill()

    def wait(self) -> int | None:
        self.process.join()
        return self.process.exitcode

    @property
    def sentinel(self) -> int:
        """A file descriptor that becomes readable when the process ends."""
        return self.process.sentinel


@dataclass
class Child:
    party: str
    """The party it runs, or for an owner host a label (``owner-1..owner-8``)."""
    proc: subprocess.Popen | _ForkedProcess
    log_path: Path
    exit_code: int | None = None
    parties: list[str] = field(default_factory=list)
    """Every party it serves (one, or an owner host's owners)."""

    def __post_init__(self) -> None:
        if not self.parties:
            self.parties = [self.party]


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity, else the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def owners_per_host_limit(files: int | None = None) -> int:
    """The most owners one host can serve within the open-files limit a process may raise itself to
    (``files``: the hard limit of ``RLIMIT_NOFILE``), each owner needing
    :data:`~marketplace.transport.host.FILES_PER_OWNER` descriptors, with room for the process's own."""
    if files is None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        files = 1 << 20 if hard == resource.RLIM_INFINITY else hard
    return max(1, (files - HOST_SPARE_FILES) // FILES_PER_OWNER)


def owner_hosts(
    owners: list[str], per_process: int | str, cores: int | None = None, *, files: int | None = None
) -> list[list[str]]:
    """Split the owners into the groups one OS process each serves, in order. ``auto``: one group
    per core (at most one per owner), as even as possible (sizes differ by at most one), and more
    groups when one per core would not fit a host's owners in its open-files limit
    (:func:`owners_per_host_limit`: at 10,000 owners and a hard limit of 20,000 files, three)."""
    if per_process == "auto":
        hosts = min(len(owners), cores if cores is not None else available_cores())
        hosts = max(hosts, -(-len(owners) // owners_per_host_limit(files)))
    else:
        hosts = -(-len(owners) // int(per_process))
    hosts = max(1, hosts)
    size, extra = divmod(len(owners), hosts)
    groups, start = [], 0
    for i in range(hosts):
        end = start + size + (1 if i < extra else 0)
        groups.append(owners[start:end])
        start = end
    return [g for g in groups if g]


@dataclass
class ProcessRun:
    children: list[Child] = field(default_factory=list)
    failure: str | None = None
    killed: list[str] = field(default_factory=list)
    stragglers: list[str] = field(default_factory=list)
    """Parties still running ``grace_s`` after the curator exited (killed then). A straggler the
    curator had already excluded as a dropout (a hung owner) does not fail the run."""


def _spawn(cmd: list[str], party: str, log_dir: Path, parties: list[str] | None = None) -> Child:
    log_path = log_dir / f"{party}.log"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for var in BLAS_ENV:
        env.setdefault(var, "1")  # one process per party is the parallelism (see single_threaded_blas)
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=start_as_party,
            close_fds=True,
        )
    return Child(party, proc, log_path, parties=list(parties or ()))


def _fork(
    scenario: Scenario,
    parties: list[str],
    shares: dict[str, World],
    endpoint: str,
    report_to: Path,
    run_id: str,
    log_dir: Path,
    *,
    hosted: bool = False,
    endpoint_file: Path | None = None,
    own_report_to: Path | None = None,
) -> Child:
    """A party (or, ``hosted``, an owner host) forked from the forkserver and handed its shares."""
    from marketplace.runtime.party_process import forked_main

    label = host_label(parties)
    log_path = log_dir / f"{label}.log"
    process = forkserver_context().Process(
        target=forked_main,
        name=label,
        args=(
            scenario,
            parties,
            shares,
            endpoint,
            str(report_to),
            run_id,
            str(endpoint_file) if endpoint_file else None,
            str(log_path),
            hosted,
            str(own_report_to) if own_report_to else None,
        ),
    )
    process.start()
    return Child(label, _ForkedProcess(process), log_path, parties=list(parties))


def last_line(path: Path, limit: int = 300) -> str:
    """The last non-empty line of a party's log (the best one-line account of how it ended), cut to
    ``limit`` characters; empty when there is no log or nothing in it."""
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return cut(lines[-1], limit) if lines else ""


def run_processes(
    scenario: Scenario,
    scenario_path: Path,
    out_dir: Path,
    run_id: str,
    on_round: Callable[[int, int], None] | None = None,
    *,
    launch: Launch = "forkserver",
    world: World | None = None,
) -> ProcessRun:
    """Start every party, wait for all of them (with timeouts), and return how each one ended.

    ``launch="forkserver"`` needs ``world``: each forked party is handed its own share of it.
    """
    config = scenario.config
    t = config.transport
    log_dir, report_dir = out_dir / "logs", out_dir / "parties"
    own_dir = report_dir / OWN_REPORTS  # each party's own report: the runner of a simulation holds every party's data
    log_dir.mkdir(parents=True, exist_ok=True)
    report_dir.mkdir(parents=True, exist_ok=True)
    run = ProcessRun()
    endpoint_file = out_dir / "curator.endpoint"
    endpoint_file.unlink(missing_ok=True)
    try:

        def share(party: str) -> World:
            if world is None:  # checked before the first party starts
                raise ValueError("launch='forkserver' needs the world to hand each party its share")
            return share_of(world, party)

        def start(party: str, endpoint: str, *, endpoint_file: Path | None = None) -> Child:
            report, own = report_dir / f"{party}.json", own_dir / f"{party}.json"
            if launch == "forkserver":
                return _fork(
                    scenario,
                    [party],
                    {party: share(party)},
                    endpoint,
                    report,
                    run_id,
                    log_dir,
                    own_report_to=own,
                    endpoint_file=endpoint_file,
                )
            role = role_of(party)
            cmd = party_command(
                role,
                scenario=scenario_path,
                endpoint=endpoint,
                report=report,
                own_report=own,
                run_id=run_id,
                id=party if role == "owner" else None,
                endpoint_file=endpoint_file,
            )
            return _spawn(cmd, party, log_dir)

        if launch == "forkserver" and world is None:
            raise ValueError("launch='forkserver' needs the world to hand each party its share")
        curator = start(CURATOR, t.endpoint, endpoint_file=endpoint_file)
        run.children.append(curator)
        endpoint = _wait_for_endpoint(curator, endpoint_file, t.start_timeout_s)
        if endpoint is None:
            last = last_line(curator.log_path)
            run.failure = f"the curator did not bind within start_timeout_s={t.start_timeout_s:g} s: {last}"
            return run
        *owners, consumer = party_ids(config)[1:]
        # the consumer first: one connection, made before thousands of owners' handshakes queue up
        run.children.append(start(consumer, endpoint))
        for group in owner_hosts(owners, config.parties.owners_per_process):
            if len(group) == 1:
                run.children.append(start(group[0], endpoint))
            elif launch == "forkserver":
                run.children.append(
                    _fork(
                        scenario,
                        group,
                        {o: share(o) for o in group},
                        endpoint,
                        report_dir,
                        run_id,
                        log_dir,
                        hosted=True,
                        own_report_to=own_dir,
                    )
                )
            else:
                cmd = party_command(
                    "owners",
                    ids=",".join(group),
                    scenario=scenario_path,
                    endpoint=endpoint,
                    report_dir=report_dir,
                    own_report_dir=own_dir,
                    run_id=run_id,
                )
                run.children.append(_spawn(cmd, host_label(group), log_dir, parties=group))
        _watch(
            run,
            curator,
            deadline=time.monotonic() + t.run_timeout_s + t.start_timeout_s,
            grace_s=link_settings(scenario).heartbeat_timeout_s + 5.0,  # the parties' own, stretched with K
            finish_s=t.finish_timeout_s,
            dropouts=lambda: _dropouts(report_dir / f"{CURATOR}.json"),
            on_round=on_round,
        )
    finally:
        for child in run.children:
            if child.proc.poll() is None:
                child.proc.kill()
                run.killed.extend(child.parties)
            child.exit_code = child.proc.wait()
    return run


def _dropouts(curator_report: Path) -> set[str]:
    """The parties the curator dropped, from its report (empty if it wrote none)."""
    try:
        result = json.loads(curator_report.read_text()).get("result") or {}
    except (OSError, ValueError):
        return set()
    return set(result.get("dropouts") or {})


def cpu_ticks(pid: int) -> int | None:
    """CPU time (user + system, in clock ticks) a process has used so far; None where /proc cannot
    tell (the process is gone, or not Linux)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[11]) + int(fields[12])


def _wait_for_endpoint(curator: Child, endpoint_file: Path, timeout_s: float) -> str | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if endpoint_file.exists():
            return endpoint_file.read_text().strip()
        if curator.proc.poll() is not None:
            return None
        time.sleep(0.02)
    return None


def _watch(
    run: ProcessRun,
    curator: Child,
    *,
    deadline: float,
    grace_s: float,
    on_round: Callable[[int, int], None] | None,
    finish_s: float = 0.0,
    dropouts: Callable[[], set[str]] = set,
) -> None:
    """Wait until every child exits. After the curator exits, the others get ``grace_s`` to follow;
    past that, a child still computing (CPU time still growing: an owner fitting its model after
    its ``bye``) that serves no dropped party gets up to ``finish_s`` from the curator's exit."""
    curator_exit_at: float | None = None
    others_done_at: float | None = None
    offset = 0
    last_round = 0
    ticks: dict[int, tuple[int, float]] = {}  # pid -> (cpu ticks, when they last grew)
    dropped: set[str] | None = None
    while True:
        if on_round is not None:
            offset, last_round = _read_progress(curator.log_path, offset, last_round, on_round)
        alive = [c for c in run.children if c.proc.poll() is None]
        if not alive:
            return
        now = time.monotonic()
        if curator.proc.poll() is not None and curator_exit_at is None:
            curator_exit_at = now
        if curator_exit_at is not None:
            computing = [c for c in alive if _still_computing(c, ticks, now)]
        if curator_exit_at is not None and now - curator_exit_at > grace_s:
            if dropped is None:  # the curator wrote its report before it exited: read it once
                dropped = dropouts()
            busy = [c for c in computing if not dropped.intersection(c.parties)]
            if not busy or now - curator_exit_at > max(grace_s, finish_s):
                run.stragglers = [p for c in alive for p in c.parties]
                return
        others_alive = [c for c in alive if c is not curator]
        if curator_exit_at is None and not others_alive:
            others_done_at = others_done_at if others_done_at is not None else now
            if now - others_done_at > grace_s:  # everyone else left (lost contact with a hung curator)
                run.failure = run.failure or (
                    f"the curator was still running {grace_s:g} s after every other party had "
                    f"ended (hung?); killed: {last_line(curator.log_path)}"
                )
                return
        if now > deadline:
            run.failure = (
                f"run timed out (transport.run_timeout_s); killed {', '.join(p for c in alive for p in c.parties)}"
            )
            return
        _wait_for_an_exit(alive, WATCH_EVERY_S)


def _wait_for_an_exit(alive: list[Child], timeout_s: float) -> None:
    """Sleep ``timeout_s``, or less if a forked child ends meanwhile (its sentinel): the run is
    over the moment its last party exits, not up to a polling period later."""
    sentinels = [c.proc.sentinel for c in alive if isinstance(c.proc, _ForkedProcess)]
    if sentinels:
        multiprocessing.connection.wait(sentinels, timeout=timeout_s)
    else:
        time.sleep(timeout_s)


def _still_computing(child: Child, ticks: dict[int, tuple[int, float]], now: float, window_s: float = 2.0) -> bool:
    """Whether ``child`` used CPU within the last ``window_s`` (a stopped or blocked one does not)."""
    pid = child.proc.pid
    used = cpu_ticks(pid) if pid is not None else None  # a process not started has no pid
    if pid is None or used is None:
        return False
    last = ticks.get(pid)
    if last is None or used > last[0]:
        ticks[pid] = (used, now)
        return True
    return now - last[1] <= window_s


def _read_progress(path: Path, offset: int, last: int, on_round: Callable[[int, int], None]) -> tuple[int, int]:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            chunk = f.read()
    except OSError:
        return offset, last
    end = chunk.rfind(b"\n") + 1
    for m in ROUND_RE.finditer(chunk[:end]):
        done, total = int(m.group(1)), int(m.group(2))
        if done > last:
            last = done
            on_round(done, total)
    return offset + end, last
