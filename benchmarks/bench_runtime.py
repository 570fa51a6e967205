"""Runtime of a whole `summarize` run: per-round latency, transport overhead, processes vs in-process.

Run (defaults take a few minutes on a 2-core machine):

    python benchmarks/bench_runtime.py --json runtime.json

Three measurements, each repeated ``--repeats`` times (median / min / max):

1. Rounds. Per-round latency and rounds/s for K = 4, 16, 64 owners under both drivers. One fixed
   covariate_shift world (``--rows-per-owner`` rows per owner at the largest K, even partition),
   d = 140 features, p = 100 rounds. Rounds are timed by the protocol itself, from "round 1/P done"
   to "round P/P done" (P - 1 rounds): for the processes driver from the millisecond timestamps of
   DIR/logs/curator.log, for the in-process driver with a logging handler on
   ``marketplace.protocols.summarize.curator`` (time.perf_counter at emit). Start-up, data building and the
   consumer's final evaluation are therefore excluded (they are reported apart as phases).
2. Transport overhead per round at K = 16:
   processes latency - (curator compute per round + max owner compute per round), where owners
   sharing an owner host count as one (their compute summed: they run one after the other),
   compute taken from the processes run's own party timings (``party_details.*.timing.compute_s``,
   an owner's under ``party_details.*.simulator_view.timing``, / rounds). Reported next to the
   in-process latency, the codec time summed over parties, the socket I/O time, the same estimate
   with *uncontended* compute (from the in-process runs), the CPU-time demand per round, and a
   "floor" run (same K, ~200 rows per owner, so compute ~ 0).
   Target: <= 2 ms per round. The verdict is the floor run's latency, which measures transport (it
   is an upper bound: what else a round holds is near zero); both subtractions are printed next to
   it. The one with the processes run's own compute over-counts on a small machine: two hosts, the
   curator and their I/O threads share the cores and slow each other's compute, and the
   subtraction books that slowdown as transport.
3. Wall-time ratio processes / in-process: K = 8, 10,000 rows per owner, dim 20, d = 140, p = 200,
   from the report's ``timing.wall_s``. Target: <= 1.3.

``timing.wall_s`` (marketplace/runner/run.py) starts after the runner has built the world and
stops when the driver returns: it covers, for the processes driver, starting every party (see
``--launch``), each party's h1 embedding, connecting, the rounds, the consumer's evaluation (its
scikit-learn import runs in the background during the rounds) and every process's exit; for the
in-process driver, building every role (h1 embeddings), the rounds and the consumer's evaluation. The runner's
baselines and the central replay are computed
afterwards and are *not* in wall_s; the benchmark disables the baselines (``summarize.baselines=[]``).

``--launch`` says how the processes driver starts parties (``run_scenario(..., launch=...)``):
``forkserver`` (default; forked from a preloaded server, each handed its own data share) or ``exec``
(``python -m marketplace <role>``: interpreter start, imports and a world rebuild per party). With
``both``, parts 1 and 2 use forkserver and part 3 reports the ratio for each launch mode.

Every run happens in a fresh Python process (``--worker``), so imports are cold for both drivers,
exactly as with ``marketplace run``. A run whose scenario (its name aside), driver, launch and repeat
equal one already made is made once: the later part reuses it (as part 2 reuses part 1's K runs).
``--set key.path=value`` overrides the scenario of every run; ``--profile`` writes a cProfile of each
in-process run (all parties in one process) to its folder.

``--smoke`` (the test suite's run, seconds; its figures mean nothing) runs every part once at K = 2,
p = 5 on the smallest world, so that the floor and ratio runs are part 1's, with a short calibration.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

CURATOR_LOGGER = "marketplace.protocols.summarize.curator"
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) curator \w+ (.*)$")
ROUND_MSG = re.compile(r"round (\d+)/(\d+) done")
PRESENT_MSG = re.compile(r"all \d+ owners and the consumer are present")
STARTING_MSG = re.compile(r"\(pid (\d+)\) starting")
TARGET_TRANSPORT_MS = 2.0
TARGET_RATIO = 1.3
VALIDATION, TEST, SEED_SET = 200, 500, 50
SMOKE = {
    "owners": [2],
    "rounds": 5,
    "repeats": 1,
    "rows_per_owner": 100,
    "overhead_owners": 2,
    "floor_rows": 100,
    "ratio_owners": 2,
    "ratio_rows": 100,
    "ratio_rounds": 5,
}
"""What ``--smoke`` sets: one configuration for every part, so its two runs serve all three."""
_MADE: dict[str, dict[str, Any]] = {}
"""The runs this process made, by configuration (see ``_configuration``): a repeated one is reused."""


# ----------------------------------------------------------------------------------- scenarios


def data_section(owners: int, rows_per_owner: int, dim: int, components: int, partition: str) -> dict[str, Any]:
    """A covariate_shift world whose owners' pool holds about ``owners * rows_per_owner`` rows.

    Target groups 0 and 1 give a target pool of exactly validation + test rows, the seed set comes
    from the last group, every other row goes to the owners.
    """
    need = owners * rows_per_owner + VALIDATION + TEST + SEED_SET
    rows_per_component = max(math.ceil(need / components), (VALIDATION + TEST) // 2 + 1, SEED_SET)
    target_rows = 2 * rows_per_component
    share = (VALIDATION + TEST) / target_rows
    while int(round(share * target_rows)) < VALIDATION + TEST:
        share = math.nextafter(share, 1.0)
    return {
        "source": {
            "kind": "covariate_shift",
            "covariate_shift": {"dim": dim, "components": components, "rows_per_component": rows_per_component},
        },
        "partition": {"scheme": partition, "skew": 0.8},
        "consumer": {"target_groups": [0, 1], "target_share": share, "validation_size": VALIDATION, "test_size": TEST},
        "seed_set": {"groups": [components - 1], "size": SEED_SET},
    }


def scenario_raw(
    name: str, owners: int, data: dict[str, Any], rounds: int, features: int, seed: int, overrides: list[str] = ()
) -> dict[str, Any]:
    from marketplace.scenario.load import apply_override

    raw = {
        "name": name,
        "protocol": "summarize",
        "seed": seed,
        "parties": {"owners": owners},
        "data": data,
        "summarize": {"rounds": rounds, "gamma": 0.1, "features": features, "baselines": []},
        # with --launch exec, 66 Python processes start in ~1-2 min on 2 cores: the default
        # start_timeout_s = 60 is too short at K = 64. Neither setting changes a round.
        "transport": {"start_timeout_s": 900.0, "heartbeat_timeout_s": 60.0},
    }
    for assignment in overrides:
        apply_override(raw, assignment, source="bench_runtime --set")
    return raw


# ----------------------------------------------------------------------------------- the worker


class _RoundClock(logging.Handler):
    """Timestamps of the curator's "present" and "round N/P done" records (in-process driver)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.present: float | None = None
        self.rounds: list[tuple[int, float, float]] = []  # (round, perf_counter, process_time)

    def emit(self, record: logging.LogRecord) -> None:
        if record.msg == "round %d/%d done":
            self.rounds.append((int(record.args[0]), time.perf_counter(), time.process_time()))
        elif isinstance(record.msg, str) and record.msg.startswith("all %d owners"):
            self.present = time.perf_counter()


def _status_field(status: str, name: str) -> int:
    at = status.index(name) + len(name)
    return int(status[at : status.index("\n", at)])


def _proc_usage(pid: int) -> tuple[float, int, int] | None:
    """(cpu seconds, voluntary, involuntary context switches) of one process, all its threads
    (the ZeroMQ I/O thread included); None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read()
        vol = invol = 0
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
            vol += _status_field(status, "\nvoluntary_ctxt_switches:")
            invol += _status_field(status, "\nnonvoluntary_ctxt_switches:")
    except (OSError, ValueError):
        return None
    rest = fields[fields.rfind(")") + 2 :].split()
    cpu = (int(rest[11]) + int(rest[12])) / os.sysconf("SC_CLK_TCK")  # every thread of the process
    return cpu, vol, invol


def _party_pids(log_dir: Path) -> dict[str, int]:
    """party -> pid, from the "<party> (pid N) starting" line of DIR/logs/<party>.log (parties
    forked by the forkserver are not our children and carry its command line)."""
    pids = {}
    for path in log_dir.glob("*.log"):
        try:
            m = STARTING_MSG.search(path.read_text(errors="replace"))
        except OSError:
            continue
        if m:
            pids[path.stem] = int(m.group(1))
    return pids


class _ChildSampler(threading.Thread):
    """CPU time and context switches of every party process at a few points during the rounds.

    Kept cheap (it shares the CPUs with the run): the curator log's tail is polled every 50 ms,
    the parties' pids are read from their logs once, and a full snapshot is taken only at the first
    round >= 2 and then every ``max(5, P // 8)`` rounds before the last one (about ten a run).
    """

    def __init__(self, log_dir: Path, rounds: int, parties: int) -> None:
        super().__init__(daemon=True)
        self.log_dir = log_dir
        self.rounds = rounds
        self.n_parties = parties
        self.step = max(5, rounds // 8)
        self.samples: list[dict[str, Any]] = []
        self.pids: dict[str, int] = {}
        self.stop = threading.Event()

    def _round(self) -> int:
        try:
            with (self.log_dir / "curator.log").open("rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 600))
                text = f.read().decode(errors="replace")
        except OSError:
            return 0
        found = ROUND_MSG.findall(text)
        return int(found[-1][0]) if found else 0

    def _snapshot(self, rnd: int) -> None:
        if len(self.pids) < self.n_parties:
            self.pids = _party_pids(self.log_dir)
        per = {p: u for p, u in ((p, _proc_usage(pid)) for p, pid in self.pids.items()) if u}
        self.samples.append(
            {
                "t": time.time(),
                "round": rnd,
                "procs": len(per),
                "cpu_s": sum(u[0] for u in per.values()),
                "vcs": sum(u[1] for u in per.values()),
                "ivcs": sum(u[2] for u in per.values()),
                "party_cpu_s": {p: u[0] for p, u in per.items()},
            }
        )

    def run(self) -> None:
        last = None
        while not self.stop.wait(0.05):
            rnd = self._round()
            if rnd < 2 or rnd >= self.rounds:
                continue
            if last is None or rnd >= last + self.step:
                self._snapshot(rnd)
                last = rnd


def _parse_curator_log(path: Path) -> dict[str, Any]:
    started = present = None
    rounds: list[tuple[int, float]] = []
    for line in path.read_text(errors="replace").splitlines():
        m = LOG_LINE.match(line)
        if not m:
            continue
        t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        msg = m.group(2)
        if started is None and "starting" in msg:
            started = t
        elif PRESENT_MSG.search(msg):
            present = t
        else:
            r = ROUND_MSG.search(msg)
            if r:
                rounds.append((int(r.group(1)), t))
    return {"curator_started": started, "present": present, "rounds": rounds}


def _per_round_stats(rounds: list[tuple[int, float]]) -> dict[str, Any]:
    """Latency per round between the first and the last "round N done" (N - 1 intervals)."""
    if len(rounds) < 2:
        return {"rounds_timed": 0, "latency_ms": None, "rounds_per_s": None}
    (r0, t0), (r1, t1) = rounds[0], rounds[-1]
    span = t1 - t0
    gaps = sorted((b[1] - a[1]) * 1e3 for a, b in zip(rounds, rounds[1:]))
    return {
        "rounds_timed": r1 - r0,
        "span_s": span,
        "latency_ms": span / (r1 - r0) * 1e3,
        "rounds_per_s": (r1 - r0) / span if span > 0 else None,
        "gap_median_ms": statistics.median(gaps),
        "gap_p90_ms": gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))],
        "gap_max_ms": gaps[-1],
    }


def _run_watched(
    spec: dict[str, Any], scenario: Any, clock: _RoundClock, sampler: _ChildSampler | None
) -> tuple[dict[str, Any], dict[str, float], float]:
    """Run the scenario with the clocks on: the end of wall_s marked where the runner assembles its
    report, the in-process curator's records timed by ``clock``, the party processes sampled by
    ``sampler``, and the in-process run profiled if the spec asks. Returns the report, the wall_s
    end marks (perf_counter and epoch) and the seconds the call took."""
    import marketplace.runner.run as runmod

    driver = spec["driver"]
    marks: dict[str, float] = {}
    original_assemble = runmod.assemble_report

    def assemble(*args: Any, **kwargs: Any) -> dict[str, Any]:  # the end of wall_s
        marks.setdefault("wall_end_perf", time.perf_counter())
        marks.setdefault("wall_end_epoch", time.time())
        return original_assemble(*args, **kwargs)

    runmod.assemble_report = assemble
    logger = logging.getLogger(CURATOR_LOGGER)
    profile = cProfile.Profile() if spec.get("profile") and driver == "inprocess" else None
    if driver == "inprocess":
        logger.setLevel(logging.INFO)
        logger.addHandler(clock)
    if sampler:
        sampler.start()
    t_call = time.perf_counter()
    try:
        if profile:
            profile.enable()
        report = runmod.run_scenario(scenario, Path(spec["out"]), driver=driver, launch=spec["launch"] or "forkserver")
    finally:
        if profile:
            profile.disable()
            profile.dump_stats(spec["profile"])
        if sampler:
            sampler.stop.set()
            sampler.join()
        logger.removeHandler(clock)
    return report, marks, time.perf_counter() - t_call


def _report_figures(report: dict[str, Any], scenario: Any, driver: str, call_s: float) -> dict[str, Any]:
    """What a run's report says: status, wall time, rows, messages and every party's timings."""
    timing = report["timing"]
    return {
        "driver": driver,
        "launch": report.get("launch"),
        "owners": scenario.config.parties.owners,
        "rounds": scenario.config.summarize.rounds,
        "status": report["status"],
        "failures": report["failures"][:3],
        "wall_s": timing["wall_s"],
        "worker_call_s": call_s,
        "owner_rows": [part["rows"] for part in report["data"]["owners"]],
        "messages": {
            "total": report["messages"]["total"],
            "bytes": report["messages"]["bytes"],
            "heartbeats": report["messages"]["heartbeats"]["sent"],
        },
        "timing": {k: timing[k] for k in ("compute_s", "transport_s")},
        # an owner's timings: the simulator's view (an owner keeps them to itself; a simulation's runner sees them)
        "party_timing": {
            p: d.get("timing") or (d.get("simulator_view") or {}).get("timing") or {}
            for p, d in report["party_details"].items()
        },
        "party_pid": {p["id"]: p.get("pid") for p in report.get("parties", [])},
    }


def _since(t: float | None, start: float) -> float | None:
    return None if t is None else t - start


_Marks = tuple[float | None, float | None, float | None]  # every party present, first round, last round (s)


def _inprocess_rounds(clock: _RoundClock, wall_start_perf: float, result: dict[str, Any]) -> _Marks:
    """The in-process run's rounds, from the curator's records: per-round latency and CPU time into
    ``result``; returns when the parties were present and the first and last rounds done."""
    rounds = [(r, t) for r, t, _ in clock.rounds]
    result["per_round"] = _per_round_stats(rounds)
    if len(clock.rounds) >= 2:
        (r0, _, c0), (r1, _, c1) = clock.rounds[0], clock.rounds[-1]
        result["cpu_ms_per_round"] = (c1 - c0) / (r1 - r0) * 1e3
    first, last = (clock.rounds[0][1], clock.rounds[-1][1]) if clock.rounds else (None, None)
    return _since(clock.present, wall_start_perf), _since(first, wall_start_perf), _since(last, wall_start_perf)


def _processes_rounds(curator_log: Path, wall_start_epoch: float, result: dict[str, Any]) -> _Marks:
    """The processes run's rounds, from the curator's log: per-round latency and the curator's start
    into ``result``; returns when the parties were present and the first and last rounds done."""
    parsed = _parse_curator_log(curator_log)
    rounds = parsed["rounds"]
    result["per_round"] = _per_round_stats(rounds)
    first, last = (rounds[0][1], rounds[-1][1]) if rounds else (None, None)
    result["curator_started_s"] = _since(parsed["curator_started"], wall_start_epoch)
    return _since(parsed["present"], wall_start_epoch), _since(first, wall_start_epoch), _since(last, wall_start_epoch)


def _sampled_cpu(samples: list[dict[str, Any]], rounds_planned: int, parties: int) -> dict[str, Any]:
    """CPU time and context switches per round of the party processes, between the first and the
    last sample taken while every party ran (none if fewer than two such samples)."""
    samples = [s for s in samples if 2 <= s["round"] < rounds_planned and s["procs"] == parties]
    if len(samples) < 2 or samples[-1]["round"] <= samples[0]["round"]:
        return {}
    a, b = samples[0], samples[-1]
    n = b["round"] - a["round"]
    party_cpu = {p: (b["party_cpu_s"][p] - a["party_cpu_s"].get(p, 0.0)) / n * 1e3 for p in b["party_cpu_s"]}
    owners_cpu = [v for p, v in party_cpu.items() if p.startswith("owner-")]
    return {
        "cpu_ms_per_round": (b["cpu_s"] - a["cpu_s"]) / n * 1e3,
        "ctx_switches_per_round": {
            "voluntary": (b["vcs"] - a["vcs"]) / n,
            "involuntary": (b["ivcs"] - a["ivcs"]) / n,
        },
        "cpu_sample_rounds": n,
        "party_cpu_ms_per_round": {
            "curator": party_cpu.get("curator"),
            "owners_sum": sum(owners_cpu),
            "owner_max": max(owners_cpu) if owners_cpu else None,
            "consumer": party_cpu.get("consumer"),
        },
    }


def _phases(marks: _Marks, wall_s: float) -> dict[str, float | None]:
    """wall_s cut at the moments of ``marks`` (seconds from its start)."""
    p_present, p_first, p_last = marks
    return {
        "setup": p_present,  # wall start -> every party present (start, [imports, world,] h1, connect)
        "first_round": None if p_first is None or p_present is None else p_first - p_present,
        "rounds": None if p_last is None or p_first is None else p_last - p_first,
        "closing": None if p_last is None else wall_s - p_last,  # summary, consumer evaluation, shutdown, exits
    }


def worker(spec_path: str) -> int:
    """One measured run, in this fresh process: run the spec's scenario, then write its figures."""
    spec = json.loads(Path(spec_path).read_text())
    from marketplace.scenario import parse_scenario

    scenario = parse_scenario(spec["scenario"], source="bench_runtime", base_dir=Path.cwd())
    out = Path(spec["out"])
    driver = spec["driver"]
    clock = _RoundClock()
    parties = scenario.config.parties.owners + 2
    rounds_planned = scenario.config.summarize.rounds
    sampler = _ChildSampler(out / "logs", rounds_planned, parties) if driver == "processes" else None
    report, wall_end, call_s = _run_watched(spec, scenario, clock, sampler)
    result = _report_figures(report, scenario, driver, call_s)
    wall_s = result["wall_s"]
    if driver == "inprocess":
        marks = _inprocess_rounds(clock, wall_end["wall_end_perf"] - wall_s, result)
    else:
        marks = _processes_rounds(out / "logs" / "curator.log", wall_end["wall_end_epoch"] - wall_s, result)
        result.update(_sampled_cpu(sampler.samples, rounds_planned, parties))
    result["phases_s"] = _phases(marks, wall_s)
    Path(spec["result"]).write_text(json.dumps(result, indent=1))
    return 0


# ----------------------------------------------------------------------------------- orchestration


def run_name(driver: str, launch: str | None) -> str:
    return f"processes-{launch}" if driver == "processes" else driver


def _configuration(raw: dict[str, Any], driver: str, launch: str | None, repeat: int) -> str:
    """What makes a run: its scenario without its name (a label), the driver, the launch (the
    processes driver's only) and the repeat."""
    scenario = {k: v for k, v in raw.items() if k != "name"}
    return json.dumps([scenario, driver, launch if driver == "processes" else None, repeat], sort_keys=True)


def run_one(
    args: argparse.Namespace,
    workdir: Path,
    label: str,
    raw: dict[str, Any],
    driver: str,
    repeat: int,
    launch: str | None = None,
) -> dict[str, Any]:
    """One run in a fresh worker process, or the same configuration's earlier run again (relabelled)."""
    name = run_name(driver, launch)
    config = _configuration(raw, driver, launch, repeat)
    if config in _MADE:
        made = _MADE[config]
        print(f"  {label:<14} {name:<20} #{repeat + 1}  the same run as {made['label']}'s: reused", flush=True)
        return {**made, "label": label, "reused_from": made["label"]}
    run_dir = workdir / f"{label}-{name}-r{repeat}"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    spec = {
        "scenario": raw,
        "driver": driver,
        "launch": launch,
        "out": str(run_dir / "out"),
        "result": str(run_dir / "result.json"),
        "profile": str(run_dir / "inprocess.prof") if args.profile else None,
    }
    (run_dir / "spec.json").write_text(json.dumps(spec))
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", str(run_dir / "spec.json")],
        capture_output=True,
        text=True,
    )
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0 or not (run_dir / "result.json").exists():
        tail = (proc.stderr or proc.stdout)[-1500:]
        result = {
            "driver": driver,
            "launch": launch,
            "status": "error",
            "failures": [f"worker exit {proc.returncode}: {tail}"],
        }
    else:
        result = json.loads((run_dir / "result.json").read_text())
    result.update(label=label, repeat=repeat, process_s=elapsed)
    lat = (result.get("per_round") or {}).get("latency_ms")
    lat_txt = f"{lat:8.2f} ms/round" if lat else "   n/a"
    print(
        f"  [{time.strftime('%H:%M:%S')}] {label:<14} {name:<20} #{repeat + 1}  {result['status']:<9} "
        f"{lat_txt}  wall_s {result.get('wall_s', float('nan')):7.2f}  ({elapsed:.1f} s)",
        flush=True,
    )
    if result["status"] != "completed":
        print(f"      failures: {result.get('failures')}", flush=True)
    if not args.keep_runs:
        shutil.rmtree(run_dir / "out", ignore_errors=True)
    _MADE[config] = result
    return result


def stats(values: list[float | None]) -> dict[str, float] | None:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def fmt(s: dict[str, float] | None, digits: int = 2) -> str:
    if not s:
        return "n/a"
    if s["n"] == 1:
        return f"{s['median']:.{digits}f}"
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}-{s['max']:.{digits}f}]"


def _per_round_party(run: dict[str, Any], key: str) -> dict[str, float]:
    """party -> timing[key] / rounds completed, in ms."""
    rounds = run["rounds"]
    return {p: (t.get(key) or 0.0) / rounds * 1e3 for p, t in run["party_timing"].items()}


def calibrate_cores(seconds: float = 0.4) -> dict[str, float]:
    """Effective parallelism: the same pure-Python loop in 1 process, then in os.cpu_count() at once."""
    n = os.cpu_count() or 1
    code = "import time\nt=time.perf_counter()\nx=0\nfor i in range(%d): x+=i\nprint(time.perf_counter()-t)"
    iters = 1
    t = 0.0
    while t < seconds:  # size the loop
        iters *= 4
        t = float(subprocess.run([sys.executable, "-c", code % iters], capture_output=True, text=True).stdout)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code % iters], capture_output=True)
    one = time.perf_counter() - t0
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", code % iters], stdout=subprocess.DEVNULL) for _ in range(n)]
    for p in procs:
        p.wait()
    many = time.perf_counter() - t0
    return {"cpu_count": n, "one_s": one, "all_s": many, "effective_cores": n * one / many}


# ----------------------------------------------------------------------------------- the benchmark


def part_rounds(args: argparse.Namespace, workdir: Path, out: dict[str, Any]) -> None:
    kmax = max(args.owners)
    launch = args.launches[0]
    print(
        f"\n== 1. rounds: K = {args.owners}, one world of {kmax} x {args.rows_per_owner} owner rows, "
        f"dim {args.dim}, d = {args.features}, p = {args.rounds}, {args.partition} partition, launch {launch}"
    )
    rows = []
    data = data_section(kmax, args.rows_per_owner, args.dim, args.components, args.partition)
    for k in args.owners:
        raw = scenario_raw(f"bench-rounds-k{k}", k, data, args.rounds, args.features, args.seed, args.set)
        for driver in args.drivers:
            runs = [run_one(args, workdir, f"rounds-k{k}", raw, driver, r, launch) for r in range(args.repeats)]
            out["runs"].extend(runs)
            rows.append(summarize_rounds(k, run_name(driver, launch), runs))
    out["rounds"] = rows


def summarize_rounds(k: int, name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in runs if r["status"] == "completed"]
    row: dict[str, Any] = {"owners": k, "driver": name, "runs": len(runs), "completed": len(ok)}
    if not ok:
        row["failures"] = runs[0].get("failures")
        return row
    row["owner_rows"] = [min(ok[0]["owner_rows"]), max(ok[0]["owner_rows"])]
    row["latency_ms"] = stats([r["per_round"]["latency_ms"] for r in ok])
    row["rounds_per_s"] = stats([r["per_round"]["rounds_per_s"] for r in ok])
    row["gap_p90_ms"] = stats([r["per_round"].get("gap_p90_ms") for r in ok])
    row["cpu_ms_per_round"] = stats([r.get("cpu_ms_per_round") for r in ok])
    row["wall_s"] = stats([r["wall_s"] for r in ok])
    row["setup_s"] = stats([r["phases_s"]["setup"] for r in ok])
    row["closing_s"] = stats([r["phases_s"]["closing"] for r in ok])
    if ok[0]["driver"] == "processes":
        row["ctx_switches_per_round"] = stats([(r.get("ctx_switches_per_round") or {}).get("voluntary") for r in ok])
        row["ctx_involuntary_per_round"] = stats(
            [(r.get("ctx_switches_per_round") or {}).get("involuntary") for r in ok]
        )
    return row


def _curator_and_max_owner(run: dict[str, Any], key: str) -> tuple[float, float, float]:
    """Curator, critical owner process, all owners. Owners that share an OS process (an owner
    host) compute one after the other, so the critical owner figure is the largest sum over the
    owners of one process (one owner per process: the largest owner's)."""
    per = _per_round_party(run, key)
    pids = run.get("party_pid") or {}
    by_process: dict[Any, float] = {}
    for p, v in per.items():
        if p.startswith("owner-"):
            key_ = pids.get(p) if pids.get(p) is not None else p
            by_process[key_] = by_process.get(key_, 0.0) + v
    owners = [v for p, v in per.items() if p.startswith("owner-")]
    return per.get("curator", 0.0), max(by_process.values()), sum(owners)


def _cpu_per_round(runs: list[dict[str, Any]]) -> list[float]:
    """The CPU time per round of the runs that measured it."""
    return [x["cpu_ms_per_round"] for x in runs if x.get("cpu_ms_per_round") is not None]


def _party_cpu(runs: list[dict[str, Any]], key: str) -> list[float | None]:
    return [(r.get("party_cpu_ms_per_round") or {}).get(key) for r in runs]


def _overhead_runs(
    args: argparse.Namespace, workdir: Path, out: dict[str, Any], raw: dict[str, Any], k: int, launch: str
) -> dict[str, list[dict[str, Any]]]:
    """The completed K = ``k`` runs of each driver: part 1's if it made them, else new ones."""
    by_driver: dict[str, list[dict[str, Any]]] = {}
    for driver in ("processes", "inprocess"):
        reuse = [
            r
            for r in out["runs"]
            if r.get("label") == f"rounds-k{k}"
            and r["driver"] == driver
            and r["status"] == "completed"
            and (driver == "inprocess" or r.get("launch") == launch)
        ]
        if reuse:
            print(f"  reusing {len(reuse)} {driver} run(s) of part 1")
        else:
            reuse = [run_one(args, workdir, f"rounds-k{k}", raw, driver, r, launch) for r in range(args.repeats)]
            out["runs"].extend(reuse)
        by_driver[driver] = [r for r in reuse if r["status"] == "completed"]
    return by_driver


def _floor_runs(
    args: argparse.Namespace, workdir: Path, out: dict[str, Any], k: int, launch: str
) -> list[dict[str, Any]]:
    """The completed floor runs: processes driver, K = ``k``, ``--floor-rows`` rows per owner (compute ~ 0)."""
    floor_raw = scenario_raw(
        f"bench-floor-k{k}",
        k,
        data_section(k, args.floor_rows, args.dim, args.components, "even"),
        args.rounds,
        args.features,
        args.seed,
        args.set,
    )
    floor = [run_one(args, workdir, f"floor-k{k}", floor_raw, "processes", r, launch) for r in range(args.repeats)]
    out["runs"].extend(floor)
    return [r for r in floor if r["status"] == "completed"]


def _processes_figures(proc: list[dict[str, Any]], inproc: list[dict[str, Any]], eff: float) -> dict[str, list[float]]:
    """Per processes run: latency, compute, codec, I/O and CPU per round, and the transport
    estimates (latency minus the critical compute, its own or the in-process runs' median)."""
    inproc_crit_med = statistics.median([sum(_curator_and_max_owner(r, "compute_s")[:2]) for r in inproc])
    inproc_cpu = _cpu_per_round(inproc)
    rows: dict[str, list[float]] = {
        k2: []
        for k2 in (
            "proc_latency",
            "curator_compute",
            "max_owner_compute",
            "sum_owner_compute",
            "transport_estimate",
            "transport_estimate_uncontended",
            "codec_sum",
            "codec_critical",
            "io_sum",
            "cpu_per_round",
            "cpu_bound",
            "extra_cpu_processes",
        )
    }
    for r in proc:
        lat = r["per_round"]["latency_ms"]
        cur, mx, sm = _curator_and_max_owner(r, "compute_s")
        codec = _per_round_party(r, "codec_s")
        owners_codec = [v for p, v in codec.items() if p.startswith("owner-")]
        rows["proc_latency"].append(lat)
        rows["curator_compute"].append(cur)
        rows["max_owner_compute"].append(mx)
        rows["sum_owner_compute"].append(sm)
        rows["transport_estimate"].append(lat - (cur + mx))
        rows["transport_estimate_uncontended"].append(lat - inproc_crit_med)
        rows["codec_sum"].append(sum(codec.values()))
        rows["codec_critical"].append(codec.get("curator", 0.0) + max(owners_codec))
        rows["io_sum"].append(sum(_per_round_party(r, "io_s").values()))
        if r.get("cpu_ms_per_round") is not None:
            rows["cpu_per_round"].append(r["cpu_ms_per_round"])
            rows["cpu_bound"].append(r["cpu_ms_per_round"] / eff)
            if inproc_cpu:
                rows["extra_cpu_processes"].append(r["cpu_ms_per_round"] - statistics.median(inproc_cpu))
    return rows


def _other_figures(
    proc: list[dict[str, Any]], inproc: list[dict[str, Any]], floor: list[dict[str, Any]]
) -> dict[str, list[Any]]:
    """Per in-process and floor run: latency, compute, codec and CPU per round; and the CPU per round
    of the curator and owner processes in the processes and floor runs."""
    return {
        "inproc_latency": [r["per_round"]["latency_ms"] for r in inproc],
        "inproc_curator_compute": [_curator_and_max_owner(r, "compute_s")[0] for r in inproc],
        "inproc_max_owner_compute": [_curator_and_max_owner(r, "compute_s")[1] for r in inproc],
        "inproc_sum_owner_compute": [_curator_and_max_owner(r, "compute_s")[2] for r in inproc],
        "inproc_codec_sum": [sum(_per_round_party(r, "codec_s").values()) for r in inproc],
        "inproc_cpu_per_round": _cpu_per_round(inproc),
        "floor_proc_latency": [r["per_round"]["latency_ms"] for r in floor],
        "floor_codec_sum": [sum(_per_round_party(r, "codec_s").values()) for r in floor],
        "floor_cpu_per_round": [r.get("cpu_ms_per_round") for r in floor],
        "proc_curator_cpu": _party_cpu(proc, "curator"),
        "proc_owners_cpu": _party_cpu(proc, "owners_sum"),
        "floor_curator_cpu": _party_cpu(floor, "curator"),
        "floor_owners_cpu": _party_cpu(floor, "owners_sum"),
    }


def _transport_verdicts(result: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """Each transport estimate's median against the target.

    Three estimates of the same quantity: the floor run measures it (a round with compute ~ 0 is
    transport, plus a little codec); the subtractions derive it from a run with compute, where two
    hosts, the curator and their I/O threads share two cores and slow each other's compute, which
    the subtraction with the processes run's own (contended) compute books as transport.
    """
    verdicts = {}
    for name, key in (
        ("measured (floor run, compute ~ 0)", "floor_proc_latency"),
        ("by subtraction, contended compute", "transport_estimate"),
        ("by subtraction, uncontended compute", "transport_estimate_uncontended"),
    ):
        est = result.get(key)
        verdicts[name] = None if not est else {"median": est["median"], "met": est["median"] <= TARGET_TRANSPORT_MS}
    return verdicts


def part_overhead(args: argparse.Namespace, workdir: Path, out: dict[str, Any]) -> None:
    k = args.overhead_owners
    launch = args.launches[0]
    print(f"\n== 2. transport overhead per round at K = {k}, launch {launch}")
    data = data_section(max(args.owners), args.rows_per_owner, args.dim, args.components, args.partition)
    raw = scenario_raw(f"bench-rounds-k{k}", k, data, args.rounds, args.features, args.seed, args.set)
    by_driver = _overhead_runs(args, workdir, out, raw, k, launch)
    floor = _floor_runs(args, workdir, out, k, launch)

    proc, inproc = by_driver["processes"], by_driver["inprocess"]
    if not proc or not inproc:
        out["overhead"] = {"error": "missing completed runs"}
        return
    figures = {
        **_processes_figures(proc, inproc, out["machine"]["effective_cores"]),
        **_other_figures(proc, inproc, floor),
    }
    result: dict[str, Any] = {name: stats(v) for name, v in figures.items()}
    result["owners"] = k
    result["launch"] = launch
    result["floor_owner_rows"] = floor[0]["owner_rows"][0] if floor else None
    result["target_ms"] = TARGET_TRANSPORT_MS
    verdicts = _transport_verdicts(result)
    result["target_by_estimate"] = verdicts
    floor_est = verdicts["measured (floor run, compute ~ 0)"]
    result["target_met"] = bool(floor_est and floor_est["met"])
    out["overhead"] = result


def part_ratio(args: argparse.Namespace, workdir: Path, out: dict[str, Any]) -> None:
    k = args.ratio_owners
    print(
        f"\n== 3. wall-time ratio processes / inprocess: K = {k}, {args.ratio_rows} rows per owner, dim {args.dim}, "
        f"d = {args.features}, p = {args.ratio_rounds}, launch {', '.join(args.launches)}"
    )
    data = data_section(k, args.ratio_rows, args.dim, args.components, args.partition)
    raw = scenario_raw(f"bench-ratio-k{k}", k, data, args.ratio_rounds, args.features, args.seed, args.set)
    res: dict[str, Any] = {
        "owners": k,
        "rows_per_owner": args.ratio_rows,
        "rounds": args.ratio_rounds,
        "target": TARGET_RATIO,
        "drivers": {},
        "ratios": {},
    }
    walls: dict[str, list[float]] = {}
    for driver, launch in [*(("processes", launch) for launch in args.launches), ("inprocess", None)]:
        name = run_name(driver, launch)
        runs = [run_one(args, workdir, f"ratio-k{k}", raw, driver, r, launch) for r in range(args.repeats)]
        out["runs"].extend(runs)
        ok = [r for r in runs if r["status"] == "completed"]
        walls[name] = [r["wall_s"] for r in ok]
        res["drivers"][name] = {
            "wall_s": stats(walls[name]),
            **{
                f"{phase}_s": stats([r["phases_s"][phase] for r in ok])
                for phase in ("setup", "first_round", "rounds", "closing")
            },
            "latency_ms": stats([r["per_round"]["latency_ms"] for r in ok]),
            "owner_rows": ok[0]["owner_rows"] if ok else None,
        }
    inproc = walls["inprocess"]
    for launch in args.launches:
        proc = walls[run_name("processes", launch)]
        if proc and inproc:
            ratio = statistics.median(proc) / statistics.median(inproc)
            pr, ir = res["drivers"][run_name("processes", launch)]["rounds_s"], res["drivers"]["inprocess"]["rounds_s"]
            res["ratios"][launch] = {
                "ratio": ratio,
                "ratio_min": min(proc) / max(inproc),
                "ratio_max": max(proc) / min(inproc),
                "rounds_only_ratio": pr["median"] / ir["median"] if pr and ir else None,
                "target_met": ratio <= TARGET_RATIO,
            }
    out["ratio"] = res


# ----------------------------------------------------------------------------------- printing


def print_tables(out: dict[str, Any]) -> None:
    m = out["machine"]
    print("\n" + "=" * 100)
    print(
        f"machine: {m['cpu_count']} CPUs, effective parallelism {m['effective_cores']:.2f} cores "
        f"(pure-Python loop, 1 process {m['one_s']:.2f} s, {m['cpu_count']} at once {m['all_s']:.2f} s); "
        f"(after the runs: {out['machine_after']['effective_cores']:.2f}); "
        f"launch {out['settings']['launch']}; overrides {out['settings']['set'] or 'none'}"
    )
    print("values: median [min-max] over repeats")
    if out.get("rounds"):
        print("\n1. Per-round latency (round 1 -> round P, protocol only)")
        print(
            f"{'K':>3} {'driver':<20} {'rows/owner':>11} {'latency ms/round':>24} {'rounds/s':>22} {'p90 gap ms':>12} "
            f"{'CPU ms/round':>20} {'setup s':>18} {'wall s':>20}"
        )
        for r in out["rounds"]:
            if not r.get("completed"):
                print(f"{r['owners']:>3} {r['driver']:<20} FAILED: {r.get('failures')}")
                continue
            lo, hi = r["owner_rows"]
            rows_txt = str(lo) if lo == hi else f"{lo}-{hi}"
            print(
                f"{r['owners']:>3} {r['driver']:<20} {rows_txt:>11} {fmt(r['latency_ms']):>24} "
                f"{fmt(r['rounds_per_s'], 1):>22} "
                f"{fmt(r['gap_p90_ms'], 1):>12} {fmt(r['cpu_ms_per_round'], 1):>20} {fmt(r['setup_s']):>18} "
                f"{fmt(r['wall_s']):>20}"
            )
    o = out.get("overhead")
    if o and "error" not in o:
        print(f"\n2. Transport overhead per round at K = {o['owners']}, launch {o['launch']} (ms per round)")
        lines = [
            ("processes latency", "proc_latency"),
            ("in-process latency (sequential: all owners + codec)", "inproc_latency"),
            ("curator compute (processes run)", "curator_compute"),
            ("max owner compute, per OS process (processes run)", "max_owner_compute"),
            ("sum owner compute (processes run)", "sum_owner_compute"),
            ("curator compute (in-process run)", "inproc_curator_compute"),
            ("max owner compute (in-process run, uncontended)", "inproc_max_owner_compute"),
            ("sum owner compute (in-process run)", "inproc_sum_owner_compute"),
            ("codec, summed over parties (processes)", "codec_sum"),
            ("codec, curator + slowest owner (processes)", "codec_critical"),
            ("codec, summed over parties (in-process)", "inproc_codec_sum"),
            ("socket I/O, summed over parties (processes)", "io_sum"),
            ("CPU time of all parties per round (processes)", "cpu_per_round"),
            ("  of which the curator process (all threads)", "proc_curator_cpu"),
            ("  of which the owner processes (sum)", "proc_owners_cpu"),
            ("CPU time per round (in-process)", "inproc_cpu_per_round"),
            ("extra CPU per round of the processes driver", "extra_cpu_processes"),
            ("CPU-bound floor: CPU per round / effective cores", "cpu_bound"),
            (f"floor run ({o['floor_owner_rows']} rows/owner): processes latency", "floor_proc_latency"),
            ("floor run: codec summed over parties", "floor_codec_sum"),
            ("floor run: CPU time of all parties per round", "floor_cpu_per_round"),
            ("  of which the curator process (all threads)", "floor_curator_cpu"),
            ("  of which the owner processes (sum)", "floor_owners_cpu"),
            ("TRANSPORT = proc latency - (curator + max owner compute)", "transport_estimate"),
            ("  same, with uncontended in-process compute", "transport_estimate_uncontended"),
        ]
        for text, key in lines:
            print(f"  {text:<62} {fmt(o.get(key)):>26}")
        print(f"  target: transport overhead <= {o['target_ms']:g} ms per round (verdict from the measured one):")
        for name, est in o.get("target_by_estimate", {}).items():
            shown = "n/a" if est is None else f"{est['median']:.2f} ms -> {'MET' if est['met'] else 'NOT MET'}"
            print(f"    {name:<60} {shown:>28}")
    r = out.get("ratio")
    if r and r.get("drivers"):
        print(
            f"\n3. Wall time processes / in-process, K = {r['owners']}, {r['rows_per_owner']} rows/owner, p = "
            f"{r['rounds']} (seconds)"
        )
        print(
            f"  {'driver':<20} {'wall_s':>22} {'setup':>20} {'first round':>20} {'rounds':>20} {'closing':>20} "
            f"{'ms/round':>20}"
        )
        for name, d in r["drivers"].items():
            print(
                f"  {name:<20} {fmt(d['wall_s']):>22} {fmt(d['setup_s']):>20} {fmt(d['first_round_s']):>20} "
                f"{fmt(d['rounds_s']):>20} {fmt(d['closing_s']):>20} {fmt(d['latency_ms']):>20}"
            )
        for launch, q in r["ratios"].items():
            verdict = "MET" if q["target_met"] else "NOT MET"
            rounds_only = f"{q['rounds_only_ratio']:.2f}" if q["rounds_only_ratio"] else "n/a"
            print(
                f"  launch {launch:<10}: ratio of medians {q['ratio']:.2f} (range "
                f"{q['ratio_min']:.2f}-{q['ratio_max']:.2f}); "
                f"rounds-only ratio {rounds_only}; target <= {r['target']:g} -> {verdict}"
            )
    print("=" * 100)


# ----------------------------------------------------------------------------------- main


def _int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _parser() -> argparse.ArgumentParser:
    """The command line: which parts, how many runs, the worlds' sizes, and the worker's hidden option."""
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--json", metavar="PATH", help="write all figures (and every run's raw measurements) here")
    parser.add_argument(
        "--parts", default="1,2,3", help="which measurements: 1 rounds, 2 transport overhead, 3 wall ratio"
    )
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration (median/min/max)")
    parser.add_argument(
        "--launch",
        choices=("forkserver", "exec", "both"),
        default="forkserver",
        help="how the processes driver starts parties; both: parts 1-2 use forkserver, part 3 reports each",
    )
    parser.add_argument("--owners", type=_int_list, default=[4, 16, 64], help="K values of part 1")
    parser.add_argument("--drivers", default="processes,inprocess", help="drivers of part 1")
    parser.add_argument("--rounds", type=int, default=100, help="p of parts 1 and 2")
    parser.add_argument("--features", type=int, default=140, help="d, random Fourier features")
    parser.add_argument("--dim", type=int, default=20, help="data dimension of the covariate_shift source")
    parser.add_argument("--components", type=int, default=8)
    parser.add_argument(
        "--rows-per-owner",
        type=int,
        default=2000,
        help="owner rows at the largest K of part 1 (same world for every K)",
    )
    parser.add_argument("--partition", default="even", choices=("even", "by_group"))
    parser.add_argument("--overhead-owners", type=int, default=16)
    parser.add_argument(
        "--floor-rows", type=int, default=200, help="rows per owner of the near-zero-compute floor run of part 2"
    )
    parser.add_argument("--ratio-owners", type=int, default=8)
    parser.add_argument("--ratio-rows", type=int, default=10_000)
    parser.add_argument("--ratio-rounds", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="scenario override for every run, e.g. transport.endpoint=ipc:///tmp/bench.ipc",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="cProfile every in-process run (all parties in one process) into <run>/inprocess.prof "
        "(slows them down: for attribution only; use with --workdir)",
    )
    parser.add_argument("--workdir", help="where runs are written (default: a temporary folder, removed)")
    parser.add_argument("--keep-runs", action="store_true", help="keep every run's output folder (logs, report.json)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every part once at K = 2, p = 5, smallest world, short calibration: seconds (the test suite's run)",
    )
    parser.add_argument("--worker", metavar="SPEC", help=argparse.SUPPRESS)
    return parser


def _header(args: argparse.Namespace) -> dict[str, Any]:
    """The figures' header: the command, its settings, the library versions and the machine's parallelism."""
    import msgpack
    import numpy
    import zmq

    return {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "settings": {k: v for k, v in vars(args).items() if k != "worker"},
        "versions": {
            "python": platform.python_version(),
            "numpy": numpy.__version__,
            "pyzmq": zmq.__version__,
            "libzmq": zmq.zmq_version(),
            "msgpack": ".".join(map(str, msgpack.version)),
        },
        "machine": calibrate_cores(args.calibrate_s),
        "runs": [],
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.worker:
        return worker(args.worker)
    if args.smoke:
        vars(args).update(SMOKE)
    args.calibrate_s = 0.02 if args.smoke else 0.4
    args.drivers = [d for d in args.drivers.split(",") if d]
    args.launches = ["forkserver", "exec"] if args.launch == "both" else [args.launch]
    parts = set(_int_list(args.parts))
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="bench_runtime-"))
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    out = _header(args)
    print(
        f"machine: {out['machine']['cpu_count']} CPUs, effective {out['machine']['effective_cores']:.2f}; runs in "
        f"{workdir}"
    )
    try:
        if 1 in parts:
            part_rounds(args, workdir, out)
        if 2 in parts:
            part_overhead(args, workdir, out)
        if 3 in parts:
            part_ratio(args, workdir, out)
    finally:
        out["machine_after"] = calibrate_cores(args.calibrate_s)
        out["elapsed_s"] = time.perf_counter() - started
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        if not args.workdir and not args.keep_runs:
            shutil.rmtree(workdir, ignore_errors=True)
    print_tables(out)
    print(f"total benchmark time {out['elapsed_s']:.0f} s" + (f"; figures written to {args.json}" if args.json else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
