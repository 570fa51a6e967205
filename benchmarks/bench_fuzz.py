"""100,000 hostile frames through the decoder and every role's Node: zero crashes, every frame counted.

    python benchmarks/bench_fuzz.py [--frames 100000] [--seed 1]

Uses the mutators of tests/fuzzing.py (random bytes and msgpack, bit flips, truncation, splices,
huge length headers, keys removed/added/duplicated, wrong types, extreme integers and floats,
NaN/inf in arrays, foreign dtypes, shapes and data lengths that lie, deep nesting, unknown and
swapped kinds, envelope fields out of range, replays). Tiny in-process runs of `summarize`
(trusted and less-trusted curator) and `stc` are played again and again; before every honest
delivery to the target party, hostile frames from that delivery's sender are slipped in. Each frame
must be received or rejected exactly once under a known reason, with an error that names the
field; a frame the role accepted is undone and a refused one must leave no trace, so every run must
still end with the clean run's result.

Prints: frames, crashes (must be 0), verdicts by reason (and the fields bad frames were refused
on), runs completed, frames/s overall and inside Node.receive.
"""

from __future__ import annotations

import argparse
import collections
import logging
import random
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "transport")]  # fuzzing, and test_fuzz

import fuzzing  # noqa: E402
from test_fuzz import SCENARIOS, outcome, prepared  # noqa: E402

TARGETS = {
    "summarize": ("curator", "owner-1", "owner-2", "owner-3", "consumer"),
    "summarize-less-trusted": ("curator", "owner-1", "owner-2", "owner-3", "consumer"),
    "stc": ("curator", "owner-1", "owner-2", "consumer"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--per-run", type=int, default=400, help="hostile frames per in-process run (about)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # every refused frame logs a warning
    warnings.simplefilter("ignore", RuntimeWarning)  # numpy overflow in roles fed huge (finite) values
    rng = random.Random(args.seed)
    tally = fuzzing.FuzzTally()
    runs = completed = 0
    started = time.perf_counter()
    plan = [(name, party) for name in SCENARIOS for party in TARGETS[name]]
    while tally.frames < args.frames:
        name, party = plan[runs % len(plan)]
        config, world, clean, clean_nodes = prepared(name)
        per_delivery = -(-args.per_run // sum(d.receiver == party for d in clean))
        nodes, _ = fuzzing.fuzz_run(
            config,
            rng,
            per_delivery=per_delivery,
            targets={party},
            keep_going=True,
            tally=tally,
            world=world,
            clean=clean,
        )
        runs += 1
        completed += outcome(nodes) == outcome(clean_nodes)
    wall = time.perf_counter() - started

    print(f"frames                 {tally.frames}")
    print(f"crashes                {len(tally.crashes)}")
    print(f"runs                   {runs} ({completed} ended with the clean run's result)")
    print(
        f"frames/s               {tally.frames / wall:,.0f} overall (snapshots, honest runs included); "
        f"{tally.frames / tally.feed_s:,.0f} inside Node.receive + checks"
    )
    reasons = collections.Counter()
    fields = collections.Counter()
    for verdict, n in tally.verdicts.items():
        reason, _, field = verdict.partition(":")
        reasons[reason] += n
        if field:
            fields[field] += n
    print("verdicts by reason:")
    for reason, n in reasons.most_common():
        print(f"  {reason:<20} {n:>8}  {100 * n / tally.frames:5.1f} %")
    print("bad_message by field (top 25):")
    for field, n in fields.most_common(25):
        print(f"  {field:<40} {n:>8}")
    print(f"  ({len(fields)} distinct fields)")
    for crash in tally.crashes[:10]:
        print(f"CRASH {crash.party} {crash.mutators}: {crash.error}")
    return 1 if tally.crashes or completed != runs else 0


if __name__ == "__main__":
    sys.exit(main())
