"""Timings of the `sketch` core (M²M), and optionally its accuracy against the paper's Table 1.

Run: python benchmarks/bench_sketch.py [--rows 1000000,5000000] [--accuracy] [--trials 20]
* RFF sketching, d = 10, m = 200 (target >= 1M rows/s): ``RFF.sum_features`` in float32 (the
  default of ``private_sketch``) and float64, and the whole ``private_sketch`` (box check + noise);
* one M²M fit, n_s = 1e5, m = 200 (target < 2 s): ``fit_m2m`` (draw the synthetic points, their
  features and Gram matrix, Cholesky, weights), then the fit alone on a built design and a batch
  of queries;
* pycle's ``computeSketch`` on the same data when ``import pycle`` works (not a dependency: e.g.
  ``pip install --target /tmp/pycle pycle`` and ``PYTHONPATH=/tmp/pycle``);
* ``--accuracy``: mean relative error of the first moment on Random10 (uniform, n = 27,000,
  d = 10 on [0, 1]^10; RFF m = 200, sigma = 1; HIST 100 bins; n_s = 1e5), exact and eps = 1, for
  every lambda rule and with an intercept, plus the RFF noise-free floor against sigma and m.

BLAS runs on ``--blas-threads`` threads (default 1: on a shared 2-core machine more threads than
free cores make OpenBLAS much slower, not faster).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from threadpoolctl import threadpool_limits
from timing import median_seconds, report  # benchmarks/timing.py: a script's own folder is on sys.path

from marketplace.privacy.rng import make_rng
from marketplace.protocols.sketch import (
    REGULARIZATION_RULES,
    RFF,
    Box,
    Histogram,
    M2MDesign,
    exact_sketch,
    fit_m2m,
    private_sketch,
)

D, M, N_SAMPLES = 10, 200, 100_000


def rate(name: str, rows: int, seconds: float, repeats: int) -> None:
    print(f"{name:<62} {rows / seconds / 1e6:10.2f} M rows/s  ({seconds:.3f} s, median of {repeats})")


def bench_sketching(rows_list: list[int], repeats: int) -> None:
    box = Box.unit(D)
    rff = RFF.draw(box, n_features=M, sigma=1.0, seed=0)
    data = np.random.default_rng(0)
    for rows in rows_list:
        X = data.random((rows, D))
        rate(
            f"RFF.sum_features float32 n={rows:,} d={D} m={M}",
            rows,
            median_seconds(lambda: rff.sum_features(X, precision="float32"), repeats),  # noqa: B023
            repeats,
        )
        rate(
            f"RFF.sum_features float64 n={rows:,} d={D} m={M}",
            rows,
            median_seconds(lambda: rff.sum_features(X, precision="float64"), 1),  # noqa: B023
            1,
        )
        noise = make_rng(seed=1, secure=False)
        rate(
            f"private_sketch (check + float32 sums + Laplace) n={rows:,}",
            rows,
            median_seconds(lambda: private_sketch(X, rff, epsilon=1.0, rng=noise), repeats),  # noqa: B023
            repeats,
        )


def bench_pycle(rows: int) -> None:
    try:
        import pycle.sketching as pycle_sketching
    except ImportError:
        print("pycle: not importable, skipped (pip install --target DIR pycle; PYTHONPATH=DIR)")
        return
    rff = RFF.draw(Box.unit(D), n_features=M, sigma=1.0, seed=0)
    X = np.random.default_rng(0).random((rows, D))
    phi = pycle_sketching.SimpleFeatureMap("complexExponential", np.array(rff.frequencies))
    seconds = median_seconds(lambda: pycle_sketching.computeSketch(X, phi), 1)
    rate(f"pycle computeSketch complexExponential n={rows:,} (m'={M // 2})", rows, seconds, 1)
    ours = rff.sum_features(X) / rows
    theirs = pycle_sketching.computeSketch(X, phi)
    print(
        f"{'  max |ours - pycle| (mean features, float64)':<62} "
        f"{max(np.abs(ours[: M // 2] - theirs.real).max(), np.abs(ours[M // 2 :] - theirs.imag).max()):10.1e}"
    )


def bench_m2m(repeats: int, n_samples: int = N_SAMPLES) -> None:
    box = Box.unit(D)
    rff = RFF.draw(box, n_features=M, sigma=1.0, seed=0)
    X = np.random.default_rng(1).random((27_000, D))
    release = private_sketch(X, rff, epsilon=1.0, rng=make_rng(seed=2, secure=False))
    report(
        f"fit_m2m n_s={n_samples:,} m={M} (design + Cholesky + weights)",
        median_seconds(lambda: fit_m2m(rff, release, rng=make_rng(seed=3, secure=False), n_samples=n_samples), repeats),
        repeats,
    )
    design = M2MDesign.build(rff, rng=make_rng(seed=3, secure=False), n_samples=n_samples)
    report(
        f"M2MDesign.fit alone (lambda, Cholesky, weights) m={M}",
        median_seconds(lambda: design.fit(release), repeats * 5),
        repeats * 5,
    )
    fit = design.fit(release)
    points = np.linspace(0.1, 1.0, 10)
    report(
        "queries: moments 1+2, CDF at 10 points, covariance, 100 counts",
        median_seconds(
            lambda: (
                fit.moments(1),
                fit.moments(2),
                fit.cdf(points),
                fit.covariance(),
                fit.count(np.full((100, D), 0.2), np.full((100, D), 0.9)),
            ),
            repeats,
        ),
        repeats,
    )


def mre(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean(np.abs(estimate - truth) / truth))


def bench_accuracy(trials: int, n_samples: int = N_SAMPLES) -> None:
    """Table 1 of the paper (Random10), the same on data shifted away from the prior, both readings
    of lambda (and Theorem 1's), with and without an intercept; then the RFF noise-free floor."""
    box = Box.unit(D)
    data = np.random.default_rng(4)
    datasets = {
        "Random10 (uniform = the prior)": data.random((27_000, D)),
        "Beta(2, 5) (mean 0.29, prior's 0.5)": data.beta(2.0, 5.0, size=(27_000, D)),
    }
    maps = {
        "RFF m=200 sigma=1": RFF.draw(box, n_features=M, sigma=1.0, seed=5),
        "HIST 100 bins": Histogram(box, bins=100),
    }
    designs = {
        name: M2MDesign.build(fmap, rng=make_rng(seed=6, secure=False), n_samples=n_samples)
        for name, fmap in maps.items()
    }
    for title, X in datasets.items():
        truth = X.mean(axis=0)
        print(
            f"\nMRE of the first moment, {title}, n = 27,000, d = {D}, n_s = {n_samples:,}, "
            f"eps = 1 averaged over {trials} sketches"
        )
        print(f"{'map':<22} {'lambda rule':<11} {'intercept':<9} {'eps = inf':>10} {'eps = 1':>10}   lambda at eps = 1")
        for name, fmap in maps.items():
            design = designs[name]
            exact = exact_sketch(X, fmap)
            noise = make_rng(seed=7, secure=False)
            releases = [private_sketch(X, fmap, epsilon=1.0, rng=noise, precision="float64") for _ in range(trials)]
            for rule in REGULARIZATION_RULES:
                for intercept in (False, True):
                    floor = mre(design.fit(exact, regularization=rule, intercept=intercept).moments(1), truth)
                    fits = [design.fit(r, regularization=rule, intercept=intercept) for r in releases]
                    noisy = np.mean([mre(f.moments(1), truth) for f in fits])
                    print(f"{name:<22} {rule:<11} {intercept!s:<9} {floor:10.2e} {noisy:10.2e}   {fits[0].lam:.3g}")
    print("paper (Table 1, Random10): RFF 6.25e-8 (inf), 9.55e-3 (eps=1); HIST 1.87e-5 (inf), 9.10e-4 (eps=1)")
    X = datasets["Random10 (uniform = the prior)"]
    truth = X.mean(axis=0)

    print("\nRFF noise-free floor: |mean over D of the residual r = f - a.Phi| ~ sd(r)/sqrt(n)")
    print(f"{'sigma':>6} {'m':>6} {'sd(r) on the prior':>20} {'sd(r)/sqrt(n)/0.5':>18} {'MRE eps = inf':>14}")
    exact_rule = 0.0  # the floor 1e-9 * mean diagonal
    for sigma, m in ((1.0, 200), (2.0, 200), (4.0, 200), (4.0, 1000)):
        fmap = RFF.draw(box, n_features=m, sigma=sigma, seed=5)
        design = M2MDesign.build(fmap, rng=make_rng(seed=6, secure=False), n_samples=n_samples)
        fit = design.fit(exact_sketch(X, fmap), regularization=exact_rule)
        a, _ = fit.coefficients(lambda Z: Z)
        residual = design.features_times(a) - design.samples
        sd = float(residual.std(axis=0).mean())
        print(
            f"{sigma:6.1f} {m:6d} {sd:20.2e} {sd / math.sqrt(X.shape[0]) / 0.5:18.2e} "
            f"{mre(fit.moments(1), truth):14.2e}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1000000,2000000,5000000", help="comma-separated dataset sizes for sketching")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--accuracy", action="store_true", help="also measure the MRE of Table 1 (a few minutes)")
    parser.add_argument("--trials", type=int, default=20, help="private sketches per configuration with --accuracy")
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--samples", type=int, default=N_SAMPLES, help="n_s, M2M's synthetic points (the paper's 1e5)")
    args = parser.parse_args(argv)
    rows_list = [int(r) for r in args.rows.split(",") if r]

    with threadpool_limits(limits=args.blas_threads):
        start = time.perf_counter()
        bench_sketching(rows_list, args.repeats)
        bench_pycle(min(rows_list))
        bench_m2m(args.repeats, args.samples)
        if args.accuracy:
            bench_accuracy(args.trials, args.samples)
        print(f"\n(total {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
