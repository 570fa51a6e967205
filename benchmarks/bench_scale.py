"""Scale: summarize with K = 16 ... 10,000 owners, owner hosts against the in-process driver.

Run (the defaults take about ten minutes on a 2-core machine):

    python benchmarks/bench_scale.py --json scale.json
    python benchmarks/bench_scale.py --owners 1000 --drivers processes     # only the K = 1,000 run
    python benchmarks/bench_scale.py --owners 3000 10000                   # about four minutes

Each point is one `marketplace run` command, started fresh (cold imports, as a user runs it), on
the quickstart scenario with K owners (quickstart-sized data: 2,000 rows per component, so the
owners' rows shrink as K grows; even partition), 100 rounds, the baselines off. The processes
driver uses owner hosts (``parties.owners_per_process``, default ``auto``: one host per core, more
when one per core would not fit the open-files limit) and
CURVE, exactly as ``marketplace run`` does by default.

Reported per point:

* ``wall_s``: the command's wall time (start to exit: world, parties, rounds, evaluation, report);
* ``run_wall_s``: the report's ``timing.wall_s`` (from starting the parties to the driver's return);
* ``rounds_per_s``: rounds / run_wall_s;
* ``cpu_s``: user + system CPU of the whole process tree (the command and every descendant it reaped);
* ``peak_rss_mb``: the largest sum of RSS over the process tree, sampled every ``--memory-every``
  seconds (0.25) from /proc. A sum of RSS counts pages shared between forked processes once per
  process, so it is an upper bound; ``peak_pss_mb`` (proportional set size, shared pages split
  between their users) is the honest total, and ``owner_host_pss_mb`` / ``per_hosted_owner_mb``
  its owners' part;
* ``sampler_cpu_s``: the CPU the memory sampler itself used. Reading ``smaps_rollup`` makes the
  kernel walk a process's page tables: at K = 1,000 one sample of the tree costs about 10 ms of
  CPU. Sampled every 20 ms (this benchmark's first setting) it took a quarter of a core from the
  processes driver, whose parties use both cores, and nothing from the in-process driver, which
  leaves one core idle for it: the ratios came out 10-20 % too high. ``--memory-every 0`` times
  a run with no sampler at all;
* ``connect_s`` (processes driver): from the curator's start to every party being present (the
  owner hosts' start, every owner's TCP connection, CURVE handshake and hello), from the
  millisecond timestamps of the curator's log; ``round_ms`` (both drivers): the mean time of a
  round from there on (first to last "round i/P done" line; the in-process driver's curator logs
  nowhere, so a wrapper around the same command times its lines);
* ``rounds_cpu_us_per_owner_round`` (both drivers): the CPU the whole tree used between the first
  and the last round (from the samples of /proc/PID/stat, interpolated), per owner and round: what
  a round costs, with the set-up and the evaluation left out;
* ``ratio``: processes wall / in-process wall at the same K (both ``wall_s`` and ``run_wall_s``);
  with ``--repeats N`` the two drivers take turns N times and the ratio row gives the median of the
  N pairwise ratios (and their range).

The scale curve: after the runs (or from earlier ``--json`` files with ``--from-json``, with
Flower's engines from ``bench_flower.py --json`` files given to ``--peers``) a table per K and
engine of run wall, ms per round, CPU and CPU per owner-round, and peak PSS; ``--plot PNG`` draws
ms per round and CPU per owner-round against K (``scale_plot.py``, shared with ``bench_serve.py``;
``bench_serve.py --json`` files given to ``--from-json`` join the figure as served lines, not the
table). ``--owners`` takes K values apart or comma-separated (``--owners 64,256,1000``).

``--smoke`` runs K = 4 with 5 rounds under both drivers (seconds), for the test suite; it samples
memory every 20 ms at most, since its owner hosts can live less than one 0.25 s interval.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from proctree import (
    CLOCK_TICK,
    cpu_ticks,
    interpolate,
    memory_kb,
    thread_kind_ticks,
    tree,
)  # a script's own folder is on sys.path
from scale_plot import draw, read_peers, read_rows, scale_curve

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


class TreeSampler(threading.Thread):
    """Samples the memory of a process tree until stopped: peak sums, and each process's peak PSS."""

    def __init__(self, root: int, every_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.root, self.every_s = root, every_s
        self.peak_rss_kb = self.peak_pss_kb = 0
        self.cpu_s = 0.0
        """CPU time this sampler used (its share of the machine, taken from the run it measures)."""
        self.peak_by_pid: dict[int, int] = {}
        self.cpu_trace: list[tuple[float, float]] = []
        """(wall clock, CPU seconds the tree has used: every process's last reading) at each sample."""
        self.cpu_seen: dict[int, int] = {}
        self.thread_trace: list[tuple[float, dict[tuple[int, str], int]]] = []
        """(wall clock, CPU ticks by (pid, thread kind) of the live processes) at each sample."""
        self.stop_event = threading.Event()

    def thread_cpu_between(self, start: float, end: float) -> dict[tuple[int, str], float]:
        """CPU seconds by (pid, thread kind) between two wall-clock times, each interpolated between
        the samples that saw it (a process that exited before ``end``, as the parties do right
        after the last round, counts up to its last sample)."""
        series: dict[tuple[int, str], list[tuple[float, float]]] = {}
        for t, snap in self.thread_trace:
            for key, ticks in snap.items():
                series.setdefault(key, []).append((t, ticks))
        return {
            key: (interpolate(points, end) - interpolate(points, start)) / CLOCK_TICK
            for key, points in series.items()
            if points[0][0] <= start
        }

    def cpu_between(self, start: float, end: float) -> float | None:
        """CPU seconds the tree used between two wall-clock times, interpolated between samples
        (None without samples around both)."""
        if not self.cpu_trace or self.cpu_trace[0][0] > start or self.cpu_trace[-1][0] < end:
            return None
        return interpolate(self.cpu_trace, end) - interpolate(self.cpu_trace, start)

    def run(self) -> None:
        started = time.thread_time()
        while not self.stop_event.is_set():
            rss_sum = pss_sum = 0
            threads: dict[tuple[int, str], int] = {}
            for pid in tree(self.root):  # one scan of /proc per sample, for memory and CPU alike
                rss, pss = memory_kb(pid)
                rss_sum += rss
                pss_sum += pss
                if pss > self.peak_by_pid.get(pid, 0):
                    self.peak_by_pid[pid] = pss
                ticks = cpu_ticks(pid)
                if ticks is not None:
                    self.cpu_seen[pid] = max(self.cpu_seen.get(pid, 0), ticks)
                threads.update(((pid, kind), n) for kind, n in thread_kind_ticks(pid).items())
            now = time.time()
            self.cpu_trace.append((now, sum(self.cpu_seen.values()) / CLOCK_TICK))
            self.thread_trace.append((now, threads))
            self.peak_rss_kb = max(self.peak_rss_kb, rss_sum)
            self.peak_pss_kb = max(self.peak_pss_kb, pss_sum)
            self.cpu_s = time.thread_time() - started
            self.stop_event.wait(self.every_s)


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")


def curator_phases(log: Path) -> dict[str, float]:
    """``connect_s`` and ``round_ms`` from the curator's log (see the module docstring); {} if the
    log lacks the lines (a failed run)."""
    start = present = None
    rounds: list[float] = []
    for line in log.read_text(errors="replace").splitlines():
        m = LOG_TIME.match(line)
        if m is None:
            continue
        t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp() + int(m.group(2)) / 1000
        if start is None and " starting" in line:
            start = t
        elif present is None and "are present" in line:
            present = t
        elif re.search(r"round \d+/\d+ done", line):
            rounds.append(t)
    if start is None or present is None or len(rounds) < 2:
        return {}
    return {
        "connect_s": round(present - start, 3),
        "round_ms": round(1000 * (rounds[-1] - rounds[0]) / (len(rounds) - 1), 2),
        "_rounds_span": (rounds[0], rounds[-1], len(rounds)),
    }


ROUND_CLOCK = """
import json, logging, sys, time
ends = []
class Clock(logging.Handler):
    def emit(self, record):
        if record.getMessage().endswith(" done") and record.getMessage().startswith("round "):
            ends.append(time.time())
logger = logging.getLogger("marketplace.protocols.summarize.curator")
logger.addHandler(Clock()); logger.setLevel(logging.INFO); logger.propagate = False
from marketplace.cli import main
try:
    code = main(sys.argv[2:])
finally:
    open(sys.argv[1], "w").write(json.dumps(ends))
sys.exit(code)
"""
"""The in-process driver's curator runs inside ``marketplace run`` and logs nowhere: this wrapper
(the same command, as cold) times its "round i/P done" lines, as the curator's log does for the
processes driver, so ``round_ms`` means the same for both."""


def _command(owners: int, driver: str, rounds: int, extra: list[str], out: Path, clock: Path) -> list[str]:
    """``marketplace run`` of the quickstart at K = ``owners`` with ``driver``, without baselines,
    even partition; the in-process driver's wrapped in ROUND_CLOCK, which writes its rounds' ends to ``clock``."""
    args = [
        "run",
        str(QUICKSTART),
        "--out",
        str(out),
        "--quiet",
        "--driver",
        driver,
        "--set",
        f"parties.owners={owners}",
        "--set",
        f"summarize.rounds={rounds}",
        "--set",
        "summarize.baselines=[]",
        "--set",
        "data.partition.scheme=even",
    ]
    for item in extra:
        args += ["--set", item]
    if driver == "inprocess":
        return [sys.executable, "-c", ROUND_CLOCK, str(clock), *args]
    return [sys.executable, "-m", "marketplace", *args]


def _measured(cmd: list[str], memory_every_s: float) -> tuple[int, str, float, float, TreeSampler]:
    """Run ``cmd`` to its end, its process tree sampled every ``memory_every_s`` (0: never).
    Returns its exit code, its stderr, the wall seconds, the CPU seconds of the children it
    reaped, and the sampler."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    sampler = TreeSampler(proc.pid, memory_every_s)
    if memory_every_s > 0:
        sampler.start()
    _, stderr = proc.communicate()
    wall = time.perf_counter() - started
    if memory_every_s > 0:
        sampler.stop_event.set()
        sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, stderr, wall, cpu, sampler


def _host_figures(report: dict, sampler: TreeSampler, owners: int, memory_every_s: float, out: Path) -> dict:
    """The processes driver's: process count, whether the parties' message counts agree, the owner
    hosts' peak memory, and the curator's phases from its log."""
    owner_pids = {p["pid"] for p in report["parties"] if p.get("role") == "owner"}
    host_pss = sum(sampler.peak_by_pid.get(pid, 0) for pid in owner_pids) / 1024
    figures = {"processes": len(owner_pids) + 2, "consistency": report["messages"]["consistency"]["agree"]}
    if memory_every_s > 0:
        figures.update(owner_host_pss_mb=round(host_pss, 1), per_hosted_owner_mb=round(host_pss / owners, 3))
    figures.update(curator_phases(out / "logs" / "curator.log") if (out / "logs" / "curator.log").exists() else {})
    return figures


def _rounds_cpu(sampler: TreeSampler, span: tuple[float, float, int], report: dict, owners: int) -> dict:
    """The CPU of the rounds alone (set-up and evaluation left out), per owner and round: in all,
    and split by party role and thread kind."""
    figures = {}
    start, end, rounds = span
    cpu = sampler.cpu_between(start, end)
    if cpu is not None:
        figures["rounds_cpu_us_per_owner_round"] = round(1e6 * cpu / (owners * (rounds - 1)), 1)
    split = sampler.thread_cpu_between(start, end)
    if split and report:
        role = {p["pid"]: ("hosts" if p.get("role") == "owner" else p.get("role", "?")) for p in report["parties"]}
        where: dict[str, float] = {}
        for (pid, kind), seconds in split.items():
            name = f"{role.get(pid, 'runner')} {kind}"
            where[name] = where.get(name, 0.0) + seconds
        figures["rounds_cpu_split_us_per_owner_round"] = {
            name: round(1e6 * sec / (owners * (rounds - 1)), 1) for name, sec in sorted(where.items()) if sec > 0
        }
    return figures


def run_point(
    owners: int,
    driver: str,
    rounds: int,
    extra: list[str],
    workdir: Path,
    repeat: int = 0,
    memory_every_s: float = 0.25,
) -> dict:
    out = workdir / f"{driver}-k{owners}-r{repeat}"
    clock = workdir / f"{driver}-k{owners}-r{repeat}.rounds.json"
    code, stderr, wall, cpu, sampler = _measured(_command(owners, driver, rounds, extra, out, clock), memory_every_s)
    report = json.loads((out / "report.json").read_text()) if (out / "report.json").exists() else {}
    row = {
        "owners": owners,
        "driver": driver,
        "repeat": repeat,
        "rounds": rounds,
        "exit": code,
        "status": report.get("status"),
        "wall_s": round(wall, 3),
        "run_wall_s": round(report.get("timing", {}).get("wall_s", float("nan")), 3),
        "cpu_s": round(cpu, 2),
        "peak_rss_mb": round(sampler.peak_rss_kb / 1024, 1),
        "peak_pss_mb": round(sampler.peak_pss_kb / 1024, 1),
        "sampler_cpu_s": round(sampler.cpu_s, 3),
    }
    if memory_every_s <= 0:
        row.update(peak_rss_mb=None, peak_pss_mb=None)
    row["rounds_per_s"] = round(rounds / row["run_wall_s"], 2) if row["run_wall_s"] == row["run_wall_s"] else None
    if driver == "processes" and report:
        row.update(_host_figures(report, sampler, owners, memory_every_s, out))
    span = row.pop("_rounds_span", None)  # the processes driver's, from the curator's log
    if driver == "inprocess" and clock.exists():
        ends = json.loads(clock.read_text())
        if len(ends) >= 2:
            row["round_ms"] = round(1000 * (ends[-1] - ends[0]) / (len(ends) - 1), 2)
            span = (ends[0], ends[-1], len(ends))
    if span is not None and memory_every_s > 0:
        row.update(_rounds_cpu(sampler, span, report, owners))
    if code != 0:
        row["stderr"] = stderr[-2000:]
    return row


def ratio_row(owners: int, rounds: int, pairs: list[tuple[dict, dict]]) -> dict:
    """Processes against in-process at one K: each figure is the median over the (processes,
    in-process) pairs run back to back (with its range when there are several), so that a drift in
    the machine's speed moves both sides of a ratio alike."""

    def median(values: list[float]) -> float:
        return statistics.median(values)

    wall = [a["wall_s"] / b["wall_s"] for a, b in pairs]
    run = [a["run_wall_s"] / b["run_wall_s"] for a, b in pairs]
    transport = [1000 * (a["run_wall_s"] - b["run_wall_s"]) / rounds for a, b in pairs]
    row = {
        "owners": owners,
        "pairs": len(pairs),
        "ratio_wall": round(median(wall), 2),
        "ratio_run_wall": round(median(run), 2),
        "transport_ms_per_round": round(median(transport), 2),
        "processes_run_wall_s": round(median([a["run_wall_s"] for a, _ in pairs]), 3),
        "inprocess_run_wall_s": round(median([b["run_wall_s"] for _, b in pairs]), 3),
    }
    if len(pairs) > 1:
        row.update(
            ratio_wall_range=[round(min(wall), 2), round(max(wall), 2)],
            ratio_run_wall_range=[round(min(run), 2), round(max(run), 2)],
        )
    connect = [a["connect_s"] for a, _ in pairs if "connect_s" in a]
    round_ms = [a["round_ms"] for a, _ in pairs if "round_ms" in a]
    if connect:
        row.update(connect_s=round(median(connect), 3), round_ms=round(median(round_ms), 2))
    return row


def _counts(text: str) -> list[int]:
    """One ``--owners`` word: a K, or several comma-separated."""
    return [int(k) for k in text.split(",") if k]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--owners", type=_counts, nargs="+", default=[[16, 64, 256, 1000]], help="K values: 64 256 or 64,256"
    )
    parser.add_argument("--drivers", nargs="+", default=["inprocess", "processes"], choices=["inprocess", "processes"])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--keep", help="keep the run folders here (default: a temporary folder)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="runs per (K, driver), the drivers taking turns; the ratio row gives medians over the pairs",
    )
    parser.add_argument(
        "--memory-every",
        type=float,
        default=0.25,
        metavar="S",
        help="seconds between memory samples of the process tree (0: no sampling, timing only)",
    )
    parser.add_argument("--smoke", action="store_true", help="K = 4, 5 rounds, both drivers (seconds)")
    parser.add_argument(
        "--from-json",
        nargs="+",
        default=[],
        metavar="JSON",
        help="run nothing: read the rows of earlier --json files (the scale curve over several runs)",
    )
    parser.add_argument(
        "--peers",
        nargs="*",
        default=[],
        metavar="JSON",
        help="bench_flower.py --json files whose engines join the scale curve",
    )
    parser.add_argument("--plot", metavar="PNG", help="draw the scale curve (ms per round, CPU per owner-round) here")
    args = parser.parse_args(argv)
    args.owners = [k for counts in args.owners for k in counts]
    if args.from_json:
        rows = read_rows(args.from_json)
        return _curve(rows, args)
    if args.smoke:
        args.owners, args.rounds, args.drivers = [4], 5, ["inprocess", "processes"]
        if args.memory_every > 0:  # the smoke run's owner hosts live well under a second: sample often enough
            args.memory_every = min(args.memory_every, 0.02)  # to see them (its ratios are not judged)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        workdir = Path(args.keep) if args.keep else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for owners in args.owners:
            pairs = []
            for repeat in range(args.repeats):
                by_driver = {}
                for driver in args.drivers:
                    row = run_point(owners, driver, args.rounds, args.overrides, workdir, repeat, args.memory_every)
                    by_driver[driver] = row
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                if len(by_driver) == 2:
                    pairs.append((by_driver["processes"], by_driver["inprocess"]))
            if pairs:
                ratio = ratio_row(owners, args.rounds, pairs)
                rows.append(ratio)
                print(json.dumps(ratio), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    failed = [r for r in rows if r.get("exit") not in (None, 0)]
    _curve(rows, args)
    return 1 if failed else 0


def _curve(rows: list[dict], args: argparse.Namespace) -> int:
    """Print the scale curve of ``rows`` (and the peers' rows) as a table; draw it with ``--plot``."""
    peers = read_peers(args.peers)
    curve = scale_curve(rows, peers)
    print(
        f"{'K':>7} {'engine':<16} {'runs':>4} {'run wall s':>10} {'ms/round':>9} {'CPU s':>7} "
        f"{'CPU us/owner-round':>18} {'peak PSS MB':>11}"
    )
    for r in curve:
        cells = [
            f"{r['owners']:>7}",
            f"{r['engine']:<16}",
            f"{r['runs']:>4}",
            f"{r['run_wall_s'] if r['run_wall_s'] is not None else '-':>10}",
            f"{r['ms_per_round']:>9}",
            f"{r['cpu_s'] if r['cpu_s'] is not None else '-':>7}",
            f"{r['cpu_us_per_owner_round'] if r['cpu_us_per_owner_round'] is not None else '-':>18}",
            f"{r['peak_pss_mb'] if r['peak_pss_mb'] is not None else '-':>11}",
        ]
        print(" ".join(cells))
    if args.plot:
        draw(rows, Path(args.plot), peers)
        print(f"scale curve drawn: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
