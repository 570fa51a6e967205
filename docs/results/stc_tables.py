"""Markdown tables of the stc experiments (docs/experiments.md, stc section) from the sweeps that
docs/results/stc_run_all.sh writes under runs/stc-exp; copies each sweep's CSVs and plot into docs/.

Usage: python3 docs/results/stc_tables.py > /tmp/stc-tables.md
"""

import csv
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the project root
RUNS = ROOT / "runs" / "stc-exp"
DOCS = ROOT / "docs"
NAMES = {
    "syn1": "Synthetic 1 (two Gaussians)",
    "syn2": "Synthetic 2 (grid)",
    "syn3": "Synthetic 3 (random clusters)",
    "mnist17": "MNIST 1 -> 7",
    "mnist52": "MNIST 5 -> 2",
    "mnist96": "MNIST 9 -> 6",
}
DOMAINS = ("amazon", "webcam", "dslr")
QUARTILES = ("low", "middle-low", "middle-high", "high")
for s in range(3):
    for t in range(3):
        NAMES[f"office{s}{t}"] = f"Office-Caltech (SURF) {DOMAINS[s]} -> {DOMAINS[t]}"
NAMES["office01-googlenet"] = "Office-Caltech (GoogLeNet) amazon -> webcam"
for s in range(4):
    for t in range(4):
        NAMES[f"super{s}{t}"] = f"Superconductivity {QUARTILES[s]} -> {QUARTILES[t]}"


def ms(row, key, digits=4):
    m, s = row.get(f"{key}_mean"), row.get(f"{key}_sd")
    if m in (None, ""):
        return "-"
    out = f"{float(m):.{digits}f}"
    return out + (f" ± {float(s):.{digits}f}" if s not in (None, "") and float(s) > 0 else "")


def load(name):
    folder = RUNS / name
    if not (folder / "summary.csv").exists():
        return None
    shutil.copy(folder / "summary.csv", DOCS / "results" / f"stc-{name}-summary.csv")
    shutil.copy(folder / "runs.csv", DOCS / "results" / f"stc-{name}-runs.csv")
    rows = list(csv.DictReader(open(folder / "summary.csv")))
    replot(rows, DOCS / "figures" / f"stc-{name}-k.png", title=NAMES.get(name, name))
    return rows


def replot(rows, path, title):
    """Draw the sweep's plot again from its summary (with the current plot code)."""
    from marketplace.protocols.stc.sweeps import plot_sweep

    def value(text):
        if text in (None, ""):
            return None
        try:
            return float(text)
        except ValueError:
            return text

    keys = [k for k in ("stc.t", "stc.coreset", "stc.k", "stc.privacy.notion") if k in rows[0]][:2]
    plot_sweep([{k: value(v) for k, v in row.items()} for row in rows], keys, path, title=title)


def paired(name, key, by=("stc.k", "stc.privacy.notion")):
    """Per run: 1 - cost / ClusterT's cost of the same run (same T, projection and seed), grouped by
    the (k, notion) cell: mean, standard error, and the runs where the protocol is strictly cheaper."""
    runs = list(csv.DictReader(open(RUNS / name / "runs.csv")))
    cells = {}
    for r in runs:
        if r["status"] == "completed" and r.get(key) not in (None, ""):
            cells.setdefault(tuple(r[b] for b in by), []).append(
                (1 - float(r[key]) / float(r["cluster_t_cost"]), float(r[key]) < float(r["cluster_t_cost"]))
            )
    out = {}
    for cell, values in cells.items():
        gains = [g for g, _ in values]
        mean = sum(gains) / len(gains)
        se = (sum((g - mean) ** 2 for g in gains) / max(1, len(gains) - 1) / len(gains)) ** 0.5
        out[cell] = f"{100 * mean:+.1f}% ± {100 * se:.1f} ({sum(w for _, w in values)}/{len(values)})"
    return out


def cost_table(name, rows):
    kmeans = rows[0].get("private_kmeans_cost_mean") not in (None, "")
    gain = paired(name, "cost")
    kgain = paired(name, "private_kmeans_cost") if kmeans else {}
    room = paired(name, "nonprivate_stc_cost")
    print(f"\n**{NAMES.get(name, name)}** ({rows[0]['runs']} repeats)\n")
    print(
        "| k | privacy | protocol (NNA) | ClusterT | "
        + ("PrivateKmeans | " if kmeans else "")
        + "non-private STC | S alone | NNA vs ClusterT, paired (wins) |"
        + (" PrivateKmeans vs ClusterT |" if kmeans else "")
        + " non-private vs ClusterT |"
    )
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if kmeans else ""))
    for r in rows:
        cell = (r["stc.k"], r["stc.privacy.notion"])
        print(
            f"| {r['stc.k']} | {r['stc.privacy.notion']} | {ms(r, 'cost')} | {ms(r, 'cluster_t_cost')} | "
            + (f"{ms(r, 'private_kmeans_cost')} | " if kmeans else "")
            + f"{ms(r, 'nonprivate_stc_cost')} | {ms(r, 'source_only_cost')} | {gain.get(cell, '-')} |"
            + (f" {kgain.get(cell, '-')} |" if kmeans else "")
            + f" {room.get(cell, '-').split(' (')[0]} |"
        )


def keyed_table(name, key, label, rows):
    extra = [k for k in ("stc.k", "stc.privacy.notion") if k in rows[0]]
    gain = paired(name, "cost", by=(key, *extra))
    print(f"\n**{name}**: {label} ({rows[0]['runs']} repeats)\n")
    print(
        f"| {label} | "
        + " | ".join(k.rsplit(".", 1)[-1] for k in extra)
        + " | protocol | ClusterT | non-private STC | protocol vs ClusterT, paired (wins) | released centres | wall s |"
    )
    print("|---|" + "---|" * (len(extra) + 6))
    for r in rows:
        cell = tuple(r[k] for k in (key, *extra))
        print(
            f"| {r[key]} | " + " | ".join(r[k] for k in extra) + f" | {ms(r, 'cost')} | {ms(r, 'cluster_t_cost')} | "
            f"{ms(r, 'nonprivate_stc_cost')} | {gain.get(cell, '-')} | {ms(r, 'released_centers', 0)} | "
            f"{ms(r, 'wall_s', 2)} |"
        )


for name in NAMES:
    rows = load(name)
    if rows:
        cost_table(name, rows)
for name in ("nas-mnist96", "nas-office01", "nas-super32"):
    rows = load(name)
    if rows:
        keyed_table(name, "stc.t", "t", rows)
for name in ("coreset-syn2", "coreset-mnist96"):
    rows = load(name)
    if rows:
        keyed_table(name, "stc.coreset", "C", rows)


def compact(names, k="10"):
    """One row per (source, target) pair at one k: paired gains over ClusterT of every method."""
    print(f"\n**Every pair at k = {k}**: paired gain over ClusterT, mean ± se (runs where cheaper)\n")
    print("| pair | repeats | NNA, eps = 3 | NNA, rho = 3 | PrivateKmeans, eps = 3 | non-private STC |")
    print("|---|---|---|---|---|---|")
    for name in names:
        if not (RUNS / name / "runs.csv").exists():
            continue
        nna, pk, room = paired(name, "cost"), paired(name, "private_kmeans_cost"), paired(name, "nonprivate_stc_cost")
        runs = sum(
            1
            for r in csv.DictReader(open(RUNS / name / "runs.csv"))
            if r["stc.k"] == k and r["stc.privacy.notion"] == "dp"
        )
        print(
            f"| {NAMES[name]} | {runs} | {nna.get((k, 'dp'), '-')} | {nna.get((k, 'zcdp'), '-')} | "
            f"{pk.get((k, 'dp'), '-')} | "
            f"{room.get((k, 'dp'), '-').split(' (')[0]} |"
        )


compact([n for n in NAMES if (RUNS / n).exists()])
