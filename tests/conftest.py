"""Shared fixtures: small scenarios, the data cache, a runner for the CLI as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import zmq
from hypothesis import HealthCheck, settings

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
    """A scenario small enough for brute force: 3 owners, 2-D mixture, few rows."""
    return tiny_raw()


def tiny_raw(**summarize) -> dict:
    """The tiny scenario as a fresh dict (``summarize`` options override its section); for code
    outside fixtures (the fuzz harness, the fault benchmark)."""
    raw = {
        "name": "tiny",
        "protocol": "summarize",
        "seed": 11,
        "parties": {"owners": 3},
        "data": {
            "source": {
                "kind": "covariate_shift",
                "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 40},
            },
            "partition": {"scheme": "by_group", "skew": 0.7},
            "consumer": {"target_groups": [0], "target_share": 0.5, "validation_size": 8, "test_size": 10},
            "seed_set": {"groups": [3], "size": 4},
        },
        "summarize": {"rounds": 6, "gamma": 0.5, "features": 30, "baselines": [], **summarize},
        "transport": {"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 5.0, "start_timeout_s": 30.0},
    }
    return raw


@pytest.fixture(scope="session", autouse=True)
def every_report_follows_the_schema(tmp_path_factory):
    """After the whole session, check every report.json the suite wrote (in-process runs, CLI
    subprocesses, sweeps, assembled compose runs) against marketplace/report.schema.json."""
    yield
    import json

    from marketplace.runner.report_schema import report_problems

    checked, bad = 0, []
    for path in sorted(tmp_path_factory.getbasetemp().rglob("report.json")):
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


# --- tests that must run with no other test beside them --------------------------------------------
# The suite runs on two workers (pytest-xdist). A module marked `alone` compares wall times of runs
# made at different moments (a run under attack against a clean one); another test on the other
# worker would load one run and not the other. Its tests hold an exclusive lock for the whole module,
# every other test a shared one, so while an `alone` module runs, nothing else does.

import contextlib  # noqa: E402
import fcntl  # noqa: E402
import time  # noqa: E402

LOCK_WAIT_S = 3600.0
"""The longest a test waits for an `alone` module on the other worker to finish (a whole module of
runs: minutes on a busy machine, longer than one test's timeout, which counts the test itself only)."""


def _is_alone(request) -> bool:
    return request.node.get_closest_marker("alone") is not None


@contextlib.contextmanager
def _session_lock(tmp_path_factory, mode: int):
    """flock on a file the workers of this session share (nothing to do without workers)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    path = tmp_path_factory.getbasetemp().parent / "alone.lock"
    with open(path, "a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:  # polled, with a deadline of its own: the wait is not the test's time (timeout_func_only)
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"waited {LOCK_WAIT_S:.0f} s for the other worker's `alone` module to finish")
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="module", autouse=True)
def _alone_module(request, tmp_path_factory):
    if not _is_alone(request):
        yield
        return
    with _session_lock(tmp_path_factory, fcntl.LOCK_EX):
        yield


@pytest.fixture(autouse=True)
def _beside_others(request, tmp_path_factory):
    if _is_alone(request):
        yield
        return
    with _session_lock(tmp_path_factory, fcntl.LOCK_SH):
        yield


# --- ZeroMQ contexts ------------------------------------------------------------------------------
# Made by the project's factory (marketplace.transport.context.new_context), whose sockets do not
# linger and whose garbage collection never waits; a module that leaves one open is an error naming
# who made it.

import gc  # noqa: E402
from collections.abc import Iterator  # noqa: E402

from marketplace.transport.context import contexts_made, new_context, open_contexts  # noqa: E402


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
