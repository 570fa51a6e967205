"""Decoding and validating frames: the codec against its own precise path, and against another checkout.

Run: python benchmarks/bench_codec.py [--baseline PATH] [--json FILE] [--smoke]

For each frame (a bid; a round_open with d = 140; a point with dim = 20; a validation_set of
500 x 20; a large validation_set of 100,000 x 20, 16 MB) it times, per call:

* ``decode``: what every party runs on every frame it receives (the fast path: msgspec's typed
  decoding into the kind's Struct, plus the array checks);
* ``precise``: the precise path alone (plain msgpack and the schema, field by field), which decode
  falls back to only for a frame it refuses, to name the field;
* ``encode``.

``--baseline PATH`` also times ``decode`` and ``encode`` of the *same frames* with the
``marketplace`` package found at PATH (for instance a checkout of an earlier version), in a
subprocess of this run, so both figures come from one run on one machine; the table then shows
the speed-up. Only the public API is used there (``encode``, ``decode``, ``Envelope``, the kinds).

Each figure is the median over repeats of the mean time of a batch of calls (``time.perf_counter``).
``--smoke`` runs every step with tiny batches in a few seconds (the test suite does, so the script
cannot rot); its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def frames(large_rows: int) -> dict[str, bytes]:
    """One frame per case, built with the imported package's public API (seed 0)."""
    from marketplace.messages import PROTOCOL_VERSION, Envelope, encode
    from marketplace.protocols.summarize.messages import Bid, Point, RoundOpen, ValidationSet

    rng = np.random.default_rng(0)

    def frame(sender: str, receiver: str, body: Any) -> bytes:
        return encode(Envelope(PROTOCOL_VERSION, "bench-run", 7, sender, receiver, body.KIND, None, body))

    return {
        "bid": frame("owner-1", "curator", Bid(round=12, value=0.4375, available=True)),
        "round_open (d=140)": frame("curator", "owner-1", RoundOpen(round=12, summary_mean=rng.normal(size=140), q=11)),
        "point (dim=20)": frame("owner-1", "curator", Point(round=12, x=rng.normal(size=20), y=1, row=4321)),
        "validation_set (500x20)": frame("consumer", "curator", ValidationSet(X=rng.normal(size=(500, 20)))),
        f"validation_set ({large_rows}x20)": frame(
            "consumer", "curator", ValidationSet(X=rng.normal(size=(large_rows, 20)))
        ),
    }


def per_call(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the mean seconds per call of a batch of ``calls`` (one warm-up)."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) / calls)
    return statistics.median(samples)


def calls_for(frame: bytes, budget: int) -> int:
    """Calls per batch: about ``budget`` bytes decoded per batch, at least 3 calls."""
    return max(3, min(20_000, budget // max(len(frame), 1)))


def measure(large_rows: int, budget: int, repeats: int, *, precise: bool) -> dict[str, dict[str, float]]:
    """Seconds per call of decode, encode (and the precise path, if this package has one) per frame."""
    from marketplace.messages import decode, encode

    out: dict[str, dict[str, float]] = {}
    for name, frame in frames(large_rows).items():
        sender = decode(frame).sender
        message = decode(frame, peer=sender)
        calls = calls_for(frame, budget)
        row = {
            "bytes": len(frame),
            "decode_s": per_call(lambda: decode(frame, peer=sender), calls, repeats),  # noqa: B023
            "encode_s": per_call(lambda: encode(message), calls, repeats),  # noqa: B023
        }
        if precise:
            from marketplace.messages.codec import decode_fast, decode_precise

            if decode_fast(frame, sender) is None:
                raise SystemExit(f"bench_codec: the fast path refused the valid {name} frame")
            row["precise_s"] = per_call(lambda: decode_precise(frame, peer=sender), max(3, calls // 8), repeats)  # noqa: B023
        out[name] = row
    return out


def baseline(path: Path, args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """:func:`measure` run by the ``marketplace`` package at ``path``, in a subprocess."""
    env = {**os.environ, "PYTHONPATH": str(path.resolve())}
    command = [
        sys.executable,
        __file__,
        "--worker",
        "--large-rows",
        str(args.large_rows),
        "--budget",
        str(args.budget),
        "--repeats",
        str(args.repeats),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_codec: the baseline at {path} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-3 else f"{seconds * 1e3:.2f} ms"


def table(ours: dict[str, dict[str, float]], base: dict[str, dict[str, float]] | None) -> str:
    head = f"{'frame':<28}{'bytes':>10}{'decode':>12}{'precise':>12}{'encode':>12}"
    if base is not None:
        head += f"{'baseline decode':>18}{'speed-up':>10}{'baseline encode':>18}"
    lines = [head]
    for name, row in ours.items():
        times = (fmt(row["decode_s"]), fmt(row.get("precise_s")), fmt(row["encode_s"]))
        line = f"{name:<28}{row['bytes']:>10}" + "".join(f"{t:>12}" for t in times)
        if base is not None:
            b = base[name]
            line += f"{fmt(b['decode_s']):>18}{b['decode_s'] / row['decode_s']:>9.1f}x{fmt(b['encode_s']):>18}"
        lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, help="a folder holding another version's marketplace package")
    parser.add_argument("--json", type=Path, help="also write every figure to this file")
    parser.add_argument("--large-rows", type=int, default=100_000, help="rows of the large validation_set (20 columns)")
    parser.add_argument("--budget", type=int, default=4_000_000, help="bytes decoded per timed batch")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="tiny batches, a few seconds; the figures mean nothing")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # the baseline's subprocess
    args = parser.parse_args(argv)
    if args.smoke:
        args.large_rows, args.budget, args.repeats = 2_000, 20_000, 2
    if args.worker:
        print(json.dumps(measure(args.large_rows, args.budget, args.repeats, precise=False)))
        return
    base = baseline(args.baseline, args) if args.baseline else None
    ours = measure(args.large_rows, args.budget, args.repeats, precise=True)
    print(table(ours, base))
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "ours": ours,
                    "baseline": base,
                    "baseline_path": str(args.baseline) if args.baseline else None,
                    "smoke": args.smoke,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
