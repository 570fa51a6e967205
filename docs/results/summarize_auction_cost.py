"""The cost table of the two-sided private auction against the paper's (docs/experiments.md).

Reads docs/results/summarize-auction-cost-{paper,two-sided,two-sided-auto}-runs.csv (written by
summarize_auction_cost.sh) and prints, per (K, eps_auc) and auction, rho, MMD^2 and accuracy as
mean ± standard error over the seeds, and the paired difference against the paper's auction on the
same seeds (the seed fixes the data, so most of the spread is shared)."""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = {"paper": "paper", "two-sided": "two-sided, 1 request (default)", "two-sided-auto": "two-sided, m = auto"}
COLUMNS = (("rho", ".2f"), ("mmd2", ".4f"), ("accuracy", ".3f"))


def load() -> dict[tuple[int, float, str], dict[int, dict[str, str]]]:
    runs: dict[tuple[int, float, str], dict[int, dict[str, str]]] = defaultdict(dict)
    for variant in VARIANTS:
        for row in csv.DictReader(open(HERE / f"summarize-auction-cost-{variant}-runs.csv")):
            if row["status"] == "completed":
                key = (int(row["parties.owners"]), float(row["summarize.privacy.eps_auction"]), variant)
                runs[key][int(row["seed"])] = row
    return runs


def mean_se(values: list[float], spec: str) -> str:
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):{spec}} ± {se:{spec.lstrip('+')}}"


def main() -> None:
    runs = load()
    print("| K | eps_auc | auction | seeds | rho | MMD² | accuracy | ΔMMD² vs paper (paired) | Δaccuracy vs paper |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k, eps, variant in sorted(runs, key=lambda key: (key[0], key[1], list(VARIANTS).index(key[2]))):
        rows = runs[(k, eps, variant)]
        cells = [mean_se([float(r[c]) for r in rows.values()], spec) for c, spec in COLUMNS]
        paper = runs.get((k, eps, "paper"), {})
        seeds = sorted(set(rows) & set(paper))
        if variant == "paper" or not seeds:
            diffs = ["-", "-"]
        else:
            diffs = [
                mean_se([float(rows[s][c]) - float(paper[s][c]) for s in seeds], spec)
                for c, spec in (("mmd2", "+.4f"), ("accuracy", "+.3f"))
            ]
        print(f"| {k} | {eps:g} | {VARIANTS[variant]} | {len(rows)} | " + " | ".join(cells + diffs) + " |")
    uniform = defaultdict(list)
    for (k, _eps, variant), rows in runs.items():
        if variant == "paper":
            uniform[k] += [float(r["uniform_mmd2"]) for r in rows.values()]
    print(
        "\nuniform sampling, MMD²: "
        + ", ".join(f"K = {k}: {statistics.mean(v):.4f}" for k, v in sorted(uniform.items()))
    )


if __name__ == "__main__":
    main()
