"""Timings of the stc core (median of repeats, time.perf_counter).

Run: python benchmarks/bench_stc.py [--blas-threads N] [--quick]
* NNA: 10,000 source x 10,000 target points, d = 8 (KD-tree partition, counts and sums, Laplace
  noise, threshold) -- target < 1 s;
* NAS: the same sizes, t = 150 (the paper's t), for comparison;
* the STC solver, k = 50 on 10,000 target points: d = 8 with NNA's released S' as free centres,
  ClusterT (no free centre) in d = 8, and on the paper's 2-D synthetic set 3 with the true S and
  without (ClusterT, the slowest case: many swaps) -- target < 10 s; and that last case with the
  swap candidates cut to a random 2,000 (``max_candidates``), to show what the option trades;
* the kd-tree coreset (C = 0.05) of 10,000 2-D target points.

BLAS runs with one thread by default, as in a party process (``runtime.party_process``): on two
cores the skinny products of the solver are much slower with two OpenBLAS threads when anything
else runs. ``--blas-threads 0`` leaves BLAS as it is. The solver rows also print the CPU time of
their last run, a steadier figure than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
from threadpoolctl import threadpool_limits
from timing import median_seconds, report  # benchmarks/timing.py: a script's own folder is on sys.path

from marketplace.privacy.rng import make_rng
from marketplace.protocols import stc

N_POINTS, D, K_CENTRES, T_NEIGHBOURS, EPS = 10_000, 8, 50, 150, 3.0


def blobs(rows: int, d: int, shift: float, seed: int) -> np.ndarray:
    """Gaussian blobs scaled into the ball of radius 1/2 (a public bound of 4 around the origin)."""
    data = np.random.default_rng(seed)
    centres = data.normal(shift, 1.0, size=(20, d))
    points = centres[data.integers(0, 20, size=rows)] + data.normal(0.0, 0.4, size=(rows, d))
    return stc.public_scaling(bound=4.0 * np.sqrt(d)).apply(points, clip=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blas-threads", type=int, default=1, help="BLAS threads (0: leave as is); default 1")
    parser.add_argument("--quick", action="store_true", help="one solver run per case, no NAS")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="1,000 points, k = 10, one run of each (implies --quick): "
        "checks the script runs (the test suite's smoke run)",
    )
    args = parser.parse_args(argv)
    args.quick = args.quick or args.smoke
    N, K = (1_000, 10) if args.smoke else (N_POINTS, K_CENTRES)
    r = (lambda repeats: 1) if args.smoke else (lambda repeats: repeats)
    limit = (
        threadpool_limits(limits=args.blas_threads, user_api="blas") if args.blas_threads else contextlib.nullcontext()
    )
    repeats = 1 if args.quick else 3
    with limit:
        S, T = blobs(N, D, 0.0, seed=1), blobs(N, D, 0.5, seed=2)
        rng = make_rng(seed=3, secure=False)

        report(
            f"nna_release {N:,} x {N:,} d={D} eps={EPS}",
            median_seconds(lambda: stc.nna_release(S, T, eps=EPS, rng=rng), r(5)),
            r(5),
        )
        if not args.quick:
            report(
                f"nas_release {N:,} x {N:,} d={D} t={T_NEIGHBOURS}",
                median_seconds(lambda: stc.nas_release(S, T, t=T_NEIGHBOURS, eps=EPS, rng=rng), r(3)),
                r(3),
            )
        report(
            f"private_kmeans {N:,} x d={D}, {min(100, N // 10)} clusters, 5 rounds (the PrivateKmeans baseline)",
            median_seconds(lambda: stc.private_kmeans(S, min(100, N // 10), eps=EPS, iterations=5, rng=rng), r(5)),
            r(5),
        )

        released = stc.nna_release(S, T, eps=EPS, rng=rng)
        bench_solver(
            f"solve_stc k={K} n={N:,} d={D}, S' from NNA ({released.centers.shape[0]:,} centres)",
            lambda: stc.solve_stc(T, released.centers, K),
            repeats,
        )
        bench_solver(f"cluster_t k={K} n={N:,} d={D} (no free centre)", lambda: stc.cluster_t(T, K), repeats)

        data = stc.synthetic_dataset(3, seed=0, n_source=N, n_target=N)
        scaling = stc.PublicScaling.for_box(*data.bounds)
        S2, T2 = scaling.apply(data.source, clip=True), scaling.apply(data.target, clip=True)
        bench_solver(
            f"nonprivate_stc k={K} n={N:,} d=2 (synthetic set 3)", lambda: stc.nonprivate_stc(S2, T2, K), repeats
        )
        bench_solver(f"cluster_t k={K} n={N:,} d=2 (synthetic set 3)", lambda: stc.cluster_t(T2, K), repeats)
        bench_solver(
            f"cluster_t k={K} n={N:,} d=2, max_candidates={min(2000, N // 5):,}",
            lambda: stc.cluster_t(T2, K, max_candidates=min(2000, N // 5), rng=make_rng(seed=4, secure=False)),
            repeats,
        )
        report(
            f"kdtree_coreset n={N:,} d=2 C={stc.DEFAULT_C}", median_seconds(lambda: stc.kdtree_coreset(T2), r(5)), r(5)
        )


def bench_solver(name: str, solve, repeats: int) -> None:
    """Report the median time of ``solve`` and what the search did on its last run."""
    last: list = []

    def run() -> None:
        cpu = time.process_time()
        last[:] = [solve(), time.process_time() - cpu]

    if repeats > 1:
        seconds = median_seconds(run, repeats)
    else:
        start = time.perf_counter()
        run()
        seconds = time.perf_counter() - start
    report(name, seconds, repeats)
    solution, cpu = last
    print(
        f"    cost {solution.cost:.5f} (greedy start {solution.greedy_cost:.5f}), {solution.swaps} swaps, "
        f"{solution.passes:.1f} passes over the candidates; last run {cpu:.2f} s of CPU"
    )


if __name__ == "__main__":
    main()
