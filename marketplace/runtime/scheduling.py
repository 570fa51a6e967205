"""How the parties that ``marketplace run`` starts are scheduled: as batch jobs (Linux SCHED_BATCH).

On one machine every party of a run shares the same few cores, and each party is two busy threads
(its own, and ZeroMQ's I/O thread). Every message wakes one of them: a send wakes the I/O thread,
a frame that arrives wakes the party. Under the default policy a woken thread preempts the one
running, so a host sending the bids of its owners switched to its I/O thread after almost every
send. SCHED_BATCH tells the kernel that a thread is throughput-bound: a woken batch thread waits
for the running one to block or use up its slice, instead of preempting it. Threads keep working
through what they have, and the I/O thread then moves several messages per wake-up. At 1,000 owners
on two cores this cut the CPU of a run by about 9 % and its wall time by 8-15 % (paired runs).

It changes only when threads run, never what they compute: selection, metrics and message counts
are the same. Parties started by hand (``marketplace curator|owner|owners|consumer``), in containers
or by Kubernetes keep the default policy: they usually have cores of their own.
"""

from __future__ import annotations

import ctypes
import os
import signal
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from threadpoolctl import threadpool_limits


def batch_scheduling() -> bool:
    """Schedule the calling thread, and every thread and process it starts from now on, as a batch
    job. True when in force; False where the platform has no such policy (then nothing changes)."""
    if not hasattr(os, "SCHED_BATCH"):
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError:
        return False
    return True


def scheduling_policy() -> str:
    """The calling thread's scheduling policy, for its report: ``batch``, ``normal`` or ``other``."""
    if not hasattr(os, "sched_getscheduler"):
        return "other"
    policy = os.sched_getscheduler(0)
    if policy == getattr(os, "SCHED_BATCH", None):
        return "batch"
    return "normal" if policy == os.SCHED_OTHER else "other"


PR_SET_PDEATHSIG = 1
"""prctl(2): the signal a process gets when its parent dies."""


def start_as_party() -> None:
    """The first act of every party the runner starts, exec'd (between fork and exec) or forked from
    the forkserver: die with its parent (the runner, or the forkserver, which exits with the runner),
    and run as a batch job before any thread of its own starts (:mod:`marketplace.runtime.scheduling`)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:  # not Linux: the runner's own cleanup still applies
        pass
    batch_scheduling()


def single_threaded_blas() -> threadpool_limits:
    """One BLAS thread per party. The marketplace's parallelism is one process per party; BLAS
    threads on top of that fight over the cores, and an owner's bid (one matrix-vector product over
    its rows) measured 10-40x slower with two OpenBLAS threads than with one on a 2-core machine."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)
