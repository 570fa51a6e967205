"""``marketplace request`` as a user runs it from a shell: a new process per request, end to end.

Starts ``marketplace serve`` (a real process, with its owner agents; :func:`bench_serve.start_market`),
sends one untimed request so the marketplace is warm, then runs ``python -m marketplace request``
``--requests`` times as a subprocess, one after another, and reports the median of:

* **wall**: from the process's start to its exit (its imports, its connection, the session, its
  consumer's local work, the report written, the summary printed and ``rounds.png`` drawn, as the
  user's environment says: ``MARKETPLACE_ROUND_PLOTS`` is passed through);
* **cpu**: the process's user + system CPU time (steadier than wall time on a busy machine);
* **connected**: from the process's start to its first ``queued as session`` line (the marketplace
  answered: the process imported what it needs, read its kit and connected).

``--repeat N`` (default 5; 0: none) then runs one ``marketplace request --repeat N`` process (this
checkout): N requests on one connection, and reports each request's latency as the command prints it
(median, p95), the process's wall time and requests per minute over the whole process.

``--variant LABEL=PYTHONPATH`` (repeatable) runs the command with that ``PYTHONPATH`` too (another
checkout of the package, say the code before a change), the variants' requests taking turns so that a
shared machine's load falls on each alike; the marketplace itself is always this checkout's.

    python benchmarks/bench_request_shell.py --json shell.json                  # 4 owners, median of 5
    python benchmarks/bench_request_shell.py --requests 9 --variant before=/tmp/old --json cmp.json
    python benchmarks/bench_request_shell.py --smoke --json smoke.json          # seconds: 2 owners, 2 requests
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import REQUESTS, start_market  # noqa: E402
from proctree import stop_group  # noqa: E402

CONNECTED = "queued as session"
"""The line ``marketplace request`` prints once the marketplace has answered its request."""


def one_request(endpoint: str, keys: Path, out: Path, pythonpath: str | None) -> dict:
    """One ``marketplace request`` process: its wall time, the time to its first queued line, its status."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    command = [sys.executable, "-m", "marketplace", "request", str(REQUESTS["sketch"])]
    command += ["--market", endpoint, "--keys", str(keys), "--out", str(out)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(  # not run from a checkout: ``python -m`` puts the cwd before PYTHONPATH
        command, env=env, cwd=out.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    connected = None
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if connected is None and CONNECTED in line:
            connected = time.perf_counter() - t0
    _, exit_status, usage = os.wait4(proc.pid, 0)  # the process's own CPU: steadier than wall on a shared machine
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(exit_status)
    report = out / "report.json"
    status = json.loads(report.read_text()).get("status") if report.exists() else "no report"
    if proc.returncode != 0:  # a completed run exits 0: anything else failed after its report (its summary, its plot)
        status = f"{status}, exit {proc.returncode}"
    return {
        "wall_s": round(wall, 4),
        "connected_s": None if connected is None else round(connected, 4),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
        "status": status,
        "rounds_png": (out / "rounds.png").exists(),
        "stderr_tail": "".join(lines[-5:]) if status != "completed" else "",
    }


def repeat_series(endpoint: str, keys: Path, out: Path, count: int) -> dict:
    """One ``marketplace request --repeat count`` process: each request's latency as it printed it
    (``request i/N: completed in X s``), their median and p95, the process's wall time and its rate."""
    command = [sys.executable, "-m", "marketplace", "request", str(REQUESTS["sketch"]), "--repeat", str(count)]
    command += ["--market", endpoint, "--keys", str(keys), "--out", str(out), "--quiet"]
    t0 = time.perf_counter()
    done = subprocess.run(command, cwd=out.parent, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    latencies = [
        float(line.split(" in ", 1)[1].split(" s", 1)[0])
        for line in done.stdout.splitlines()
        if line.startswith("request ") and " in " in line
    ]
    ranked = sorted(latencies)
    return {
        "repeat": count,
        "exit_status": done.returncode,
        "latencies_s": latencies,
        "median_latency_s": round(statistics.median(ranked), 3) if ranked else None,
        "p95_latency_s": ranked[max(0, -(-95 * len(ranked) // 100) - 1)] if ranked else None,
        "wall_s": round(wall, 3),
        "requests_per_min": round(60.0 * len(latencies) / wall, 1),
        "summary_line": done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:],
    }


def summary(label: str, rows: list[dict]) -> dict:
    """A variant's medians (and its every measurement)."""
    walls = [r["wall_s"] for r in rows]
    connects = [r["connected_s"] for r in rows if r["connected_s"] is not None]
    return {
        "variant": label,
        "requests": len(rows),
        "completed": sum(r["status"] == "completed" for r in rows),
        "median_wall_s": round(statistics.median(walls), 3),
        "median_connected_s": round(statistics.median(connects), 3) if connects else None,
        "min_wall_s": round(min(walls), 3),
        "median_cpu_s": round(statistics.median(r["cpu_s"] for r in rows), 3),
        "rounds_png": all(r["rounds_png"] for r in rows),
        "runs": rows,
        "cpus": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument("--requests", type=int, default=5, help="timed requests per variant (the median is kept)")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="LABEL=PYTHONPATH",
        help="also time the command with this PYTHONPATH (another checkout); the variants take turns",
    )
    parser.add_argument(
        "--repeat", type=int, default=5, help="then one `request --repeat N` process (0: none), per-request latency"
    )
    parser.add_argument("--smoke", action="store_true", help="2 owners, 2 timed requests: seconds")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    if args.smoke:
        args.owners, args.requests = 2, 2
    variants: list[tuple[str, str | None]] = [("this", None)]
    variants += [(v.split("=", 1)[0], v.split("=", 1)[1]) for v in args.variant]
    runs: dict[str, list[dict]] = {label: [] for label, _ in variants}
    series: dict | None = None
    with tempfile.TemporaryDirectory(prefix="bench-request-shell-") as tmp:
        state = Path(tmp) / "state"
        proc, endpoint = start_market(state, args.owners, 1, 1)
        keys = state / "consumers" / "c0"
        try:
            warm = one_request(endpoint, keys, Path(tmp) / "warm-up", None)
            if warm["status"] != "completed":
                raise SystemExit(f"the warm-up request did not complete: {warm}")
            for i in range(args.requests):
                for label, pythonpath in variants:
                    row = one_request(endpoint, keys, Path(tmp) / f"{label}-{i}", pythonpath)
                    runs[label].append(row)
                    print(
                        f"{label} #{i}: {row['wall_s']:.3f} s (connected {row['connected_s']} s, "
                        f"CPU {row['cpu_s']:.3f} s) {row['status']}",
                        flush=True,
                    )
            series = repeat_series(endpoint, keys, Path(tmp) / "repeat", args.repeat) if args.repeat > 0 else None
        finally:
            stop_group(proc)
    rows = [summary(label, runs[label]) for label, _ in variants]
    for row in rows:
        print(
            f"{row['variant']}: marketplace request median {row['median_wall_s']:.3f} s end to end "
            f"(min {row['min_wall_s']:.3f} s, CPU {row['median_cpu_s']:.3f} s), connected after "
            f"{row['median_connected_s']} s, "
            f"{row['completed']}/{row['requests']} completed ({args.owners} owners, load {row['load_1min']})",
            flush=True,
        )
    if series is not None:
        print(
            f"request --repeat {series['repeat']}: per request median {series['median_latency_s']} s, p95 "
            f"{series['p95_latency_s']} s; whole process {series['wall_s']} s, {series['requests_per_min']} "
            f"requests/min (exit {series['exit_status']})",
            flush=True,
        )
        rows.append({"variant": "repeat", **series})
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r.get("completed") == r.get("requests") or r.get("exit_status") == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
