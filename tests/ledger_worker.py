"""A stand-in owner for the lifetime ledger's crash and concurrency tests (run as a script).

``crash DB LOG [--iterations N]``: open the ledger, settle what a previous life left reserved (the
same request id again: the ledger must not charge it twice), then loop: reserve req-i -> append
"req-i eps" to LOG and fsync (the release) -> commit req-i. Prints ``ready`` once the ledger is
open and ``pending N`` for the reservations it found unsettled. Exits 0 when the budget declines or
after N new iterations.

``race DB PREFIX N START_FILE``: open (or create) the ledger, wait for START_FILE, then try N reservations
req-PREFIX-i of
RACE_COST each, a random pause of up to 0.5 ms before each; print how many were reserved.
"""

from __future__ import annotations

import os
import random
import sys
import time

from marketplace.privacy.lifetime import BudgetDeclined, Cost, LifetimeLedger

OWNER = "owner-1"
RELATION = "add/remove-one (a row of owner-1's data)"
CRASH_BUDGET = (1000.0, 0.0)
RACE_BUDGET = (1.0, 0.0)
RACE_COST = 1 / 64  # exact in binary: 64 of them fill RACE_BUDGET exactly


def crash_cost(i: int) -> Cost:
    """Request i's declared cost: the same on every retry."""
    return Cost.pure(0.001 * (1 + i % 7))


def release(log_fd: int, request_id: str, cost: Cost) -> None:
    """The release leaving the owner: one line in the log, on disk before we go on."""
    os.write(log_fd, f"{request_id} {cost.eps!r}\n".encode())
    os.fsync(log_fd)


def crash(db: str, log: str, iterations: int | None) -> int:
    ledger = LifetimeLedger.open(db, owner=OWNER, budget=CRASH_BUDGET, relation=RELATION)
    print("ready", flush=True)
    log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    history = ledger.history()
    pending = [r for r in history if r.state == "reserved"]
    print(f"pending {len(pending)}", flush=True)
    for row in pending:  # a crash between reserve and commit: retry the same request
        again = ledger.reserve(row.request_id, row.cost, consumer=row.consumer, what=row.what)
        assert again.seq == row.seq, (again, row)
        release(log_fd, row.request_id, row.cost)
        ledger.commit(row.request_id)
    i, done = len(history), 0
    while iterations is None or done < iterations:
        request_id, cost = f"req-{i}", crash_cost(i)
        try:
            ledger.reserve(request_id, cost, consumer=f"consumer-{i % 3}", what="crash-test release")
        except BudgetDeclined:
            print("exhausted", flush=True)
            return 0
        release(log_fd, request_id, cost)
        ledger.commit(request_id)
        i, done = i + 1, done + 1
    return 0


def race(db: str, prefix: str, n: int, start_file: str) -> int:
    ledger = LifetimeLedger.open(db, owner=OWNER, budget=RACE_BUDGET, relation=RELATION)  # creates it if none yet
    while not os.path.exists(start_file):
        time.sleep(0.001)
    reserved, pause = 0, random.Random(prefix)
    for i in range(n):
        time.sleep(pause.uniform(0.0, 0.0005))  # as owners between requests: lets the others in
        try:
            ledger.reserve(f"req-{prefix}-{i}", Cost.pure(RACE_COST), consumer=prefix, what="race")
            reserved += 1
        except BudgetDeclined:
            pass
    print(reserved, flush=True)
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if args[0] == "crash":
        sys.exit(crash(args[1], args[2], int(args[4]) if len(args) > 4 and args[3] == "--iterations" else None))
    if args[0] == "race":
        sys.exit(race(args[1], args[2], int(args[3]), args[4]))
    sys.exit(f"unknown mode {args[0]!r}")
