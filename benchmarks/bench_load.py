"""Whole runs on a loaded machine: do they complete, with every owner?

    python benchmarks/bench_load.py [--runs 10] [--busy 4] [--json load.json]
    python benchmarks/bench_load.py --smoke          # 1 run of the quickstart beside 1 busy loop
    python benchmarks/bench_load.py --scenario scenarios/pfds-adult.yaml --runs 1   # other scenarios

Runs `marketplace run` (the default processes driver and settings, `--quiet`) of the quickstart,
the private quickstart and one pfds scenario (pfds-bank when its dataset is in the data cache,
else pfds-synthetic; `--pfds` picks another), each `--runs` times in turn, while `--busy` CPU-bound
Python loops run beside them. The loops are started by this script in a process group of their own
and killed with it when the script ends, however it ends (they also stop on their own once this
script's process is gone, or after `--busy-limit-s`).

A run counts as **completed** when `marketplace run` exits 0, the report's status is `completed`
and no owner was lost (`owners_lost.count` 0). Printed per scenario: completed/total, wall time
(min / median / max) and every other outcome with its reason (the report's `failures`, the
`owners_lost` summary, or the end of stderr). Exit status 0 only if every run completed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "scenarios"
RUN_TIMEOUT_S = 1800.0
"""A hang guard per run (a run that hangs counts as not completed), not a measure."""

SPIN = """
import os, sys, time
watched, limit = int(sys.argv[1]), float(sys.argv[2])
for _ in range(int(sys.argv[3]) - 1):
    if os.fork() == 0:
        break
end = time.monotonic() + limit
while time.monotonic() < end:
    for _ in range(2_000_000):
        pass
    try:
        os.kill(watched, 0)
    except ProcessLookupError:
        break
"""
"""``busy`` CPU-bound loops in one process group: the leader forks the others. Each stops when
the benchmark's process is gone or after ``limit`` seconds, whichever comes first."""


class BusyLoops:
    """``count`` CPU-bound Python loops in a process group of their own, killed on exit."""

    def __init__(self, count: int, limit_s: float) -> None:
        self.count = count
        self.limit_s = limit_s
        self.leader: subprocess.Popen | None = None

    def __enter__(self) -> BusyLoops:
        if self.count > 0:
            self.leader = subprocess.Popen(
                [sys.executable, "-c", SPIN, str(os.getpid()), str(self.limit_s), str(self.count)],
                start_new_session=True,
                stdin=subprocess.DEVNULL,
            )
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Kill every loop of the group (SIGKILL to the whole group) and reap the leader."""
        if self.leader is None:
            return
        try:
            os.killpg(self.leader.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.leader.wait()
        self.leader = None


def pfds_scenario() -> Path:
    """pfds-bank when its dataset is in the data cache, else pfds-synthetic (no data files)."""
    sys.path.insert(0, str(ROOT))
    from marketplace.datasets import DatasetMissing
    from marketplace.scenario import ScenarioError, load_scenario

    try:
        load_scenario(SCENARIOS / "pfds-bank.yaml")
    except (DatasetMissing, ScenarioError):
        return SCENARIOS / "pfds-synthetic.yaml"
    return SCENARIOS / "pfds-bank.yaml"


def one_run(scenario: Path, out: Path, timeout_s: float) -> dict:
    """`marketplace run SCENARIO --out OUT --quiet` as a user runs it; its outcome and why."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "marketplace", "run", str(scenario), "--out", str(out), "--quiet"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        code, stderr = done.returncode, done.stderr
    except subprocess.TimeoutExpired as err:
        code, stderr = (
            None,
            err.stderr.decode(errors="replace") if isinstance(err.stderr, bytes) else (err.stderr or ""),
        )
    wall = time.monotonic() - started
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    lost = report.get("owners_lost") or {}
    status = report.get("status")
    completed = code == 0 and status == "completed" and lost.get("count", 0) == 0
    reasons: list[str] = []
    if not completed:
        if code is None:
            reasons.append(f"no end within {timeout_s:g} s (killed)")
        reasons += report.get("failures") or []
        if lost.get("count"):
            reasons.append(lost.get("summary") or f"{lost['count']} owners lost")
        if not reasons:
            reasons.append(f"exit {code}: " + " | ".join(stderr.strip().splitlines()[-3:]))
    return {
        "scenario": scenario.stem,
        "exit": code,
        "status": status,
        "owners_lost": lost.get("count", 0),
        "wall_s": round(wall, 2),
        "completed": completed,
        "reasons": reasons,
    }


def summarize(runs: list[dict], scenarios: list[str]) -> list[dict]:
    """Per scenario: completed/total, wall times, and the failures' reasons with their counts."""
    rows = []
    for name in scenarios:
        mine = [r for r in runs if r["scenario"] == name]
        walls = [r["wall_s"] for r in mine]
        reasons: dict[str, int] = {}
        for r in mine:
            for reason in r["reasons"]:
                reasons[reason] = reasons.get(reason, 0) + 1
        rows.append(
            {
                "scenario": name,
                "completed": sum(r["completed"] for r in mine),
                "total": len(mine),
                "owners_lost": sum(r["owners_lost"] for r in mine),
                "wall_s": [min(walls), statistics.median(walls), max(walls)] if walls else [],
                "reasons": reasons,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per scenario (default 10)")
    parser.add_argument("--busy", type=int, default=4, help="CPU-bound loops beside the runs (default 4)")
    parser.add_argument(
        "--busy-limit-s", type=float, default=4 * 3600.0, help="the loops stop on their own after this long"
    )
    parser.add_argument(
        "--pfds",
        type=Path,
        default=None,
        help="the pfds scenario (default: pfds-bank if its data are cached, else pfds-synthetic)",
    )
    parser.add_argument(
        "--scenario",
        type=Path,
        action="append",
        default=None,
        help="run this scenario instead of the three (repeatable)",
    )
    parser.add_argument("--smoke", action="store_true", help="1 run of the quickstart beside 1 busy loop (seconds)")
    parser.add_argument("--timeout-s", type=float, default=RUN_TIMEOUT_S, help="hang guard per run")
    parser.add_argument("--json", type=Path, default=None, help="write every run and the summary here")
    parser.add_argument(
        "--keep", type=Path, default=None, help="keep every run's output folder (logs, report) under this folder"
    )
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs: expected an integer >= 1, got {args.runs}")
    if args.busy < 0:
        parser.error(f"--busy: expected an integer >= 0, got {args.busy}")
    if args.smoke:
        scenarios, runs_each, busy = [SCENARIOS / "quickstart.yaml"], 1, 1
    else:
        scenarios = args.scenario or [
            SCENARIOS / "quickstart.yaml",
            SCENARIOS / "quickstart-private.yaml",
            args.pfds or pfds_scenario(),
        ]
        runs_each, busy = args.runs, args.busy
    for scenario in scenarios:
        if not scenario.is_file():
            parser.error(f"--scenario: expected a scenario file, got {str(scenario)!r} (no such file)")
    print(
        f"{busy} busy loop(s) beside {runs_each} run(s) of each of: {', '.join(s.name for s in scenarios)} "
        f"({os.cpu_count()} CPUs)",
        flush=True,
    )
    runs: list[dict] = []
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the loops are killed on the way out
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    with BusyLoops(busy, args.busy_limit_s), tempfile.TemporaryDirectory(prefix="bench_load_") as tmp:
        where = args.keep if args.keep is not None else Path(tmp)
        for i in range(runs_each):
            for scenario in scenarios:
                result = one_run(scenario, where / f"{scenario.stem}-{i + 1}", args.timeout_s)
                runs.append(result)
                verdict = "completed" if result["completed"] else "NOT completed: " + "; ".join(result["reasons"])[:500]
                print(
                    f"{scenario.stem:<20} run {i + 1:>2}  {result['wall_s']:7.1f} s  exit {result['exit']}  {verdict}",
                    flush=True,
                )
    rows = summarize(runs, [s.stem for s in scenarios])
    print()
    print(f"{'scenario':<20} {'completed':>9}  {'owners lost':>11}  wall s (min / median / max)")
    for row in rows:
        wall = " / ".join(f"{w:.1f}" for w in row["wall_s"])
        print(f"{row['scenario']:<20} {row['completed']:>4}/{row['total']:<4}  {row['owners_lost']:>11}  {wall}")
        for reason, count in row["reasons"].items():
            print(f"    {count} x {reason[:300]}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"busy_loops": busy, "runs_each": runs_each, "cpus": os.cpu_count(), "summary": rows, "runs": runs},
                indent=2,
            )
        )
    return 0 if all(r["completed"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
