"""The cost table of the composed private auction against the two-sided one (docs/experiments.md).

``--collect RUNS``: read every run's report.json under RUNS/{composed,two_sided}/runs/ (written by
summarize_auction_composed.sh) and write docs/results/summarize-auction-composed-runs.csv, one row
per run. Without it, read that CSV. Prints, per (K, eps_auc) and rule, the curator's parsimony
(rho = points seen / (|D_s| + |D_v|), owners asked per round), MMD² and accuracy as mean ± standard
error over the seeds, and the paired difference against the two-sided rule on the same seeds."""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
CSV = HERE / "summarize-auction-composed-runs.csv"
RULES = ("two_sided", "composed")
FIELDS = (
    "rule",
    "owners",
    "eps_auction",
    "seed",
    "rounds",
    "points_seen",
    "rho",
    "asked_per_round",
    "mmd2",
    "accuracy",
)
COLUMNS = (("rho", ".2f"), ("asked_per_round", ".2f"), ("mmd2", ".4f"), ("accuracy", ".3f"))


def collect(root: Path) -> None:
    rows = []
    for rule in RULES:
        for path in sorted((root / rule / "runs").glob("*/report.json")):
            report = json.loads(path.read_text())
            config, metrics = report["config"], report["metrics"]
            rows.append(
                {
                    "rule": rule,
                    "owners": config["parties"]["owners"],
                    "eps_auction": config["summarize"]["privacy"]["eps_auction"],
                    "seed": config["seed"],
                    "rounds": len(report["selection"]),
                    "points_seen": report["parsimony"]["points_seen"],
                    "rho": report["parsimony"]["rho"],
                    "asked_per_round": report["auction"]["asked_per_round_mean"],
                    "mmd2": metrics["mmd2"],
                    "accuracy": metrics["accuracy"],
                }
            )
    with open(CSV, "w", newline="") as f:
        writer = csv.DictWriter(f, FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def mean_se(values: list[float], spec: str) -> str:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):{spec}} ± {se:{spec.lstrip('+')}}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--collect", type=Path, help="the runs folder of summarize_auction_composed.sh")
    args = parser.parse_args()
    if args.collect:
        collect(args.collect)
    runs: dict[tuple[int, float, str], dict[int, dict[str, str]]] = defaultdict(dict)
    for row in csv.DictReader(open(CSV)):
        runs[(int(row["owners"]), float(row["eps_auction"]), row["rule"])][int(row["seed"])] = row
    print(
        "| K | eps_auc | auction | seeds | rho | asked per round | MMD² | accuracy | ΔMMD² vs two-sided (paired) | "
        "Δaccuracy |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, eps, rule in sorted(runs, key=lambda key: (key[0], key[1], RULES.index(key[2]))):
        rows = runs[(k, eps, rule)]
        cells = [mean_se([float(r[c]) for r in rows.values()], spec) for c, spec in COLUMNS]
        base = runs.get((k, eps, "two_sided"), {})
        seeds = sorted(set(rows) & set(base))
        if rule == "two_sided" or not seeds:
            diffs = ["-", "-"]
        else:
            diffs = [
                mean_se([float(rows[s][c]) - float(base[s][c]) for s in seeds], spec)
                for c, spec in (("mmd2", "+.4f"), ("accuracy", "+.3f"))
            ]
        print(f"| {k} | {eps:g} | {rule.replace('_', '-')} | {len(rows)} | " + " | ".join(cells + diffs) + " |")


if __name__ == "__main__":
    main()
