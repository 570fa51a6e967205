"""The same `summarize` rounds in Flower and in ours, side by side: ms per round, CPU, memory.

    pip install -e '.[compare]'                        # flwr[simulation] (Ray); not part of the test extras
    python benchmarks/bench_flower.py --json flower.json       # K = 16, 256, 1,000; 20 rounds; 3 paired runs
    python benchmarks/bench_flower.py --owners 16 --engines flower-deploy,ours-processes --repeats 1
    python benchmarks/bench_flower.py --smoke  # K = 4, 3 rounds, Flower's simulation engine and ours in-process

The world is scenarios/quickstart.yaml with K owners, an even partition, P rounds and no
baselines, built by ``marketplace.parties.make_world`` as ``marketplace run`` builds it. Each
round the curator sends its direction g to every owner, every owner answers with one bid, and the
point is fetched from the best bidder only. Engines:

* ``flower-sim``: Flower's simulation engine (``flwr.simulation.run_simulation``, Ray; one actor
  per core, ``client_resources.num_cpus = 1``) running ``flower_summarize.py``'s ServerApp and
  ClientApp (Message API), whose maths are ours.
* ``flower-deploy``: Flower's deployment engine: a SuperLink and K SuperNodes as OS processes on
  loopback, insecure (no TLS), the app submitted with ``flwr run``; each SuperNode runs the
  ClientApp in a subprocess. The SuperLink keeps its state in an SQLite file (``--database``).
* ``flower-deploy-memory``: the same, the SuperLink keeping its state in memory (no ``--database``).
* ``ours-processes``: ``marketplace.run(..., driver="processes")``: every party its own process,
  ZeroMQ with CURVE on loopback.
* ``ours-process-each``: the same with ``parties.owners_per_process=1``: one OS process per owner,
  as Flower's deployment engine has one SuperNode per owner (``ours-processes`` hosts the owners
  in one process per core, each owner still on its own connection under its own CURVE key).
* ``ours-inprocess``: ``marketplace.run(..., driver="inprocess")``.

Each run is a fresh process tree, started from here; the engines run one after the other for each
repeat (paired, interleaved). The selected points (owner, row) of every run must equal ours
(the script exits 1 otherwise). Per run: ms per round, the median of the gaps between
consecutive round ends (timed inside the ServerApp for Flower, from the curator's "round N/P done"
records for ours), the CPU seconds of the whole process tree and its peak memory, the sum of the
PSS (proportional set size: shared pages split between the processes sharing them) of every
process in the tree, sampled every 0.2 s, with the sum of RSS too. The table shows the medians
over the repeats.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
ENGINES = (
    "flower-sim",
    "flower-deploy",
    "flower-deploy-memory",
    "ours-processes",
    "ours-process-each",
    "ours-inprocess",
)
EXTRA_HINT = "pip install -e '.[compare]'"
sys.path.insert(0, str(HERE))

from proctree import CLOCK_TICK, cpu_ticks, memory_kb, tree  # noqa: E402  (benchmarks/proctree.py)

# --- one run, in its own process ----------------------------------------------------------------


def _gaps_ms(ends: list[float]) -> float | None:
    gaps = [(b - a) * 1e3 for a, b in zip(ends, ends[1:])]
    return statistics.median(gaps) if gaps else None


def run_flower_sim(owners: int, rounds: int, workdir: Path) -> dict[str, Any]:
    """Flower's simulation engine in this process (Ray starts its own processes)."""
    import flower_summarize
    from flwr.simulation import run_simulation

    out = workdir / "flower.json"
    os.environ[flower_summarize.ENV] = json.dumps(
        {"owners": owners, "rounds": rounds, "out": str(out), "scenario": str(flower_summarize.SCENARIO)}
    )
    run_simulation(
        server_app=flower_summarize.server_app,
        client_app=flower_summarize.client_app,
        num_supernodes=owners,
        backend_config={
            "client_resources": {"num_cpus": 1, "num_gpus": 0.0},
            "init_args": {"num_cpus": os.cpu_count() or 1, "logging_level": "error"},
        },
    )
    if not out.exists():
        raise RuntimeError(f"Flower's simulation wrote no {out.name}: the ServerApp failed (see its log above)")
    done = json.loads(out.read_text())
    return {"selection": done["selection"], "ms_per_round": _gaps_ms(done["round_ends"])}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {timeout:.0f} s (expected the SuperLink)")


def flower_command(name: str) -> str:
    """Flower's console script ``name`` (``flwr``, ``flower-superlink``, ...): next to this interpreter
    if it is there (Flower installed in a virtual environment), else the one on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else (shutil.which(name) or name)


class FlowerDeployment:
    """Flower's deployment engine on loopback, insecure (no TLS): a SuperLink and ``owners`` SuperNodes
    as OS processes, and the Flower App (``flower_summarize.py``) they run, ready for ``flwr run``.

    Used as a context manager: entering starts the SuperLink and the SuperNodes (their logs in
    ``workdir/logs``), leaving stops them. The SuperLink keeps its state in an SQLite file
    (``database``) or in memory. The ServerApp writes its result to ``out``, or to the run config's
    ``out`` when a run sets one (``submit(out=...)``), so runs on one SuperLink do not share a file.
    """

    def __init__(self, owners: int, rounds: int, workdir: Path, *, database: bool = True, out: Path | None = None):
        import flower_summarize

        self.owners, self.workdir = owners, workdir
        self.out = out or workdir / "flower.json"
        self.app = workdir / "app"
        self.app.mkdir()
        shutil.copy(HERE / "flower_summarize.py", self.app / "flower_summarize.py")
        (self.app / "pyproject.toml").write_text(
            '[build-system]\nrequires = ["hatchling"]\nbuild-backend = "hatchling.build"\n\n'
            '[project]\nname = "summarizebench"\nversion = "1.0.0"\ndependencies = []\n\n'
            '[tool.hatch.build.targets.wheel]\npackages = ["."]\n\n'
            '[tool.flwr.app]\npublisher = "marketplace"\n\n'
            '[tool.flwr.app.components]\nserverapp = "flower_summarize:server_app"\n'
            'clientapp = "flower_summarize:client_app"\n\n'
            '[tool.flwr.app.config]\nout = ""\n'
        )
        home = workdir / "flwr-home"
        home.mkdir()
        self.link_port = _free_port()
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "bench"\n\n[superlink.bench]\naddress = "127.0.0.1:{self.link_port}"\n'
            "insecure = true\n"
        )
        self.env = {
            **os.environ,
            "FLWR_HOME": str(home),
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            flower_summarize.ENV: json.dumps(
                {"owners": owners, "rounds": rounds, "out": str(self.out), "scenario": str(flower_summarize.SCENARIO)}
            ),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(self.app), str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.logs = workdir / "logs"
        self.logs.mkdir()
        self.database = database
        self.superlink: subprocess.Popen | None = None
        self.supernodes: list[subprocess.Popen] = []

    def _start(self, name: str, cmd: list[str]) -> subprocess.Popen:
        with (self.logs / f"{name}.log").open("wb") as log:
            return subprocess.Popen(
                [flower_command(cmd[0]), *cmd[1:]], env=self.env, cwd=self.workdir, stdout=log, stderr=subprocess.STDOUT
            )

    def __enter__(self) -> FlowerDeployment:
        try:
            state = ["--database", str(self.workdir / "state.db")] if self.database else []  # none: in memory
            self.superlink = self._start(
                "superlink",
                ["flower-superlink", "--insecure", "--host", "127.0.0.1", "--port", str(self.link_port)] + state,
            )
            _wait_port(self.link_port, 60)
            for i in range(self.owners):
                self.supernodes.append(
                    self._start(
                        f"supernode-{i}",
                        ["flower-supernode", "--insecure", "--superlink", f"127.0.0.1:{self.link_port}"]
                        + ["--host", "127.0.0.1", "--port", str(_free_port())]
                        + ["--node-config", f"partition-id={i} num-partitions={self.owners}"],
                    )
                )
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM to the SuperNodes then the SuperLink; SIGKILL to any still up after 30 s."""
        procs = [p for p in [self.superlink, *self.supernodes] if p is not None]
        for p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def online_nodes(self, timeout: float = 120) -> int:
        """SuperNodes the SuperLink lists as online (``flwr supernode ls``)."""
        done = self.flwr(["supernode", "ls", "bench", "--format", "json"], timeout=timeout)
        try:
            nodes = json.loads(done.stdout).get("nodes", [])
        except ValueError:
            return 0
        return sum(1 for n in nodes if n.get("status") == "online")

    def wait_connected(self, timeout: float = 180) -> None:
        """Return once all ``owners`` SuperNodes are online at the SuperLink."""
        deadline = time.monotonic() + timeout
        while (online := self.online_nodes()) < self.owners:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the SuperLink lists {online} SuperNodes online after {timeout:.0f} s, expected {self.owners}; "
                    f"see {self.logs}"
                )
            time.sleep(0.5)

    def flwr(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        """The ``flwr`` CLI with this deployment's Flower home (its SuperLink connection ``bench``)."""
        return subprocess.run(
            [flower_command("flwr"), *args],
            env=self.env,
            cwd=self.workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def submit(self, timeout: float, out: Path | None = None) -> subprocess.CompletedProcess:
        """``flwr run --stream``: submit the app and return when the run has ended (its logs streamed)."""
        config = ["--run-config", f"out={json.dumps(str(out))}"] if out is not None else []
        return self.flwr(["run", str(self.app), "bench", "--stream", *config], timeout=timeout)

    def failure(self, run: subprocess.CompletedProcess) -> str:
        """What went wrong with a run that wrote no result: ``flwr run``'s output and the SuperLink's log."""
        return (
            f"no result from the ServerApp; flwr run said:\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}\n"
            f"SuperLink log:\n{(self.logs / 'superlink.log').read_text(errors='replace')[-3000:]}"
        )


def run_flower_deploy(
    owners: int, rounds: int, workdir: Path, timeout: float, *, database: bool = True
) -> dict[str, Any]:
    """Flower's deployment engine: a SuperLink, ``owners`` SuperNodes and ``flwr run``, all on loopback;
    the SuperLink's state in an SQLite file (``database``) or in memory."""
    with FlowerDeployment(owners, rounds, workdir, database=database) as deployment:
        run = deployment.submit(timeout)
        (deployment.logs / "flwr-run.log").write_text(run.stdout + run.stderr)
        if not deployment.out.exists():
            raise RuntimeError(deployment.failure(run))
    done = json.loads(deployment.out.read_text())
    return {"selection": done["selection"], "ms_per_round": _gaps_ms(done["round_ends"])}


class _RoundClock:
    """perf_counter of each "round N/P done" record of the in-process curator."""

    def __init__(self) -> None:
        import logging

        self.times: list[float] = []
        self.handler = logging.Handler(logging.INFO)
        self.handler.emit = self._emit  # type: ignore[method-assign]

    def _emit(self, record: Any) -> None:
        if record.getMessage().startswith("round "):
            self.times.append(time.perf_counter())


def _curator_log_round_ends(path: Path) -> list[float]:
    import re
    from datetime import datetime

    line_re = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) curator \w+ round \d+/\d+ done")
    return [
        datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        for m in map(line_re.match, path.read_text(errors="replace").splitlines())
        if m
    ]


def run_ours(
    owners: int, rounds: int, workdir: Path, driver: str, owners_per_process: int | None = None
) -> dict[str, Any]:
    """``marketplace.run`` on the same scenario with the given driver (and owners per process)."""
    import logging

    from flower_summarize import SCENARIO, scenario_overrides

    import marketplace

    overrides = scenario_overrides(owners, rounds)
    if owners_per_process is not None:
        overrides["parties.owners_per_process"] = owners_per_process
    scenario = marketplace.load(SCENARIO, overrides)
    clock = _RoundClock()
    logger = logging.getLogger("marketplace.protocols.summarize.curator")
    if driver == "inprocess":
        logger.setLevel(logging.INFO)
        logger.addHandler(clock.handler)
    report = marketplace.run(scenario, workdir / "run", driver=driver)
    logger.removeHandler(clock.handler)
    ends = clock.times if driver == "inprocess" else _curator_log_round_ends(workdir / "run" / "logs" / "curator.log")
    return {"selection": selection_rows(report), "ms_per_round": _gaps_ms(ends)}


def selection_rows(report: dict[str, Any]) -> list[list[Any]]:
    """[owner, row] of each point a simulated run's summary took, in order: what Flower's app reports.
    The report names each point by its serial (the k-th point its owner handed over), never its row;
    the simulator's view of the owner, which only a simulation holds, maps serial k to the row sent."""
    details = report["party_details"]
    return [[o, int(details[o]["simulator_view"]["result"]["sent_rows"][k])] for o, k, *_ in report["selection"]]


def run_one(engine: str, owners: int, rounds: int, timeout: float) -> dict[str, Any]:
    """One run of ``engine`` in this process (and the processes it starts)."""
    with tempfile.TemporaryDirectory(prefix=f"bench-flower-{engine}-") as tmp:
        workdir = Path(tmp)
        if engine == "flower-sim":
            return run_flower_sim(owners, rounds, workdir)
        if engine in ("flower-deploy", "flower-deploy-memory"):
            return run_flower_deploy(owners, rounds, workdir, timeout, database=engine == "flower-deploy")
        if engine == "ours-process-each":
            return run_ours(owners, rounds, workdir, "processes", owners_per_process=1)
        return run_ours(owners, rounds, workdir, engine.removeprefix("ours-"))


# --- the process tree: CPU and memory -----------------------------------------------------------


def _become_subreaper() -> None:
    """Orphaned descendants (daemons Ray or a SuperNode start) are re-parented to this process, so
    the tree below the run stays visible to :class:`TreeMeter`."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


class TreeMeter:
    """CPU seconds and peak memory of a process and all its descendants, sampled every ``interval``
    seconds. CPU: the last sample of every process seen (a process's last < ``interval`` s before it
    exits is missed); memory: the largest sum over the tree at one sample, of PSS and of RSS."""

    def __init__(self, root: int, interval: float = 0.2) -> None:
        self.root, self.interval = root, interval
        self.cpu: dict[int, float] = {}
        self.peak_pss_kb = self.peak_rss_kb = 0
        self.processes_seen: set[int] = set()

    def sample(self) -> None:
        pss_sum = rss_sum = 0
        for pid in tree(self.root):
            ticks = cpu_ticks(pid)
            if ticks is not None:
                self.cpu[pid] = max(ticks / CLOCK_TICK, self.cpu.get(pid, 0.0))
            rss, pss = memory_kb(pid)
            pss_sum, rss_sum = pss_sum + pss, rss_sum + rss
            self.processes_seen.add(pid)
        self.peak_pss_kb, self.peak_rss_kb = max(self.peak_pss_kb, pss_sum), max(self.peak_rss_kb, rss_sum)

    def figures(self) -> dict[str, Any]:
        return {
            "cpu_s": sum(self.cpu.values()),
            "peak_pss_mb": self.peak_pss_kb / 1024,
            "peak_rss_mb": self.peak_rss_kb / 1024,
            "processes": len(self.processes_seen),
        }


def measured_run(engine: str, owners: int, rounds: int, timeout: float) -> dict[str, Any]:
    """Run ``engine`` in a fresh process tree, measured from here."""
    cmd = [
        sys.executable,
        __file__,
        "--one",
        engine,
        "--owners",
        str(owners),
        "--rounds",
        str(rounds),
        "--timeout",
        str(timeout),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    out = tempfile.NamedTemporaryFile(prefix="bench-flower-", suffix=".json", delete=False)
    out.close()
    start = time.perf_counter()
    with open(out.name, "wb") as stdout:
        proc = subprocess.Popen(cmd + ["--result", out.name], env=env, cwd=ROOT, stdout=stdout, stderr=subprocess.PIPE)
        meter = TreeMeter(proc.pid)
        deadline = time.monotonic() + timeout
        while proc.poll() is None and time.monotonic() < deadline:
            meter.sample()
            time.sleep(meter.interval)
        if proc.poll() is None:
            for pid in reversed(tree(proc.pid)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        proc.wait()
    wall_s = time.perf_counter() - start
    _end_orphans()
    result_text = Path(out.name).read_text()
    os.unlink(out.name)
    figures = {"engine": engine, "owners": owners, "rounds": rounds, "wall_s": wall_s, **meter.figures()}
    if proc.returncode != 0 or not result_text.strip():
        why = "timed out" if wall_s >= timeout else f"exited {proc.returncode}"
        return {**figures, "status": "failed", "error": f"{why}: {stderr[-3000:]}"}
    return {**figures, "status": "completed", **json.loads(result_text)}


def _end_orphans() -> None:
    """Kill and reap what a run left behind: processes of its tree re-parented to this one (a
    ServerApp whose SuperLink was stopped, say), so that the next run starts on an idle machine."""
    for pid in tree(os.getpid())[1:]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# --- the table ----------------------------------------------------------------------------------


def _median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _parser() -> argparse.ArgumentParser:
    """The command line: which K values, engines and repeats, and the worker's hidden options."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", default="16,256,1000", help="comma-separated K values")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3, help="paired runs per K (the table shows medians)")
    parser.add_argument("--engines", default=",".join(ENGINES), help=f"comma-separated, from {list(ENGINES)}")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds allowed for each run")
    parser.add_argument("--smoke", action="store_true", help="K = 4, 3 rounds, flower-sim and ours-inprocess, once")
    parser.add_argument("--json", metavar="PATH", help="write every run's figures here")
    parser.add_argument("--one", choices=ENGINES, help=argparse.SUPPRESS)  # worker: run this engine here
    parser.add_argument("--result", help=argparse.SUPPRESS)
    return parser


def _runs_for_k(
    k: int, engines: list[str], args: argparse.Namespace, runs: list[dict[str, Any]], mismatches: list[str]
) -> dict[str, list[dict[str, Any]]]:
    """Run every engine ``args.repeats`` times at K = ``k``, paired (each repeat runs every engine
    in turn); append each run to ``runs``, and to ``mismatches`` each run whose selection differs from
    the first completed one. Returns the runs by engine, for the table."""
    reference: list[Any] | None = None
    by_engine: dict[str, list[dict[str, Any]]] = {e: [] for e in engines}
    for repeat in range(args.repeats):
        for engine in engines:
            run = {**measured_run(engine, k, args.rounds, args.timeout), "repeat": repeat}
            runs.append(run)
            by_engine[engine].append(run)
            if run["status"] != "completed":
                print(f"  K={k} {engine} run {repeat + 1}: FAILED {run['error'][-800:]}", flush=True)
                continue
            if reference is None:
                reference = run["selection"]
            run["selection_matches"] = run["selection"] == reference
            if not run["selection_matches"]:
                mismatches.append(f"K={k} {engine} run {repeat + 1}")
    return by_engine


def _print_table(k: int, by_engine: dict[str, list[dict[str, Any]]]) -> None:
    """One K's table: each engine's medians over its completed runs."""
    print(f"\nK = {k:,}")
    print(
        f"  {'engine':<18} {'ms/round':>10} {'CPU s (tree)':>13} {'peak PSS MB':>12} {'peak RSS MB':>12} "
        f"{'processes':>10} {'wall s':>8} {'completed':>10}"
    )
    for engine, done in by_engine.items():
        ok = [r for r in done if r["status"] == "completed"]
        print(
            f"  {engine:<18} {_fmt(_median(ok, 'ms_per_round'), '10.1f')} {_fmt(_median(ok, 'cpu_s'), '13.1f')} "
            f"{_fmt(_median(ok, 'peak_pss_mb'), '12.0f')} {_fmt(_median(ok, 'peak_rss_mb'), '12.0f')} "
            f"{_fmt(_median(ok, 'processes'), '10.0f')} {_fmt(_median(ok, 'wall_s'), '8.1f')} "
            f"{len(ok):>5}/{len(done)}",
            flush=True,
        )


def _print_agreement(runs: list[dict[str, Any]], mismatches: list[str]) -> None:
    """Whether every completed run selected the same owners, and which did not."""
    compared = sum(1 for r in runs if "selection_matches" in r)
    print(
        f"\nselection identical across engines: {'yes' if not mismatches else 'NO'} "
        f"({compared - len(mismatches)} of {compared} completed runs match)"
    )
    if mismatches:
        print("  differs: " + ", ".join(mismatches))


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.one:
        result = run_one(args.one, int(args.owners), args.rounds, args.timeout)
        Path(args.result).write_text(json.dumps(result))
        return 0
    try:
        import flwr  # noqa: F401
    except ImportError:
        print(f"bench_flower.py needs Flower: {EXTRA_HINT}", file=sys.stderr)
        return 2
    if args.smoke:
        args.owners, args.rounds, args.repeats, args.engines = "4", 3, 1, "flower-sim,ours-inprocess"
    engines = [e for e in args.engines.split(",") if e]
    unknown = [e for e in engines if e not in ENGINES]
    if unknown:
        parser.error(f"--engines: expected names from {list(ENGINES)}, got {unknown}")
    owners = [int(k) for k in args.owners.split(",") if k]
    _become_subreaper()
    print(
        f"summarize, scenarios/quickstart.yaml with K owners, even partition, {args.rounds} rounds; "
        f"{args.repeats} paired run(s) per K, medians; {os.cpu_count()} cores"
    )
    runs: list[dict[str, Any]] = []
    mismatches: list[str] = []
    for k in owners:
        _print_table(k, _runs_for_k(k, engines, args, runs, mismatches))
    _print_agreement(runs, mismatches)
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "cores": os.cpu_count(), "runs": runs}, indent=1))
    failed = any(r["status"] != "completed" for r in runs)
    return 1 if mismatches or (failed and args.smoke) else 0


if __name__ == "__main__":
    sys.exit(main())
