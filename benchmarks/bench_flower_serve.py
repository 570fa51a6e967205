"""Flower's deployment engine as a service: runs submitted to a SuperLink that is already up.

The counterpart of ``bench_serve.py`` (a served marketplace, requests to it) in Flower: one
SuperLink and K SuperNodes (OS processes on loopback, insecure, ``bench_flower.FlowerDeployment``)
are started once; once the SuperLink lists every SuperNode online, one untimed warm-up run is
submitted, then for each concurrency level C, C submitters each submit ``--runs`` runs one after
another with ``flwr run APP bench --stream`` (the CLI returns when the run has ended). A run is
``flower_summarize.py``'s app (the curator's ``summarize`` rounds as a ServerApp, one owner per
SuperNode as a ClientApp) with K owners and P rounds: each round the direction to every owner, a
bid from each, the point from the best bidder. Measured:

* **latency** of each run, from the ``flwr run`` call to its return (the CLI's own start, the app's
  build and upload, the ServerApp's and ClientApps' processes, the rounds, the log stream's end):
  p50, p95, p99; and to the instant the ServerApp wrote its result (``result written``);
* **throughput**: runs completed per minute over the level's wall time;
* **CPU per run** of the SuperNodes (the owners, with the ClientApp processes they start) and of
  the SuperLink (with its ServerApp processes), user + system from /proc, over the level's runs;
* the **flwr CLI alone**: the median of three ``flwr ls`` calls, the part of each latency that is
  the command-line client starting and connecting, not the run.

Every run must write its result: a level where one did not is reported as failed (exit 1).

    pip install -e '.[compare]'                          # Flower; not part of the test extras
    python benchmarks/bench_flower_serve.py --json flower-serve.json    # 4 owners, 1 round, 8 runs at 1, then 4
    python benchmarks/bench_flower_serve.py --owners 4 --rounds 3 --levels 1 --runs 16
    python benchmarks/bench_flower_serve.py --smoke --json smoke.json   # 2 owners, 1 round, 2 runs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flower import EXTRA_HINT, flower_command  # noqa: E402
from bench_serve import percentile  # noqa: E402
from proctree import CLOCK_TICK, tree_ticks  # noqa: E402

RUN_TIMEOUT_S = 600.0


def flower_missing() -> str | None:
    """Why Flower cannot run here (its package or its ``flwr`` command missing), or None."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        return "the flwr package is not installed"
    if not Path(flower_command("flwr")).exists():
        return "the flwr command is not found"
    return None


def timed_run(deployment: Any, out: Path) -> dict[str, Any]:
    """One ``flwr run --stream`` whose ServerApp writes to ``out``: its latencies and status."""
    submitted_at, t0 = time.time(), time.perf_counter()
    try:
        run = deployment.submit(RUN_TIMEOUT_S, out=out)
        latency, error = time.perf_counter() - t0, None if run.returncode == 0 else deployment.failure(run)
    except Exception as err:  # noqa: BLE001 - counted as a failed run, named
        latency, error = time.perf_counter() - t0, f"{type(err).__name__}: {err}"
    if not out.exists():
        return {"latency_s": latency, "status": "failed", "error": (error or "no result")[-1500:]}
    result = json.loads(out.read_text())
    return {
        "latency_s": latency,
        "result_s": result["finished_at"] - submitted_at,
        "status": "completed",
        "selection": result["selection"],
        "error": error,
    }


def run_level(deployment: Any, workdir: Path, level: int, count: int) -> dict[str, Any]:
    """``level`` submitters at once, ``count`` runs each, one after another."""
    results: list[list[dict[str, Any]]] = [[] for _ in range(level)]

    def submitter(i: int) -> None:
        for j in range(count):
            results[i].append(timed_run(deployment, workdir / f"level{level}-{i}-{j}.json"))

    nodes = [p.pid for p in deployment.supernodes]
    before_nodes, before_link = sum(tree_ticks(pid) for pid in nodes), tree_ticks(deployment.superlink.pid)
    threads = [threading.Thread(target=submitter, args=(i,)) for i in range(level)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - t0
    runs = [r for rows in results for r in rows]
    done = len(runs)
    owner_s = (sum(tree_ticks(pid) for pid in nodes) - before_nodes) / CLOCK_TICK
    link_s = (tree_ticks(deployment.superlink.pid) - before_link) / CLOCK_TICK
    ok = [r for r in runs if r["status"] == "completed"]
    latencies, written = [r["latency_s"] for r in runs], [r["result_s"] for r in ok]
    return {
        "submitters": level,
        "runs": done,
        "completed": len(ok),
        "failed_examples": sorted({r["error"] for r in runs if r["status"] != "completed"})[:3],
        "selections_identical": len({json.dumps(r["selection"]) for r in ok}) <= 1,
        "p50_s": round(percentile(latencies, 0.50), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "p99_s": round(percentile(latencies, 0.99), 3),
        "mean_s": round(statistics.fmean(latencies), 3) if latencies else None,
        "result_written_p50_s": round(percentile(written, 0.50), 3) if written else None,
        "result_written_p95_s": round(percentile(written, 0.95), 3) if written else None,
        "runs_per_min": round(60 * done / wall, 1) if wall > 0 else None,
        "wall_s": round(wall, 2),
        "owner_cpu_s_per_run": round(owner_s / done, 4) if done else None,
        "superlink_cpu_s_per_run": round(link_s / done, 4) if done else None,
    }


def cli_floor(deployment: Any) -> float:
    """The median seconds of three ``flwr ls`` calls: the CLI starting and asking the SuperLink once."""
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        deployment.flwr(["ls", "bench", "--limit", "1"], timeout=120)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", type=int, default=4, help="SuperNodes, one owner each")
    parser.add_argument("--rounds", type=int, default=1, help="summarize rounds per run")
    parser.add_argument("--levels", default="1,4", help="concurrent submitters, comma-separated")
    parser.add_argument("--runs", type=int, default=8, help="timed runs per submitter (after one warm-up run)")
    parser.add_argument("--memory", action="store_true", help="the SuperLink keeps its state in memory, not SQLite")
    parser.add_argument("--smoke", action="store_true", help="2 owners, 1 round, 1 submitter, 2 runs: seconds")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    missing = flower_missing()
    if missing:
        print(f"bench_flower_serve.py needs Flower ({missing}): {EXTRA_HINT}", file=sys.stderr)
        return 2
    from bench_flower import FlowerDeployment, _become_subreaper, _end_orphans

    levels = [int(x) for x in args.levels.split(",") if x]
    if args.smoke:
        args.owners, args.rounds, levels, args.runs = 2, 1, [1], 2
    _become_subreaper()  # a ClientApp or ServerApp process orphaned by its parent stays ours to end
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-flower-serve-") as tmp:
        workdir = Path(tmp)
        with FlowerDeployment(args.owners, args.rounds, workdir, database=not args.memory) as deployment:
            t0 = time.perf_counter()
            deployment.wait_connected()
            up_s = time.perf_counter() - t0
            warm = timed_run(deployment, workdir / "warm-up.json")
            if warm["status"] != "completed":
                print(f"the warm-up run failed: {warm['error']}", file=sys.stderr)
                return 1
            floor = cli_floor(deployment)
            print(
                f"Flower deployment engine: 1 SuperLink ({'memory' if args.memory else 'SQLite'}), "
                f"{args.owners} SuperNodes online {up_s:.1f} s after start; warm-up run {warm['latency_s']:.2f} s; "
                f"flwr CLI alone (flwr ls) {floor:.2f} s; {os.cpu_count()} cores",
                flush=True,
            )
            for level in levels:
                row = run_level(deployment, workdir, level, args.runs) | {
                    "owners": args.owners,
                    "rounds": args.rounds,
                    "app": "flower_summarize",
                    "engine": "flower-deploy-served",
                    "superlink_state": "memory" if args.memory else "sqlite",
                    "flwr_cli_alone_s": round(floor, 3),
                    "cpus": os.cpu_count(),
                    "note": "one untimed warm-up run was submitted after the SuperNodes were online",
                }
                rows.append(row)
                written = row["result_written_p50_s"]
                print(
                    f"{level:>3} submitters x {args.runs} runs ({args.owners} owners, {args.rounds} round(s)): "
                    f"p50 {row['p50_s']:.3f} s  p95 {row['p95_s']:.3f} s  p99 {row['p99_s']:.3f} s  "
                    f"{row['runs_per_min']:.1f} runs/min  "
                    f"result written p50 {'n/a' if written is None else f'{written:.3f} s'}  "
                    f"owners' CPU {row['owner_cpu_s_per_run']:.3f} s/run  "
                    f"SuperLink CPU {row['superlink_cpu_s_per_run']:.3f} s/run  "
                    f"completed {row['completed']}/{row['runs']}",
                    flush=True,
                )
    _end_orphans()
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["completed"] == r["runs"] and r["selections_identical"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
