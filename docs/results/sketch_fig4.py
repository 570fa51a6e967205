"""Figure 4 from the two occupancy sweeps' summary.csv files (RFF/HIST, and the paper's RACE map)."""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

main, race, out = sys.argv[1:4]
rows = [dict(r, kind=r["sketch.map.kind"]) for r in csv.DictReader(open(main))]
rows += [dict(r, kind="race (R=80, W=80, bw=0.1)") for r in csv.DictReader(open(race))]
fig, ax = plt.subplots(figsize=(6, 4.2))
for kind in dict.fromkeys(r["kind"] for r in rows):
    pts = sorted(
        (float(r["sketch.epsilon"]), float(r["logistic_auc_mean"]), float(r["logistic_auc_sd"]))
        for r in rows
        if r["kind"] == kind
    )
    x, m, s = zip(*pts)
    ax.errorbar(x, m, yerr=s, fmt="o-", capsize=3, label=f"implicit M²M, {kind}")
base = sorted(
    (
        float(r["sketch.epsilon"]),
        float(r["dp_erm_auc_mean"]),
        float(r["dp_erm_auc_sd"]),
        float(r["non_private_auc_mean"]),
    )
    for r in rows
    if r["kind"] == "rff"
)
x, m, s, npv = zip(*base)
ax.errorbar(x, m, yerr=s, fmt="s--", capsize=3, color="k", label="DP-ERM (objective perturbation, λ=1e-3)")
ax.plot(x, npv, "k:", label="non-private logistic regression")
ax.set_xscale("log")
ax.set_xlabel("eps per owner")
ax.set_ylabel("AUC on the consumer's test set")
ax.set_title("Figure 4: occupancy, logistic regression from sketches")
ax.grid(alpha=0.3)
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out, dpi=120)
