"""Timings of h2, the curator's private mean embedding (median of repeats, time.perf_counter).

Run: python benchmarks/bench_h2.py [--secure]
* the first release of a round: h2 on q = 150 seed points, d = 140, T_init = 1656 (target < 100 ms),
  both the whole release (scaling, quantization, MWEM) and MWEM alone on the coordinate sums;
* a warm-started round: T_sub = 5 iterations continuing from that state, on q = 151 points;
* D_v's release: m = 2,000 points, T = 1656 (quantization grows with m, MWEM does not);
* ``--secure``: the first release with OpenDP's samplers (secure mode), timed once.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from timing import median_seconds, report  # benchmarks/timing.py: a script's own folder is on sys.path

from marketplace.privacy.rng import make_rng
from marketplace.protocols.summarize import RandomFourierFeatures
from marketplace.protocols.summarize.h2 import MwemState, coordinate_sums, h2_release, mwem, quantize

D, T_INIT, T_SUB = 140, 1656, 5
EPS_V, EPS_SUB = 0.01, 0.01 / (5 * 200) ** 0.5  # the paper's eps_v and eps_{l>1} for p = 200


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secure", action="store_true", help="also time one release in secure mode (OpenDP)")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="one repeat of each timing: checks the script runs (the test suite's smoke run); its figures mean nothing",
    )
    args = parser.parse_args(argv)
    n = (lambda repeats: 1) if args.smoke else (lambda repeats: repeats)

    data = np.random.default_rng(0)
    h1 = RandomFourierFeatures.draw(dim=20, n_features=D, gamma=0.1, seed=0)
    seed_set = h1.transform(data.normal(-0.5, 1.0, size=(150, 20)))
    one_more = np.vstack([seed_set, h1.transform(data.normal(0.5, 1.0, size=(1, 20)))])
    validation = h1.transform(data.normal(0.5, 1.0, size=(2000, 20)))
    rng = make_rng(seed=1, secure=False)

    report(
        f"h2_release q=150 d={D} T={T_INIT} (quantize + MWEM)",
        median_seconds(lambda: h2_release(seed_set, T=T_INIT, eps=EPS_V, rng=rng), n(15)),
        n(15),
    )

    bound = (2 / D) ** 0.5
    sums = coordinate_sums(quantize(seed_set / bound, 1 / D, rng), 1 / D)
    uniform = MwemState.uniform(D)
    report(
        f"mwem alone q=150 d={D} T={T_INIT}",
        median_seconds(lambda: mwem(uniform, sums, q=150, T=T_INIT, eps=EPS_V, rng=rng), n(15)),
        n(15),
    )

    state, _ = h2_release(seed_set, T=T_INIT, eps=EPS_V, rng=rng)
    report(
        f"h2_release warm start q=151 d={D} T_sub={T_SUB}",
        median_seconds(lambda: h2_release(one_more, state=state, T=T_SUB, eps=EPS_SUB, rng=rng), n(200)),
        n(200),
    )

    report(
        f"h2_release m=2,000 d={D} T={T_INIT} (D_v)",
        median_seconds(lambda: h2_release(validation, T=T_INIT, eps=EPS_V, rng=rng), n(7)),
        n(7),
    )

    if args.secure:
        start = time.perf_counter()
        h2_release(seed_set, T=T_INIT, eps=EPS_V, rng=make_rng(seed=None, secure=True), secure=True)
        report(f"h2_release secure (OpenDP) q=150 d={D} T={T_INIT}", time.perf_counter() - start, 1)


if __name__ == "__main__":
    main()
