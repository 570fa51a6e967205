"""Shared timing helpers of the micro-benchmarks: median of repeats after a warm-up, one print format."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of fn (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(name: str, seconds: float, repeats: int) -> None:
    unit, scale = ("ms", 1e3) if seconds >= 1e-3 else ("us", 1e6)
    print(f"{name:<62} {seconds * scale:10.2f} {unit}   (median of {repeats})")
