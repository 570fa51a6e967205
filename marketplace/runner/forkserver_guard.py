"""Imported only inside the runner's forkserver (as its first preload module): the server dies
with the runner.

Each forked party already dies with the forkserver (its parent-death signal); without this the
forkserver itself outlives a killed runner for as long as any party holds its pipes, and a party
that is stopped (SIGSTOP) or hung never lets it go. With the server's own parent-death signal set
to SIGKILL, killing the runner takes the server down, and every party with it (SIGKILL reaches a
stopped process too). Nothing else may import this module: it would tie that process to its parent.
"""

from __future__ import annotations

import ctypes
import signal

PR_SET_PDEATHSIG = 1

try:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
except OSError:  # not Linux: the forkserver still exits when its parent's pipe closes
    pass
