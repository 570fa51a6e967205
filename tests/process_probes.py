"""Probes of a run's processes from outside, shared by the tests that kill, stop or hang parties
(tests/transport/test_zmq.py, tests/runtime/test_faults.py) and by benchmarks/bench_faults.py: a
party's PID from its log, and whether a PID is a live process."""

from __future__ import annotations

import re
import time
from pathlib import Path


def pid_of(out: Path, party: str, timeout_s: float = 30) -> int:
    """A party's PID, from the first line its process writes to its log (works for either launch)."""
    log = out / "logs" / f"{party}.log"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if log.exists():
            match = re.search(rf"{party} \(pid (\d+)\) starting", log.read_text(errors="replace"))
            if match:
                return int(match.group(1))
        time.sleep(0.02)
    raise AssertionError(f"{party} never started")


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"
