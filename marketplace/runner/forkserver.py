"""The runner's forkserver: a clean process that imports the parties' libraries once, from which
every party is forked (see :mod:`marketplace.runner.processes`).

This module imports nothing heavy, so the command line can start the server as its first act: the
server's imports (half a second or more) then run alongside the runner's own (parsing the
scenario, building the world) instead of after them.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context
import os

BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# what every forked party would otherwise import on its own (scikit-learn is left out: only the
# consumer needs it, and it loads it in the background while the rounds run)
FORKSERVER_PRELOAD = ["marketplace.runner.forkserver_guard", "marketplace.runner.party_process"]
"""Imported once by the forkserver: the guard ties the server's life to the runner's, then the
libraries every party needs."""


def forkserver_context() -> multiprocessing.context.BaseContext:
    """The runner's forkserver, started once per runner process with the libraries preloaded.

    Call it early (before building the world): the server imports in parallel with the runner.
    """
    ctx = multiprocessing.get_context("forkserver")
    for var in BLAS_ENV:  # the server's numpy must start single-threaded, like exec'd parties
        os.environ.setdefault(var, "1")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    from multiprocessing import forkserver

    forkserver.ensure_running()
    return ctx


def stop_forkserver() -> None:
    """Stop the forkserver (and multiprocessing's resource tracker) and wait for them, so a command
    that ran a scenario leaves no process behind, not even for the moment they would take to notice
    their parent is gone. Library users running many scenarios may keep the server instead.

    These are the interpreter's own stop hooks (private, used by CPython's tests), hence the guards.
    """
    from multiprocessing import forkserver, resource_tracker

    for helper in (getattr(forkserver, "_forkserver", None), getattr(resource_tracker, "_resource_tracker", None)):
        stop = getattr(helper, "_stop", None)
        if stop is not None:
            try:
                stop()
            except (OSError, ChildProcessError):  # already gone
                pass
