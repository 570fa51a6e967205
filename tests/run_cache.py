"""Runs shared by the whole test session: a scenario run once, whichever test and whichever xdist
worker asks first, its report handed to every test that only reads it.

Many tests read the report of the same small scenario (one checks the ledgers, another the
messages, a third the choice); each used to run it again. :class:`RunCache` runs a scenario once
per session and keeps its run folder and its report under one folder both xdist workers share
(the parent of their base temporary folders, as in pytest-xdist's recipe for a session fixture
that runs once), keyed by a digest of everything that decides the run: the scenario (its canonical
JSON and its resolved configuration), the driver and the launch, and whether the run draws its
round plots. A lock file per key (``fcntl.flock``) makes the other worker wait for a run under way
instead of starting it again.

A test gets a deep copy of the report (it may change it) and the run folder, which it must only
read: a test that changes the folder, or checks what running does (files written, exit statuses,
timings, processes, a monkeypatched part), runs its own scenario.
"""

from __future__ import annotations

import copy
import fcntl
import hashlib
import json
import os
import pickle
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPORT = "report.pickle"
"""The report as the run returned it, pickled (exactly the Python values a fresh run gives)."""


@dataclass(frozen=True)
class CachedRun:
    """A run of the session's: its report (a copy of the test's own) and its folder (read only)."""

    report: dict[str, Any]
    folder: Path


def run_key(scenario: Any, *, driver: str, launch: str) -> str:
    """The digest naming a run: the canonical JSON of the scenario's plain form, its resolved
    configuration (paths resolved against its folder included), the driver, the launch, and the
    round-plot switch the runner reads from the environment."""
    described = {
        "raw": scenario.raw,
        "config": repr(scenario.config),
        "driver": driver,
        "launch": launch,
        "round_plots": os.environ.get("MARKETPLACE_ROUND_PLOTS"),
    }
    text = json.dumps(described, sort_keys=True, separators=(",", ":"), default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (made if absent) for the block: across processes."""
    with open(path, "a+b") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


class RunCache:
    """The session's runs under ``root`` (shared by the xdist workers), and this process's copies."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._reports: dict[str, dict[str, Any]] = {}
        self.made: list[Path] = []
        """The run folders this process made (the session's schema check reads their report.json)."""

    def run(self, raw: dict, *, driver: str = "inprocess", launch: str = "forkserver") -> CachedRun:
        """The session's run of the raw scenario ``raw`` (no relative paths: it is read in the cache's
        folder), made now if no test made it yet."""
        from scenarios import parsed

        return self.run_scenario(parsed(copy.deepcopy(raw), self.root, "cached"), driver=driver, launch=launch)

    def run_scenario(self, scenario: Any, *, driver: str = "inprocess", launch: str = "forkserver") -> CachedRun:
        """The session's run of the parsed ``scenario`` (e.g. a shipped file with overrides)."""
        key = run_key(scenario, driver=driver, launch=launch)
        folder = self.root / key
        if key not in self._reports:
            with locked(self.root / f"{key}.lock"):
                if not (folder / REPORT).exists():
                    self._run(scenario, folder, driver=driver, launch=launch)
                    self.made.append(folder / "run")
                self._reports[key] = pickle.loads((folder / REPORT).read_bytes())
        return CachedRun(report=copy.deepcopy(self._reports[key]), folder=folder / "run")

    @staticmethod
    def _run(scenario: Any, folder: Path, *, driver: str, launch: str) -> None:
        """Run into ``folder/run`` and keep the report beside it (written last, under a temporary name
        first: its presence says the run is complete). A run that raised leaves nothing kept."""
        from marketplace.runner.run import run_scenario

        if folder.exists():  # a run an earlier test began and did not finish (it raised)
            shutil.rmtree(folder)
        folder.mkdir()
        report = run_scenario(scenario, folder / "run", driver=driver, launch=launch)
        partial = folder / f"{REPORT}.partial"
        partial.write_bytes(pickle.dumps(report))
        partial.replace(folder / REPORT)


def shared_root(basetemp: Path, worker: str | None) -> Path:
    """The run cache's folder: beside the xdist workers' base temporary folders (their common
    parent) when ``worker`` names one, else in this session's own."""
    return (basetemp.parent if worker else basetemp) / "run-cache"
