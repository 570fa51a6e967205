"""Parsimony of the private auction against the paper's O(K^(1/3) |D_s| + |D_v|) bound.

    python benchmarks/bench_parsimony.py                                    # K = 4, 16, 64; tau = 5; 3 seeds
    python benchmarks/bench_parsimony.py --owners 4,8,16,32,64,128,256,512,1000 --seeds 1-5 --tau grow --csv runs.csv

For each K and seed, the private quickstart (``scenarios/quickstart-private.yaml``: a covariate-shift
mixture of 15,000 rows, dim 10, the paper's release budgets, eps_auc = 0.1) with an **even**
partition (every owner holds the same share of every component, so K changes only how the same
rows are split) and ``--rounds`` rounds runs in-process (the selection and the metrics do not depend
on the driver). The auction is the two-sided one (``--auction``'s default here; the scenario's default is the composed
auction): one request per round, plus every owner due under the tau rule.

``--tau`` is a fixed integer, or ``grow``: tau = ceil(K^(2/3)). Why that growth: with one request
per round, the owners' points the curator sees over p rounds are p (the requests) plus the tau
requests, at most floor(p / tau) per owner, so at most p + K p / tau. The paper's bound asks for
O(K^(1/3)) owner points per summary point, i.e. K / tau = O(K^(1/3)): tau must grow as K^(2/3).
With tau = ceil(K^(2/3)) the owner points per summary point are at most 1 + K^(1/3).

Reported per run (and written with ``--csv``): rho = points seen / (|D_s| + |D_v|) (the report's
``parsimony.rho``), the owners' points per summary point (points seen from owners / |D_s|, what
K^(1/3) bounds), both over K^(1/3), MMD^2 and accuracy of the summary, uniform sampling's MMD^2 and
accuracy on the same data, and the mean number of owners asked per round. The table shows medians
over seeds.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "scenarios" / "quickstart-private.yaml"
FIELDS = (
    "owners",
    "auction",
    "tau_rule",
    "tau",
    "seed",
    "status",
    "rounds",
    "summary_size",
    "validation_size",
    "points_seen",
    "owner_points",
    "owner_points_per_summary_point",
    "rho",
    "rho_over_k13",
    "owner_ratio_over_k13",
    "asked_per_round_mean",
    "mmd2",
    "accuracy",
    "uniform_mmd2",
    "uniform_accuracy",
    "rows_per_owner",
    "wall_s",
)


def tau_for(owners: int, rule: str) -> int:
    """The tau of a run: ``rule`` itself (an integer), or ceil(K^(2/3)) for ``grow`` (see the module doc)."""
    if rule == "grow":
        return max(1, math.ceil(owners ** (2 / 3) - 1e-9))
    return int(rule)


def scenario(owners: int, rounds: int, seed: int, tau: int, auction: str = "two_sided") -> dict[str, Any]:
    """The private quickstart, even partition, ``rounds`` rounds, the given K, seed, tau and auction."""
    raw = yaml.safe_load(BASE.read_text())
    raw["name"] = f"parsimony-k{owners}-tau{tau}"
    raw["seed"] = seed
    raw["parties"] = {"owners": owners}
    raw["data"]["partition"] = {"scheme": "even"}
    raw["summarize"]["rounds"] = rounds
    raw["summarize"]["baselines"] = ["uniform"]
    raw["summarize"]["privacy"]["tau"] = tau
    raw["summarize"]["privacy"]["auction"] = auction
    return raw


def run_one(owners: int, rounds: int, seed: int, rule: str, auction: str = "two_sided") -> dict[str, Any]:
    """One in-process run; the row of the CSV."""
    from marketplace.runner.run import run_scenario
    from marketplace.scenario import parse_scenario

    tau = tau_for(owners, rule)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        report = run_scenario(
            parse_scenario(scenario(owners, rounds, seed, tau, auction), source="bench_parsimony", base_dir=ROOT),
            Path(tmp) / "run",
            driver="inprocess",
        )
        wall = time.perf_counter() - start
    pars = report["parsimony"]
    summary, validation = pars["summary_size"], pars["validation_size"]
    owner_points = pars["points_seen"] - validation
    per_point = owner_points / summary if summary else float("nan")
    k13 = owners ** (1 / 3)
    uniform = report["metrics"]["baselines"].get("uniform") or {}
    rows = [part["rows"] for part in report["data"]["owners"]]
    return {
        "owners": owners,
        "auction": auction,
        "tau_rule": rule,
        "tau": tau,
        "seed": seed,
        "status": report["status"],
        "rounds": rounds,
        "summary_size": summary,
        "validation_size": validation,
        "points_seen": pars["points_seen"],
        "owner_points": owner_points,
        "owner_points_per_summary_point": per_point,
        "rho": pars["rho"],
        "rho_over_k13": pars["rho"] / k13,
        "owner_ratio_over_k13": per_point / k13,
        "asked_per_round_mean": (report.get("auction") or {}).get("asked_per_round_mean"),
        "mmd2": report["metrics"]["mmd2"],
        "accuracy": report["metrics"]["accuracy"],
        "uniform_mmd2": uniform.get("mmd2"),
        "uniform_accuracy": uniform.get("accuracy"),
        "rows_per_owner": statistics.median(rows),
        "wall_s": wall,
    }


def _seeds(text: str) -> list[int]:
    if "-" in text and "," not in text:
        lo, hi = (int(x) for x in text.split("-"))
        return list(range(lo, hi + 1))
    return [int(x) for x in text.split(",") if x]


def _tau_rule(text: str) -> str:
    if text == "grow" or (text.isdigit() and int(text) >= 1):
        return text
    raise argparse.ArgumentTypeError(f"expected an integer >= 1 or 'grow', got {text!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", default="4,16,64", help="comma-separated K values")
    parser.add_argument("--rounds", type=int, default=100, help="p, the summary size")
    parser.add_argument("--seeds", default="1-3", help="seeds: a range 1-5 or a list 1,2,3")
    parser.add_argument("--tau", type=_tau_rule, default="5", help="a fixed tau, or 'grow' for tau = ceil(K^(2/3))")
    parser.add_argument(
        "--auction",
        choices=("two_sided", "paper"),
        default="two_sided",
        help="the request schedule: two-sided, one request per round (default), or the paper's coins",
    )
    parser.add_argument("--csv", metavar="PATH", help="write every run here (appending if it exists)")
    args = parser.parse_args(argv)
    seeds = _seeds(args.seeds)
    auction = "two-sided auction, 1 request/round" if args.auction == "two_sided" else "the paper's auction"
    print(
        f"private summarize ({auction}, eps_auc 0.1), in-process, p = {args.rounds}, quickstart data, even "
        f"partition, tau {'= ceil(K^(2/3))' if args.tau == 'grow' else '= ' + args.tau}; median over seeds {seeds}"
    )
    print(
        f"{'K':>5} {'tau':>4} {'rho':>7} {'rho/K^(1/3)':>12} {'owner pts/pt':>13} {'/K^(1/3)':>9} {'asked/round':>12} "
        f"{'MMD2':>8} {'uniform':>8} {'accuracy':>9}"
    )
    writer = None
    handle = None
    if args.csv:
        path = Path(args.csv)
        new = not path.exists() or path.stat().st_size == 0
        handle = path.open("a", newline="")
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        if new:
            writer.writeheader()
    failed = False
    try:
        for k in (int(x) for x in args.owners.split(",") if x):
            runs = []
            for seed in seeds:
                run = run_one(k, args.rounds, seed, args.tau, args.auction)
                failed |= run["status"] != "completed"
                runs.append(run)
                if writer:
                    writer.writerow(run)
                    handle.flush()
            med = {
                f: statistics.median(r[f] for r in runs)
                for f in (
                    "rho",
                    "rho_over_k13",
                    "owner_points_per_summary_point",
                    "owner_ratio_over_k13",
                    "asked_per_round_mean",
                    "mmd2",
                    "uniform_mmd2",
                    "accuracy",
                )
            }
            print(
                f"{k:>5} {runs[0]['tau']:>4} {med['rho']:>7.2f} {med['rho_over_k13']:>12.3f} "
                f"{med['owner_points_per_summary_point']:>13.2f} {med['owner_ratio_over_k13']:>9.3f} "
                f"{med['asked_per_round_mean']:>12.2f} {med['mmd2']:>8.4f} {med['uniform_mmd2']:>8.4f} "
                f"{med['accuracy']:>9.3f}",
                flush=True,
            )
    finally:
        if handle:
            handle.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
