"""Parsimony of the private auction against the paper's O(K^(1/3)) bound.

For K owners, run the private summarize protocol in-process (same data per K: a covariate-shift
mixture shared out evenly) and report rho = points the curator saw / (|D_s| + |D_v|), the raw
points requested per round, and rho / K^(1/3) (which stays bounded if the bound holds).

    python benchmarks/bench_parsimony.py [--owners 4,16,64] [--rounds 100] [--repeats 3] [--eps-auction 0.1 --tau 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from marketplace.runner.run import run_scenario
from marketplace.scenario import parse_scenario


def scenario(owners: int, rounds: int, seed: int, eps_auction: float, tau: int) -> dict:
    return {
        "name": f"parsimony-k{owners}", "protocol": "summarize", "seed": seed, "parties": {"owners": owners},
        "data": {"source": {"kind": "covariate_shift", "covariate_shift": {"dim": 10, "components": 8, "rows_per_component": 4000}},
                 "partition": {"scheme": "even"},
                 "consumer": {"target_groups": [0, 1], "validation_size": 200, "test_size": 200},
                 "seed_set": {"groups": [7], "size": 50}},
        "summarize": {"rounds": rounds, "features": 140, "baselines": [],
                      "privacy": {"enabled": True, "eps_auction": eps_auction, "tau": tau}},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", default="4,16,64")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--eps-auction", type=float, default=0.1)
    parser.add_argument("--tau", type=int, default=5)
    args = parser.parse_args()
    print(f"private summarize, in-process, p = {args.rounds}, eps_auc = {args.eps_auction}, tau = {args.tau}, "
          f"|D_v| = 200; median over {args.repeats} seeds")
    print(f"{'K':>4} {'rho':>8} {'points/round':>13} {'rho / K^(1/3)':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        for k in (int(x) for x in args.owners.split(",")):
            rhos, per_round = [], []
            for seed in range(args.repeats):
                raw = scenario(k, args.rounds, seed, args.eps_auction, args.tau)
                report = run_scenario(parse_scenario(raw, source="bench", base_dir=Path(tmp)), Path(tmp) / f"k{k}-{seed}", driver="inprocess")
                pars = report["parsimony"]
                rhos.append(pars["rho"])
                per_round.append((pars["points_seen"] - pars["validation_size"]) / pars["summary_size"])
            rho = statistics.median(rhos)
            print(f"{k:>4} {rho:>8.3f} {statistics.median(per_round):>13.2f} {rho / k ** (1 / 3):>14.3f}")


if __name__ == "__main__":
    main()
