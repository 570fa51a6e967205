"""Shared /proc readers of the whole-run benchmarks: a process tree, and each process's CPU and memory.

A benchmark that starts ``marketplace run`` (or Flower) measures everything below the process it
started: the parties, their owner hosts, Ray's workers. These read what Linux accounts for each of
them, from outside, without touching the processes measured.
"""

from __future__ import annotations

import os
import signal
import subprocess

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
"""Clock ticks per second of /proc/PID/stat's CPU times."""


def _stat_fields(path: str) -> list[bytes] | None:
    """The fields after the command name of a /proc stat file (field 3 on), or None if it is gone."""
    try:
        with open(path, "rb") as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rindex(b")") + 2 :].split()


def tree(root: int) -> list[int]:
    """``root`` and every live descendant of it, parents before their children (one scan of /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(f"/proc/{entry.name}/stat")
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def cpu_ticks(pid: int) -> int | None:
    """User + system CPU of a process (all its threads, living and ended), in clock ticks; None if gone."""
    fields = _stat_fields(f"/proc/{pid}/stat")
    return None if fields is None else int(fields[11]) + int(fields[12])


def tree_ticks(root: int) -> int:
    """User + system CPU of ``root``'s live tree plus what its processes' reaped children used, in clock
    ticks: a tree whose workers come and go (a SuperNode's ClientApp process per run) still adds up,
    as long as each worker is reaped by its parent and not re-parented away."""
    total = 0
    for pid in tree(root):
        fields = _stat_fields(f"/proc/{pid}/stat")
        if fields is not None:
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total


def thread_kind_ticks(pid: int) -> dict[str, int]:
    """CPU ticks of a process's live threads by kind: ``main`` (the process's own thread, where its
    Python loop runs), ``zmq-io`` (ZeroMQ's I/O threads, named ZMQbg/IO/n) and ``other``."""
    out: dict[str, int] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        path = f"/proc/{pid}/task/{tid}/stat"
        try:
            with open(path, "rb") as f:
                text = f.read()
        except OSError:
            continue
        name = text[text.index(b"(") + 1 : text.rindex(b")")]
        fields = text[text.rindex(b")") + 2 :].split()
        kind = "main" if tid == str(pid) else "zmq-io" if name.startswith(b"ZMQbg/IO") else "other"
        out[kind] = out.get(kind, 0) + int(fields[11]) + int(fields[12])
    return out


def memory_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB, from /proc/PID/smaps_rollup; (0, 0) if it is gone."""
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def interpolate(points: list[tuple[float, float]], t: float) -> float:
    """The value at time ``t`` of a series of (time, value) samples in time order, linear between
    samples, held at the first and last sample outside them."""
    if t <= points[0][0]:
        return points[0][1]
    for (x0, c0), (x1, c1) in zip(points, points[1:]):
        if x0 <= t <= x1:
            return c0 if x1 == x0 else c0 + (c1 - c0) * (t - x0) / (x1 - x0)
    return points[-1][1]


def stop_group(proc: subprocess.Popen, *, grace_s: float = 60.0) -> None:
    """Stop the process group ``proc`` leads (a marketplace and everything it started): SIGTERM, then
    SIGKILL after ``grace_s`` if it has not ended."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
