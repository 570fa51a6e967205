"""Timings of the hot paths of the `summarize` core (median of repeats, time.perf_counter).

Run: python benchmarks/bench_summarize_core.py
* best_offer on 10k x 140 features (done by every owner every round),
* h1.transform of 10k points of dimension 20 into 140 features (once per owner),
* exact_kernel_greedy with N = 40,000 pool points, m = 500 targets, p = 200 (the upper baseline).
"""

from __future__ import annotations


import numpy as np

from marketplace.protocols.summarize import RandomFourierFeatures, best_offer, exact_kernel_greedy
from timing import median_seconds, report  # benchmarks/timing.py: a script's own folder is on sys.path


def main() -> None:
    rng = np.random.default_rng(0)
    h1 = RandomFourierFeatures.draw(dim=20, n_features=140, gamma=0.1, seed=0)
    X = rng.normal(size=(10_000, 20))

    report("h1.transform 10,000 x 20 -> 10,000 x 140", median_seconds(lambda: h1.transform(X), 20), 20)

    features = h1.transform(X)
    direction = h1.transform(rng.normal(0.5, size=(500, 20))).mean(axis=0)
    available = rng.random(10_000) < 0.9
    report("best_offer 10,000 x 140 (90% available)", median_seconds(
        lambda: best_offer(features, direction, available), 200), 200)

    pool = rng.normal(size=(40_000, 20))
    target = rng.normal(0.5, size=(500, 20))
    seed = rng.normal(-0.5, size=(150, 20))
    report("exact_kernel_greedy N=40,000 m=500 seed=150 p=200 dim=20", median_seconds(
        lambda: exact_kernel_greedy(pool, target, seed, 200, 0.1), 3), 3)


if __name__ == "__main__":
    main()
