"""Summarize with thousands of owners under the in-process driver: wall time, per-round cost, memory.

    python benchmarks/bench_inprocess_scale.py                          # K = 1,000, 3,000, 10,000; p = 100
    python benchmarks/bench_inprocess_scale.py --owners 100,1000 --rounds 20 --private --json scale.json

Every K runs in a fresh Python process (so its peak RSS is its own) calling
``marketplace.runner.run.run_scenario(..., driver="inprocess")`` on a covariate_shift world of
``--rows-per-owner`` rows per owner (dim 10, 6 components, even partition, d = 140, |D_v| = 200,
no baselines). The in-process driver moves the same encoded frames as the ZeroMQ driver, so what
it measures is the protocol's own cost: every owner's bid, every frame's encoding and decoding, and
the curator's handling of K bids per round.

Reported per K: ``timing.wall_s`` of the report (building every role, the rounds, the consumer's
evaluation), the rounds phase alone (from the curator's "round 1/P done" to "round P/P done" log
records), ms per round and microseconds per owner per round (flat in K when a round is O(K)), CPU
seconds, the peak RSS of the process (``ru_maxrss``: the world, K roles and the report) and the
number of messages. With ``--private`` the curator runs the private auction (the default
two-sided schedule).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CURATOR_LOGGER = "marketplace.protocols.summarize.curator"
VALIDATION, TEST, SEED_SET, COMPONENTS = 200, 500, 50, 6


def scenario_raw(owners: int, rows_per_owner: int, rounds: int, seed: int, private: bool) -> dict[str, Any]:
    """A world of about ``owners * rows_per_owner`` owner rows: components 0 and 1 are the target
    (they also hold the consumer's D_v and test set), 4 and 5 give the seed set."""
    rows_per_component = max(2500, -(-(owners * rows_per_owner + VALIDATION + TEST + SEED_SET) // (COMPONENTS - 2)))
    return {
        "name": f"inprocess-scale-k{owners}",
        "protocol": "summarize",
        "seed": seed,
        "parties": {"owners": owners},
        "data": {
            "source": {
                "kind": "covariate_shift",
                "covariate_shift": {"dim": 10, "components": COMPONENTS, "rows_per_component": rows_per_component},
            },
            "partition": {"scheme": "even"},
            "consumer": {"target_groups": [0, 1], "validation_size": VALIDATION, "test_size": TEST},
            "seed_set": {"groups": [4, 5], "size": SEED_SET},
        },
        "summarize": {"rounds": rounds, "features": 140, "baselines": [], "privacy": {"enabled": private}},
    }


class _RoundClock(logging.Handler):
    """perf_counter of each "round N/P done" record of the curator."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.times: list[float] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("round "):
            self.times.append(time.perf_counter())


def run_one(owners: int, rows_per_owner: int, rounds: int, seed: int, private: bool) -> dict[str, Any]:
    """One run in this process; the figures of :func:`main`'s table."""
    from marketplace.runner.run import run_scenario
    from marketplace.scenario import parse_scenario

    clock = _RoundClock()
    logger = logging.getLogger(CURATOR_LOGGER)
    logger.setLevel(logging.INFO)
    logger.addHandler(clock)
    with tempfile.TemporaryDirectory() as tmp:
        scenario = parse_scenario(
            scenario_raw(owners, rows_per_owner, rounds, seed, private), source="bench", base_dir=Path(tmp)
        )
        cpu, start = time.process_time(), time.perf_counter()
        report = run_scenario(scenario, Path(tmp) / "run", driver="inprocess")
        total_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
    logger.removeHandler(clock)
    done = len(clock.times)
    rounds_s = clock.times[-1] - clock.times[0] if done >= 2 else None
    per_round_ms = rounds_s / (done - 1) * 1e3 if rounds_s is not None else None
    return {
        "owners": owners,
        "rounds": rounds,
        "rounds_done": len(report.get("selection") or ()),
        "status": report["status"],
        "private": private,
        "rows_per_owner": rows_per_owner,
        "wall_s": report["timing"]["wall_s"],
        "call_s": total_s,
        "cpu_s": cpu_s,
        "rounds_phase_s": rounds_s,
        "ms_per_round": per_round_ms,
        "us_per_owner_round": per_round_ms * 1e3 / owners if per_round_ms is not None else None,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "messages": report["messages"]["total"],
        "rho": (report.get("parsimony") or {}).get("rho"),
        "mmd2": report["metrics"].get("mmd2"),
    }


def _fresh_process(owners: int, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        __file__,
        "--one",
        str(owners),
        "--rows-per-owner",
        str(args.rows_per_owner),
        "--rounds",
        str(args.rounds),
        "--seed",
        str(args.seed),
    ] + (["--private"] if args.private else [])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if done.returncode != 0:
        raise RuntimeError(f"K = {owners}: the run's process exited {done.returncode}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", default="1000,3000,10000", help="comma-separated K values")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--rows-per-owner", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--private", action="store_true", help="private summarize (h2 releases, two-sided auction)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed for each K")
    parser.add_argument("--json", metavar="PATH", help="write every run's figures here")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # worker: run this K here, print JSON
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.rows_per_owner, args.rounds, args.seed, args.private)))
        return 0
    owners = [int(k) for k in args.owners.split(",") if k]
    print(
        f"summarize{' (private)' if args.private else ''}, in-process, p = {args.rounds}, {args.rows_per_owner} rows "
        f"per owner, dim 10, d = 140, even partition, seed {args.seed}; one fresh process per K"
    )
    print(
        f"{'K':>7} {'status':>10} {'wall s':>8} {'rounds s':>9} {'ms/round':>9} {'us/owner/round':>15} "
        f"{'CPU s':>7} {'peak RSS MB':>12} {'messages':>10}"
    )
    runs = []
    failed = False
    for k in owners:
        run = _fresh_process(k, args)
        runs.append(run)
        failed |= run["status"] != "completed"
        print(
            f"{k:>7} {run['status']:>10} {run['wall_s']:>8.1f} {_fmt(run['rounds_phase_s'], '9.1f')} "
            f"{_fmt(run['ms_per_round'], '9.1f')} {_fmt(run['us_per_owner_round'], '15.2f')} {run['cpu_s']:>7.1f} "
            f"{run['peak_rss_mb']:>12.0f} {run['messages']:>10}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "runs": runs}, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
