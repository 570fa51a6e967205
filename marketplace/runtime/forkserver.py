"""The runner's forkserver: a clean process that imports the parties' libraries once, from which
every party is forked (see :mod:`marketplace.runner.processes`).

This module imports nothing heavy, so the command line can start the server as its first act: the
server's imports (half a second or more) then run alongside the runner's own (parsing the
scenario, building the world) instead of after them.

A script needs no ``if __name__ == "__main__":`` guard. multiprocessing prepares every child it
starts by running the parent's main module again (as ``__mp_main__``), unless the child's own
``__main__`` already is that module: a script that calls the runner at its top level would run
itself once per party. The runner's parties need nothing from the main module (their target and
arguments live in ``marketplace``), so the server takes on the identity of the runner's main
module (its path, or its module name), from :data:`MAIN_ENV`, which the server's guard module
reads as it starts: every party forked from it then skips that step, as CPython's own
``_fixup_main_from_path`` does for a child whose main module is the parent's. Scripts, ``python -c``,
a script piped on stdin and notebooks all run as written.
"""

from __future__ import annotations

import json
import multiprocessing
import multiprocessing.context
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

BLAS_ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# what every forked party would otherwise import on its own (scikit-learn is left out: only the
# consumer needs it, and it loads it in the background while the rounds run)
FORKSERVER_PRELOAD = ["marketplace.runtime.forkserver_guard", "marketplace.runtime.party_process"]
"""Imported once by the forkserver: the guard ties the server's life to the runner's (and adopts the
runner's main module, see :data:`MAIN_ENV`), then the libraries every party needs."""
MAIN_ENV = "MARKETPLACE_RUNNER_MAIN"
"""Environment variable through which the forkserver learns the runner's main module: JSON with
``path`` (a script's file) or ``name`` (a module run with ``python -m``)."""


def runner_main() -> dict[str, str]:
    """How multiprocessing would re-create this process's main module in a child: ``{"path": ...}``
    for a script (absolute, as multiprocessing computes it), ``{"name": ...}`` for ``python -m``,
    ``{}`` when there is nothing to re-create (``python -c``, a notebook, an interactive shell)."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    if name is not None:
        return {"name": name}
    path = getattr(main, "__file__", None)
    if path is None:
        return {}
    from multiprocessing import process

    # typeshed's multiprocessing.process omits ORIGINAL_DIR (the working directory at start-up,
    # which multiprocessing's own spawn preparation reads the same way)
    original_dir: str | None = process.ORIGINAL_DIR  # type: ignore[attr-defined]
    if not os.path.isabs(path) and original_dir is not None:
        path = os.path.join(original_dir, path)
    return {"path": os.path.normpath(path)}


def forkserver_context() -> multiprocessing.context.ForkServerContext:
    """The runner's forkserver, started once per runner process with the libraries preloaded.

    Call it early (before building the world): the server imports in parallel with the runner.
    """
    ctx = multiprocessing.get_context("forkserver")
    os.environ[MAIN_ENV] = json.dumps(runner_main())  # read by the server's guard (a script needs no main guard)
    for var in BLAS_ENV:  # the server's numpy must start single-threaded, like exec'd parties
        os.environ.setdefault(var, "1")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    from multiprocessing import forkserver

    forkserver.ensure_running()
    return ctx


@contextmanager
def forkserver_running(start: bool = True) -> Iterator[None]:
    """The forkserver for the length of one command: started on entry when ``start`` (its imports
    then run alongside the command's own: parsing, reading the scenario, building the world), and
    stopped on every way out (:func:`stop_forkserver`), whatever the command did, so that a command
    leaves no process behind. A run inside it forks its parties from this server."""
    if start:
        forkserver_context()
    try:
        yield
    finally:
        stop_forkserver()


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
