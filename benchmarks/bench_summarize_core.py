"""Timings of the hot paths of the `summarize` core (median of repeats, time.perf_counter).

Run: python benchmarks/bench_summarize_core.py
* best_offer on 10k x 140 features (done by every owner every round),
* h1.transform of 10k points of dimension 20 into 140 features (once per owner),
* exact_kernel_greedy with N = 40,000 pool points, m = 500 targets, p = 200 (the upper baseline).
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import median_seconds, report  # benchmarks/timing.py: a script's own folder is on sys.path

from marketplace.protocols.summarize import RandomFourierFeatures, best_offer, exact_kernel_greedy


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, one repeat: checks the script runs (the test suite's smoke run); its figures mean nothing",
    )
    args = parser.parse_args(argv)
    scale, n = (10, lambda repeats: 1) if args.smoke else (1, lambda repeats: repeats)
    rows, pool_rows, targets, rounds = 10_000 // scale, 40_000 // scale, 500 // scale, 200 // scale
    rng = np.random.default_rng(0)
    h1 = RandomFourierFeatures.draw(dim=20, n_features=140, gamma=0.1, seed=0)
    X = rng.normal(size=(rows, 20))

    report(f"h1.transform {rows:,} x 20 -> {rows:,} x 140", median_seconds(lambda: h1.transform(X), n(20)), n(20))

    features = h1.transform(X)
    direction = h1.transform(rng.normal(0.5, size=(targets, 20))).mean(axis=0)
    available = rng.random(rows) < 0.9
    report(
        f"best_offer {rows:,} x 140 (90% available)",
        median_seconds(lambda: best_offer(features, direction, available), n(200)),
        n(200),
    )

    pool = rng.normal(size=(pool_rows, 20))
    target = rng.normal(0.5, size=(targets, 20))
    seed = rng.normal(-0.5, size=(150, 20))
    report(
        f"exact_kernel_greedy N={pool_rows:,} m={targets} seed=150 p={rounds} dim=20",
        median_seconds(lambda: exact_kernel_greedy(pool, target, seed, rounds, 0.1), n(3)),
        n(3),
    )


if __name__ == "__main__":
    main()
