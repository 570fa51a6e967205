"""20 runs, each with one owner killed (SIGKILL) or stopped (SIGSTOP) at a random round.

    python benchmarks/bench_faults.py [--trials 20] [--seed 1] [--rounds 600] [--json faults.json]

Each trial is `marketplace run` (processes, forkserver) of a small scenario: 3 owners holding ~2,100
rows, `--rounds` rounds, heartbeat_interval_s 0.2 and heartbeat_timeout_s 2. When the curator's log
shows round r (r drawn uniformly in [5, rounds/2]), a randomly chosen owner gets the signal.

Reported per trial and overall:
* detection latency: from the signal (time.time() just before os.kill) to the timestamp of the
  curator's "owner X dropped out in round N" log line (millisecond resolution): min / median / max;
* protocol completed: the curator ran every round and the consumer scored the summary;
* runner status: report.json's status and the exit code of `marketplace run`;
* duplicates / losses: selection entries seen twice, rounds without a point, points the curator saw
  that are not in the selection (beyond D_v), points of the dropped owner accepted after its dropout
  round. All must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "runtime")]  # helpers, and test_faults

from conftest import tiny_raw  # noqa: E402
from process_probes import alive, pid_of  # noqa: E402
from test_faults import HEARTBEAT_TIMEOUT_S, descendants, dropout, kill_all, long_scenario, marketplace_run, wait_for  # noqa: E402


def trial(workdir: Path, rounds: int, owner: str, sig: signal.Signals, at_round: int) -> dict:
    workdir.mkdir(parents=True)
    out = workdir / "run"
    proc = marketplace_run(long_scenario(tiny_raw(), workdir, rounds=rounds), out)
    below: list[int] = []
    try:
        wait_for(out / "logs" / "curator.log", rf"round {at_round}/")
        pid = pid_of(out, owner)
        below = descendants(proc.pid)
        signalled_at = time.time()
        os.kill(pid, sig)
        detected_at, dropout_round = dropout(out / "logs" / "curator.log", owner)
        _, stderr = proc.communicate(timeout=300)
    finally:
        proc.kill()
        proc.wait()
        kill_all(below)
    report = json.loads((out / "report.json").read_text())
    curator = report["party_details"]["curator"]["result"]
    selection = [tuple(s) for s in report["selection"]]
    seen = report["parsimony"]["points_seen"] - report["parsimony"]["validation_size"]
    late = [r for r, (o, *_) in enumerate(selection, start=1) if o == owner and r > dropout_round]
    return {
        "signal": sig.name,
        "owner": owner,
        "at_round": at_round,
        "dropout_round": dropout_round,
        "latency_s": detected_at - signalled_at,
        "protocol_completed": curator["end_reason"] == "all rounds done"
        and len(selection) == rounds
        and (report["party_details"]["consumer"]["result"].get("metrics") or {}).get("mmd2") is not None,
        "status": report["status"],
        "exit_code": proc.returncode,
        "duplicates": len(selection) - len(set(selection)),
        "missing_rounds": rounds - len(set(selection)),
        "seen_not_selected": seen - len(set(selection)),
        "accepted_after_dropout": len(late),
        "orphans": [p for p in below if alive(p)],
        "failures": report["failures"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=600)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        for i in range(args.trials):
            sig = rng.choice((signal.SIGKILL, signal.SIGSTOP))
            owner = rng.choice(("owner-1", "owner-2", "owner-3"))
            at_round = rng.randint(5, args.rounds // 2)
            r = trial(Path(tmp) / f"t{i}", args.rounds, owner, sig, at_round)
            results.append(r)
            print(
                f"{i + 1:>2} {r['signal']:<7} {owner} at round {at_round:>3}: dropout in round "
                f"{r['dropout_round']:>3} after "
                f"{r['latency_s']:.2f} s; protocol {'completed' if r['protocol_completed'] else 'NOT completed'}; "
                f"status {r['status']} (exit {r['exit_code']}); dup {r['duplicates']} missing {r['missing_rounds']} "
                f"lost {r['seen_not_selected']} late {r['accepted_after_dropout']} orphans {len(r['orphans'])}",
                flush=True,
            )
    print()
    for name in ("SIGKILL", "SIGSTOP", None):
        group = [r for r in results if name is None or r["signal"] == name]
        if not group:
            continue
        lat = [r["latency_s"] for r in group]
        print(
            f"{name or 'all':<8} trials {len(group):>2}  detection latency min {min(lat):.2f} s  median "
            f"{statistics.median(lat):.2f} s  "
            f"max {max(lat):.2f} s (heartbeat_timeout_s {HEARTBEAT_TIMEOUT_S:g})  protocol completed "
            f"{sum(r['protocol_completed'] for r in group)}  "
            f"runner status completed {sum(r['status'] == 'completed' for r in group)}"
        )
    bad = sum(
        r["duplicates"] + r["missing_rounds"] + r["seen_not_selected"] + r["accepted_after_dropout"] for r in results
    )
    print(f"duplicates + losses over all trials: {bad}; orphans: {sum(len(r['orphans']) for r in results)}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0 if bad == 0 and all(r["protocol_completed"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
