"""What an owner's lifetime ledger costs per release: reserve + commit, each a durable SQLite
transaction (write-ahead log, synchronous=FULL), as the ledger grows.

    python benchmarks/bench_ledger.py                    # 5,000 requests, the cost at each thousand
    python benchmarks/bench_ledger.py --requests 200 --every 100 --json ledger.json
    python benchmarks/bench_ledger.py --smoke

Each request is one ``reserve(..., fresh=True)`` and one ``commit`` of a pure-DP cost on a ledger
in a fresh temporary folder (on the file system of ``--folder``, default the system's temporary
folder: the figure depends on how fast that disk makes a write durable). Prints, for each block of
``--every`` requests, the median and 90th percentile of the time per request.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from marketplace.privacy.lifetime import Cost, LifetimeLedger, ledger_file  # noqa: E402


def measure(requests: int, every: int, folder: str | None) -> list[dict[str, float]]:
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        ledger = LifetimeLedger.open(
            ledger_file(tmp, "owner-1"),
            owner="owner-1",
            budget=(1e9, 0.0),
            relation="add/remove-one (a row of owner-1's data)",
        )
        times = []
        for n in range(requests):
            t0 = time.perf_counter()
            ledger.reserve(f"req-{n}", Cost.pure(0.001), consumer=f"consumer-{n % 3}", what="bench", fresh=True)
            ledger.commit(f"req-{n}")
            times.append(time.perf_counter() - t0)
        ledger.close()
    blocks = []
    for start in range(0, requests, every):
        block = sorted(times[start : start + every])
        blocks.append(
            {
                "rows_before": start,
                "requests": len(block),
                "median_ms": 1e3 * statistics.median(block),
                "p90_ms": 1e3 * block[min(len(block) - 1, int(0.9 * len(block)))],
            }
        )
    return blocks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--every", type=int, default=1000)
    parser.add_argument("--folder", help="where the ledger file is made (its disk decides the cost)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--smoke", action="store_true", help="20 requests, blocks of 10: seconds")
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.every = 20, 10
    blocks = measure(args.requests, args.every, args.folder)
    print(f"lifetime ledger: reserve + commit per request ({args.requests} requests)")
    print(f"{'rows before':>12} {'median ms':>10} {'p90 ms':>8}")
    for b in blocks:
        print(f"{b['rows_before']:>12} {b['median_ms']:>10.2f} {b['p90_ms']:>8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"requests": args.requests, "blocks": blocks}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
