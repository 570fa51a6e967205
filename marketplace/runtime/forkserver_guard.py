"""Imported only inside the runner's forkserver (as its first preload module): the server dies
with the runner.

Each forked party already dies with the forkserver (its parent-death signal); without this the
forkserver itself outlives a killed runner for as long as any party holds its pipes, and a party
that is stopped (SIGSTOP) or hung never lets it go. With the server's own parent-death signal set
to SIGKILL, killing the runner takes the server down, and every party with it (SIGKILL reaches a
stopped process too). Nothing else may import this module: it would tie that process to its parent.

It also gives the server's ``__main__`` the identity of the runner's main module
(:data:`marketplace.runtime.forkserver.MAIN_ENV`), so that multiprocessing does not run the runner's
script again in every party it forks (see :mod:`marketplace.runtime.forkserver`).
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import json
import os
import signal
import sys

from marketplace.runtime.forkserver import MAIN_ENV

PR_SET_PDEATHSIG = 1

try:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
except OSError:  # not Linux: the forkserver still exits when its parent's pipe closes
    pass


def _adopt_runner_main() -> None:
    try:
        main = json.loads(os.environ.get(MAIN_ENV) or "{}")
    except ValueError:
        return
    module = sys.modules["__main__"]  # the server's own: `python -c "from multiprocessing.forkserver import main; ..."`
    if isinstance(main, dict) and isinstance(main.get("path"), str):
        module.__file__ = main["path"]
    elif isinstance(main, dict) and isinstance(main.get("name"), str):
        module.__spec__ = importlib.machinery.ModuleSpec(main["name"], None)


_adopt_runner_main()
