"""An owner's bid on a large share against a bare numpy matrix-vector product.

Run: python benchmarks/bench_owner_bid.py [--rows 1000000] [--features 140] [--repeats 15]

The target: the bid of an owner with 1M x 140 float32 features within 1.5x of the bare
matvec ``features @ direction`` (the floor any bid must pay). What a round costs an owner with
``summarize.owner_features: float32`` is measured in full: ``best_offer`` (float32 matvec, the
unsent-row mask, argmax) plus the float64 recomputation of the chosen row's h1 and bid, which is
what the owner sends. The float64 figures show what the default storage costs.
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import median_seconds, report  # benchmarks/timing.py: a script's own folder is on sys.path

from marketplace.protocols.summarize import RandomFourierFeatures, best_offer, bid_value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--features", type=int, default=140)
    parser.add_argument("--dim", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()

    from threadpoolctl import threadpool_limits

    rng = np.random.default_rng(0)
    h1 = RandomFourierFeatures.draw(dim=args.dim, n_features=args.features, gamma=0.1, seed=0)
    X = rng.normal(size=(args.rows, args.dim))
    phi64 = h1.transform(X)
    phi32 = phi64.astype(np.float32)
    direction = h1.transform(rng.normal(0.5, size=(500, args.dim))).mean(axis=0)
    direction32 = direction.astype(np.float32)
    available = rng.random(args.rows) < 0.9
    n, r = f"{args.rows:,} x {args.features}", args.repeats

    def owner_round_float32():
        row, _ = best_offer(phi32, direction, available)
        return bid_value(h1.transform(X[row][None, :])[0], direction)

    with threadpool_limits(limits=1, user_api="blas"):  # what a party process runs with
        bare32 = median_seconds(lambda: phi32 @ direction32, r)
        report(f"bare matvec float32 {n}", bare32, r)
        bid32 = median_seconds(owner_round_float32, r)
        report(f"owner bid float32 {n} (best_offer + float64 recheck)", bid32, r)
        bare64 = median_seconds(lambda: phi64 @ direction, r)
        report(f"bare matvec float64 {n}", bare64, r)
        bid64 = median_seconds(lambda: best_offer(phi64, direction, available), r)
        report(f"owner bid float64 {n} (best_offer)", bid64, r)
    print(f"ratio owner bid / bare matvec: float32 {bid32 / bare32:.2f} (target <= 1.5), float64 {bid64 / bare64:.2f}")
    print(
        f"float32 bid vs float64 bid: {bid32 / bid64:.2f}x the time, half the memory "
        f"({phi32.nbytes / 2**20:.0f} MiB vs {phi64.nbytes / 2**20:.0f} MiB)"
    )


if __name__ == "__main__":
    main()
