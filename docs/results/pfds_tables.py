"""Markdown tables of the pfds experiments from the sweeps' summary.csv (used for the pfds section of
docs/experiments.md)."""

import csv
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the project root
OUT = ROOT / "runs" / "pfds-exp"
DOCS = ROOT / "docs"
M = ["np_agt", "dp_pred", "pfds_s", "pfds_minus", "pfds", "np_pred"]
L = {
    "pfds": "PFDS",
    "np_agt": "NP-Agt",
    "dp_pred": "DP-Pred",
    "pfds_s": "PFDS(s)",
    "pfds_minus": "PFDS^-",
    "np_pred": "NP-Pred",
}


def f(row, key):
    m, s = row.get(f"{key}_mean"), row.get(f"{key}_sd")
    if not m:
        return "-"
    return f"{float(m):.3f}" + (f" ± {float(s):.3f}" if s and float(s) > 0 else "")


def copy(name, out):
    d = OUT / name
    if not (d / "summary.csv").exists():
        return None
    shutil.copy(d / "summary.csv", DOCS / "results" / f"pfds-{out}-summary.csv")
    shutil.copy(d / "runs.csv", DOCS / "results" / f"pfds-{out}-runs.csv")
    if (d / "sweep.png").exists():
        shutil.copy(d / "sweep.png", DOCS / "figures" / f"pfds-{out}.png")
    return list(csv.DictReader(open(d / "summary.csv")))


for name in ("adult", "bank", "diabetes", "bike"):
    rows = copy(f"table2-{name}", f"table2-{name}")
    if not rows:
        print(f"\n({name}: not run)\n")
        continue
    print(f"\n{name}:\n")
    print("| model | eps | runs | " + " | ".join(L[m] for m in M) + " | PFDS (consumer) |")
    print("|---|---|---|" + "---|" * (len(M) + 1))
    for r in rows:
        print(
            f"| {r.get('pfds.model', 'linear')} | {r['pfds.epsilon']} | {r['completed']}/{r['runs']} | "
            + " | ".join(f(r, f"{m}_error") for m in M)
            + f" | {f(r, 'pfds_consumer_error')} |"
        )

rows = copy("fig4-adult", "fig4-adult")
if rows:
    print("\nfigure 4 (adult, logistic, eps = 1):\n")
    print("| sharers | " + " | ".join(L[m] for m in M) + " |")
    print("|---|" + "---|" * len(M))
    for r in rows:
        print(f"| {r['parties.owners']} | " + " | ".join(f(r, f"{m}_error") for m in M) + " |")

for name, what in (
    ("fig4-sharers-adult", "adult, logistic"),
    ("fig4-sharers-adult-svm", "adult, svm"),
    ("fig4-sharers-bike", "bike, linear regression"),
):
    rows = copy(name, name)
    if not rows:
        continue
    print(f"\nfigure 4, the paper's variant ({what}, eps = 1, 100 agents, n of them share):\n")
    print("| sharers | runs | " + " | ".join(L[m] for m in M) + " | PFDS (consumer) |")
    print("|---|---|" + "---|" * (len(M) + 1))
    for r in rows:
        print(
            f"| {r['pfds.sharers']} | {r['completed']}/{r['runs']} | "
            + " | ".join(f(r, f"{m}_error") for m in M)
            + f" | {f(r, 'pfds_consumer_error')} |"
        )

rows = copy("fidelity", "fidelity-adult")
if rows:
    print("\nfidelity (adult, eps = 1, 20 sharers):\n")
    print("| h_max | runs | PFDS mean abs size error (rows) | PFDS rel. | PFDS^- mean abs size error | PFDS^- rel. |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['pfds.h_max']} | {r['completed']}/{r['runs']} | {f(r, 'pfds_size_error')} | "
            f"{f(r, 'pfds_rel_size_error')} | "
            f"{f(r, 'pfds_minus_size_error')} | {f(r, 'pfds_minus_rel_size_error')} |"
        )

# The paper's protocol for one cell: 10 repeats of stratified 10-fold cross-validation (each seed
# its own split), averaged over all 100 runs; sd over runs, se = sd / sqrt(runs).
cv = OUT / "table2-diabetes-cv" / "runs.csv"
if cv.exists():
    shutil.copy(cv, DOCS / "results" / "pfds-table2-diabetes-cv-runs.csv")
    runs = [r for r in csv.DictReader(open(cv)) if r["status"] == "completed"]
    print("\ndiabetes, 10 x 10-fold cross-validation (eps = 1):\n")
    print("| model | runs | " + " | ".join(L[m] for m in M) + " | PFDS (consumer) |")
    print("|---|---|" + "---|" * (len(M) + 1))
    for model in sorted({r["pfds.model"] for r in runs}):
        rows = [r for r in runs if r["pfds.model"] == model]

        def agg(key):
            values = [float(r[key]) for r in rows if r.get(key)]  # noqa: B023
            if not values:
                return "-"
            mean = sum(values) / len(values)
            sd = (sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1)) ** 0.5
            return f"{mean:.3f} ± {sd / len(values) ** 0.5:.3f}"

        print(
            f"| {model} | {len(rows)} | "
            + " | ".join(agg(f"{m}_error") for m in M)
            + f" | {agg('pfds_consumer_error')} |"
        )
    print("\n(mean ± standard error over the runs)")
