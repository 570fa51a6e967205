"""The parsimony curve (docs/experiments.md, "The parsimony curve up to K = 1,000").

Reads docs/results/summarize-parsimony-tau-{5,grow}-runs.csv (written by
summarize_parsimony_curve.sh), prints the table (mean ± standard error over the seeds) and draws
docs/figures/summarize-parsimony-curve.png: the owners' points per summary point over K^(1/3), and
rho, against K, for both tau settings; MMD^2 against K with uniform sampling's.

    python3 docs/results/summarize_parsimony_curve.py
"""

from __future__ import annotations

import csv
import math
import statistics
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
FIGURE = HERE.parent / "figures" / "summarize-parsimony-curve.png"
SETTINGS = {"5": "tau = 5 (fixed)", "grow": "tau = ceil(K^(2/3))"}


def load() -> dict[str, dict[int, list[dict[str, float]]]]:
    runs: dict[str, dict[int, list[dict[str, float]]]] = {s: defaultdict(list) for s in SETTINGS}
    for setting in SETTINGS:
        for row in csv.DictReader(open(HERE / f"summarize-parsimony-tau-{setting}-runs.csv")):
            if row["status"] != "completed":
                raise SystemExit(f"tau {setting}, K = {row['owners']}, seed {row['seed']}: status {row['status']}")
            runs[setting][int(row["owners"])].append(
                {k: float(v) for k, v in row.items() if k not in ("auction", "tau_rule", "status")}
            )
    return runs


def mean_se(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), (statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else 0.0)


def cell(values: list[float], spec: str) -> str:
    m, se = mean_se(values)
    return f"{m:{spec}} ± {se:{spec}}"


def main() -> None:
    runs = load()
    print(
        "| K | tau | seeds | owner points per summary point | ÷ K^(1/3) | rho | rho ÷ K^(1/3) | MMD² | uniform MMD² | "
        "accuracy | uniform accuracy | rows per owner |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for setting in SETTINGS:
        for k in sorted(runs[setting]):
            rs = runs[setting][k]
            col = lambda name: [r[name] for r in rs]  # noqa: B023, E731
            print(
                f"| {k} | {int(rs[0]['tau'])} | {len(rs)} | {cell(col('owner_points_per_summary_point'), '.2f')} | "
                f"{cell(col('owner_ratio_over_k13'), '.3f')} | {cell(col('rho'), '.2f')} | "
                f"{cell(col('rho_over_k13'), '.3f')} | "
                f"{cell(col('mmd2'), '.4f')} | {cell(col('uniform_mmd2'), '.4f')} | {cell(col('accuracy'), '.3f')} | "
                f"{cell(col('uniform_accuracy'), '.3f')} | {statistics.median(col('rows_per_owner')):.0f} |"
            )

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    styles = {"5": ("tab:red", "o"), "grow": ("tab:blue", "s")}
    for setting, label in SETTINGS.items():
        ks = sorted(runs[setting])
        color, marker = styles[setting]
        for ax, name in ((axes[0], "owner_ratio_over_k13"), (axes[1], "rho"), (axes[2], "mmd2")):
            stats = [mean_se([r[name] for r in runs[setting][k]]) for k in ks]
            ax.errorbar(
                ks,
                [m for m, _ in stats],
                yerr=[se for _, se in stats],
                color=color,
                marker=marker,
                label=label,
                capsize=3,
            )
    ks = sorted(runs["grow"])
    axes[0].plot(
        ks,
        [(1 + k ** (1 / 3)) / k ** (1 / 3) for k in ks],
        "k--",
        lw=1,
        label="bound for tau = ceil(K^(2/3)): (1 + K^(1/3)) / K^(1/3)",
    )
    axes[1].plot(ks, [k ** (1 / 3) for k in ks], "k:", lw=1, label="K^(1/3)")
    uniform = [mean_se([r["uniform_mmd2"] for r in runs["grow"][k]])[0] for k in ks]
    axes[2].plot(ks, uniform, color="gray", marker="^", label="uniform sampling")
    axes[0].set_ylabel("owner points per summary point / K^(1/3)")
    axes[1].set_ylabel("rho = points seen / (|D_s| + |D_v|)")
    axes[2].set_ylabel("MMD² (summary vs D_v)")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("K (owners)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_yscale("log")
    axes[1].set_yscale("log")
    fig.suptitle(
        "Private summarize, two-sided auction (1 request/round, eps_auc = 0.1), p = 100, |D_v| = 200, "
        "quickstart data split evenly; mean ± s.e. over 10 seeds",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(FIGURE, dpi=110)
    print(f"\nwrote {FIGURE}")


if __name__ == "__main__":
    main()
