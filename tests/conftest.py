"""Shared fixtures: small scenarios, the data cache, a runner for the CLI as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import zmq
from hypothesis import HealthCheck, settings

from scenarios import tiny_raw

if TYPE_CHECKING:
    from run_cache import RunCache

# One BLAS thread per test process and in every process it starts (the CLI, the parties), set before
# numpy loads (nothing imported above loads it): the suite's parallelism is its two xdist workers,
# and OpenBLAS threads on top of them fight over the cores. On the 2-core machine under the suite's
# load, a pfds run's model fits (many small L-BFGS steps, each a few BLAS calls) took 5-10x longer
# with two OpenBLAS threads than with one; the runner gives its parties one thread for the same
# reason (runtime/scheduling.py).
for _blas in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_blas, "1")

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
PREFILLED_DATA = ROOT.parent / "shared" / "data"
"""A pre-filled data cache beside the checkout, used when MARKETPLACE_DATA is unset and it exists.
Tests read datasets from the data cache ($MARKETPLACE_DATA, else this folder, else the per-user
cache), read-only (the registry verifies every file in place before use), and serve it on 127.0.0.1
as a download mirror. A test whose datasets are not in the cache skips, naming the cache and the
`marketplace data fetch NAME` command (``needs_data``)."""

# Hypothesis times each example (deadline, 200 ms) and its data generation (the too_slow health
# check): wall-clock bounds that load on the machine breaks. Every property test here runs without
# them; a test that sets its own settings inherits this (docs/reliability.md).
settings.register_profile("any-machine", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("any-machine")

os.environ.pop("MARKETPLACE_DATA_MIRROR", None)  # tests name their mirrors explicitly
os.environ["MARKETPLACE_ROUND_PLOTS"] = "off"  # no rounds.png per run (0.15-0.5 s each, hundreds of runs); the
# tests of the per-round history and of the run folder's files turn it back on (fixture round_plots)
if not os.environ.get("MARKETPLACE_DESIGN_CACHE"):  # sketch consumers keep their M2M designs here, not in ~/.cache
    import atexit  # noqa: E402
    import shutil  # noqa: E402
    import tempfile  # noqa: E402

    os.environ["MARKETPLACE_DESIGN_CACHE"] = tempfile.mkdtemp(prefix="marketplace-designs-")
    atexit.register(shutil.rmtree, os.environ["MARKETPLACE_DESIGN_CACHE"], True)
if not os.environ.get("MARKETPLACE_DATA") and PREFILLED_DATA.is_dir():
    os.environ["MARKETPLACE_DATA"] = str(PREFILLED_DATA)  # inherited by every CLI subprocess too


def needs_data(*names: str) -> pytest.MarkDecorator:
    """Mark a test that reads the named public datasets: skipped, with the fetch command, when
    they are not (completely) in the data cache."""
    from marketplace.datasets.cache import data_home, fetch_command, missing_files
    from marketplace.datasets.registry import dataset

    absent = [name for name in names if missing_files(dataset(name))]
    reason = (
        (
            f"dataset(s) {absent} not in the data cache {data_home()} (set MARKETPLACE_DATA to choose it): "
            f"{fetch_command(absent)}"
        )
        if absent
        else ""
    )
    return pytest.mark.skipif(bool(absent), reason=reason)


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`marketplace ARGS...` as a new user would run it, in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "marketplace", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.fixture
def round_plots(monkeypatch):
    """Runs in this test (and the CLI processes it starts) draw rounds.png, as for any user."""
    monkeypatch.setenv("MARKETPLACE_ROUND_PLOTS", "on")


@pytest.fixture
def tiny_scenario() -> dict:
    """A scenario small enough for brute force: 3 owners, 2-D mixture, few rows (scenarios.tiny_raw)."""
    return tiny_raw()


@pytest.fixture(scope="session")
def run_cache(tmp_path_factory) -> RunCache:
    """The session's shared runs (tests/run_cache.py): ``run_cache.run(raw).report`` is the report of
    one run of ``raw`` made for the whole session, across the xdist workers; the run's folder
    (``.folder``) is read only. For tests that only read a report other tests read too."""
    from run_cache import RunCache, shared_root

    return RunCache(shared_root(tmp_path_factory.getbasetemp(), os.environ.get("PYTEST_XDIST_WORKER")))


@pytest.fixture(scope="session", autouse=True)
def every_report_follows_the_schema(tmp_path_factory, run_cache):
    """After the whole session, check every report.json the suite wrote (in-process runs, CLI
    subprocesses, sweeps, assembled compose runs, and the shared runs this process made) against
    marketplace/report.schema.json."""
    yield
    import json

    from marketplace.runner.report_schema import report_problems

    checked, bad = 0, []
    shared = [path for folder in run_cache.made for path in folder.rglob("report.json")]
    for path in sorted(tmp_path_factory.getbasetemp().rglob("report.json")) + shared:
        try:
            report = json.loads(path.read_text())
        except ValueError as err:
            bad.append(f"{path}: not JSON ({err})")
            continue
        checked += 1
        bad += [f"{path}: {problem}" for problem in report_problems(report)[:5]]
    if bad:
        pytest.fail(
            f"{len(bad)} schema problem(s) in the {checked} report.json files the suite wrote:\n" + "\n".join(bad[:40])
        )


import contextlib  # noqa: E402
import faulthandler  # noqa: E402
import gc  # noqa: E402
import time  # noqa: E402
from collections.abc import Iterator  # noqa: E402

from marketplace.transport.context import contexts_made, new_context, open_contexts  # noqa: E402

# --- the longest files first -----------------------------------------------------------------------
# pytest-xdist (`--dist loadfile --no-loadscope-reorder`, addopts) gives each of the two workers whole
# test files, in the order they were collected (without the flag, files with most tests first), so a
# file's module fixtures (a Docker engine, a shared run) are set up once. A long file that comes last
# would keep one worker busy while the other idles; so the files go out longest first (the
# longest-processing-time rule), and the short ones fill in at the end. The seconds each file took in
# a measured run are in tests/file_seconds.json (only the order depends on them: a file missing from
# it counts 10 s per slow test); `python tests/file_seconds.py JUNIT.xml` writes it anew from a run's
# `--junitxml` report. (`--dist loadgroup` would hand out single tests, but with pytest 9
# pytest-xdist 3.8 cannot tag a test's group, so every group is ignored.)

FILE_SECONDS = Path(__file__).with_name("file_seconds.json")


def _expected_seconds(items: list[pytest.Item]) -> dict[str, float]:
    import json

    measured: dict[str, float] = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
    expected: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path in measured:
            expected[path] = measured[path]
        else:
            expected[path] = expected.get(path, 0.0) + (10.0 if item.get_closest_marker("slow") else 0.05)
    return expected


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    expected = _expected_seconds(items)
    first_seen = {path: index for index, path in reversed(list(enumerate(i.nodeid.split("::", 1)[0] for i in items)))}

    def order(item: pytest.Item) -> tuple[float, int]:
        path = item.nodeid.split("::", 1)[0]
        return (-expected[path], first_seen[path])

    items.sort(key=order)  # stable: a file's tests keep their order, and stay together


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if message := item.stash.get(_not_run_again, None):
        pytest.fail(message, pytrace=False)


# --- no test can hang the suite -------------------------------------------------------------------
# pytest-timeout ([tool.pytest.ini_options]: timeout, timeout_method = "signal", timeout_func_only =
# false) fails a test that runs past its timeout, setup and teardown included, with its traceback,
# and the worker goes on to the next test. A signal handler runs only between Python bytecodes, so a
# test stuck inside one C call (a lock, a native loop, a ZeroMQ term) is beyond it: for that, a
# backstop (faulthandler, a C thread of its own) prints every thread's stack and ends the worker
# BACKSTOP_GRACE_S after the timeout; pytest-xdist reports the test as crashed, starts a new worker
# and runs the file's remaining tests there. ZeroMQ contexts come from one factory
# (marketplace.transport.context.new_context), whose sockets do not linger and whose garbage
# collection never waits, and a module that leaves one open is an error naming who made it.
# tests/runtime/test_suite_never_hangs.py proves all of it on a small suite of its own.

BACKSTOP_GRACE_S = 60.0
"""How long after its timeout a test that a signal could not stop ends its worker (the ini option
backstop_grace_s overrides it: the suite's own test of the backstop shortens it)."""

_backstop_at = pytest.StashKey[float]()
_backstop_file = pytest.StashKey[int]()
_not_run_again = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("backstop_grace_s", "seconds after its timeout a test stuck in C ends its worker", default="")


def pytest_configure(config: pytest.Config) -> None:
    # stderr as it is now, before pytest captures file descriptor 2 around each test: the stacks must
    # reach the terminal (under pytest-xdist, the worker's stderr is the controller's)
    config.stash[_backstop_file] = os.dup(2)


def pytest_unconfigure(config: pytest.Config) -> None:
    faulthandler.cancel_dump_traceback_later()
    if _backstop_file in config.stash:
        os.close(config.stash[_backstop_file])
        del config.stash[_backstop_file]


def _timeout_s(item: pytest.Item) -> float:
    """The item's pytest-timeout, as pytest-timeout reads it: its `timeout` marker, else --timeout,
    else $PYTEST_TIMEOUT, else the ini value (0: none)."""
    marker = item.get_closest_marker("timeout")
    if marker is not None and (marker.args or "timeout" in marker.kwargs):
        value = marker.args[0] if marker.args else marker.kwargs["timeout"]
    else:
        value = item.config.getoption("timeout", None)
        if value is None:
            value = os.environ.get("PYTEST_TIMEOUT") or item.config.getini("timeout")
    return float(value or 0)


def _arm_backstop(item: pytest.Item, seconds: float) -> None:
    faulthandler.dump_traceback_later(seconds, exit=True, file=item.config.stash[_backstop_file])


@contextlib.contextmanager
def _running(item: pytest.Item) -> Iterator[None]:
    """Under pytest-xdist, the test this worker is running, in a file of the session's: a file left
    behind names the test its worker died in. pytest-xdist reports that test as failed and starts a new
    worker, but with whole files as units of work (--dist loadfile, as 3.8 does it) it gives the file's
    unfinished tests to a worker again, the one it died in included: run again, that test would end
    one worker after another until pytest-xdist gives up the session. It fails at once instead."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        yield
        return
    folder = Path(item.config.getoption("basetemp")).parent / "running"
    folder.mkdir(exist_ok=True)
    for record in folder.iterdir():
        try:
            running = record.read_text() if record.name != worker else ""
        except FileNotFoundError:  # the other worker finished its test since the listing
            continue
        if running == item.nodeid:
            item.stash[_not_run_again] = (
                f"not run again: worker {record.name} died in this test (stuck past its timeout and the "
                f"backstop's grace, or crashed; its stacks are in the output of the run)"
            )
    mine = folder / worker
    mine.write_text(item.nodeid)
    try:
        yield
    finally:
        mine.unlink()


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Around each test's run (setup, call, teardown and their reports): the backstop, then, inside,
    pytest-timeout's timer (tryfirst: this wrapper is outside pytest-timeout's)."""
    with _running(item):
        timeout = _timeout_s(item)
        if timeout <= 0 or item.config.getoption("usepdb", False) or item.config.getoption("trace", False):
            yield  # no timeout, or a debugger: a person is watching
            return
        seconds = timeout + float(item.config.getini("backstop_grace_s") or BACKSTOP_GRACE_S)
        item.stash[_backstop_at] = time.monotonic() + seconds
        _arm_backstop(item, seconds)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(trylast=True)
def pytest_exception_interact(node: pytest.Item | pytest.Collector, call, report) -> None:
    """pytest's faulthandler plugin cancels every dump_traceback_later when a test fails (its own
    tryfirst hook; faulthandler has one timer per process) and pytest-timeout cancels its timer: the
    rest of a failed test (its teardown) would have no bound. The backstop is armed again for the time
    left."""
    at = node.stash.get(_backstop_at, None)
    if at is not None:
        _arm_backstop(node, max(at - time.monotonic(), 1.0))


# --- ZeroMQ contexts ------------------------------------------------------------------------------


@pytest.fixture
def zmq_context(request) -> Iterator[zmq.Context]:
    """A ZeroMQ context for one test, from the project's factory (no socket lingers), destroyed with
    linger 0 when the test ends, passed or failed."""
    ctx = new_context(owner=f"the zmq_context fixture of {request.node.nodeid}")
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture(scope="module", autouse=True)
def _no_zmq_context_left_open():
    """After each test module, every ZeroMQ context it made is closed: one left open is an error that
    names who made it. (A context only the garbage collector held is closed by it: one collection.)"""
    made_before = contexts_made()
    yield
    gc.collect()
    left = [ctx for ctx in open_contexts() if ctx.number > made_before]
    if left:
        pytest.fail(
            f"{len(left)} ZeroMQ context(s) made in this module are still open (close them, e.g. with the "
            f"zmq_context fixture): " + "; ".join(f"#{ctx.number} made by {ctx.owner}" for ctx in left),
            pytrace=False,
        )
