"""The test suite cannot hang. On a small suite of its own, run by pytest in a process of its own with
the project's settings ([tool.pytest.ini_options] in pyproject.toml and tests/conftest.py, on two
workers): a test that fails holding a ZeroMQ context with messages nobody will take, a test stuck in
a wait and a test stuck inside one C call each fail (the last one ends its worker, which pytest-xdist
replaces), and the test after them still runs and passes.

Below it, the hazard it guards against, shown to be real: pyzmq's own ``zmq.Context`` blocks for
ever when it is terminated with such a message queued, or garbage-collected with its socket in a
reference cycle, where a context from marketplace.transport.context.new_context returns at once."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import xml.etree.ElementTree as ElementTree

import pytest
import zmq
from conftest import ROOT

from marketplace.transport.context import new_context

pytestmark = pytest.mark.slow

INNER_SUITE = '''
"""Four tests, run in this order on one worker (the file is one unit of work)."""

import collections
import itertools
import subprocess
import sys

import pytest
import zmq

from marketplace.transport.context import new_context

READER = """
import sys, zmq
from marketplace.transport.context import new_context
router = new_context().socket(zmq.ROUTER)
print(router.bind_to_random_port("tcp://127.0.0.1"), flush=True)
sys.stdin.read()
"""


def test_fails_holding_a_context_with_messages_nobody_takes():
    reader = subprocess.Popen([sys.executable, "-c", READER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    port = int(reader.stdout.readline())
    ctx = new_context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")
    reader.kill()  # the reader is gone: what the dealer sends stays queued, waiting for it
    reader.wait()
    for i in range(5):
        dealer.send(b"message %d" % i)
    assert False, "fails on purpose, its context and socket held by this frame"


@pytest.mark.timeout(3)
def test_stuck_in_a_wait(zmq_context):
    puller = zmq_context.socket(zmq.PULL)
    puller.bind("tcp://127.0.0.1:*")
    puller.poll()  # no timeout, and nobody sends


@pytest.mark.timeout(1)
def test_stuck_in_a_c_call():
    collections.deque(itertools.repeat(None), maxlen=0)  # never returns to the interpreter: no signal handler runs


def test_runs_after_them():
    pass
'''
INNER_DEADLINE_S = 240
GRACE_S = 2
"""The backstop's grace in the inner run (60 s in the suite): the test stuck in C ends its worker
1 + 2 s after it starts."""


def inner_pytest(tmp_path) -> tuple[int, str, dict[str, list[tuple[str, str]]]]:
    """Run INNER_SUITE as `python -m pytest` would in the project, on two workers, with the timeout
    pyproject.toml's tests would have under `--timeout 20`; returns its exit status, its output, and
    the outcomes reported for each test with their messages (from its JUnit XML report)."""
    (tmp_path / "test_inner.py").write_text(INNER_SUITE)
    command = [
        *(sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--timeout", "20"),
        *("-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path)),  # the project's ini options
        *("-p", "conftest", "-o", f"backstop_grace_s={GRACE_S}"),  # tests/conftest.py (on PYTHONPATH), as a plugin
        *("--basetemp", str(tmp_path / "basetemp"), "--junitxml", str(tmp_path / "report.xml")),
        str(tmp_path / "test_inner.py"),
    ]
    env = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}  # not ours
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), env.get("PYTHONPATH")]))
    run = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        output, _ = run.communicate(timeout=INNER_DEADLINE_S)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)  # its workers too
        output, _ = run.communicate()
        pytest.fail(f"the inner suite hung for {INNER_DEADLINE_S} s:\n{output.decode(errors='replace')[-6000:]}")
    outcomes: dict[str, list[tuple[str, str]]] = {}
    for case in ElementTree.parse(tmp_path / "report.xml").iter("testcase"):
        problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
        outcomes.setdefault(case.get("name", ""), []).extend(
            [(problem.tag, problem.get("message", "")) for problem in problems] or [("passed", "")]
        )
    return run.returncode, output.decode(errors="replace"), outcomes


def test_failed_and_stuck_tests_fail_and_the_tests_after_them_still_run(tmp_path):
    status, output, outcomes = inner_pytest(tmp_path)
    tail = output[-8000:]
    assert status == 1, tail
    assert list(outcomes) == [
        "test_fails_holding_a_context_with_messages_nobody_takes",
        "test_stuck_in_a_wait",
        "test_stuck_in_a_c_call",
        "test_runs_after_them",
    ], tail
    [(failed, message)] = outcomes["test_fails_holding_a_context_with_messages_nobody_takes"]
    assert failed == "failure" and "fails on purpose" in message, tail
    [(failed, message)] = outcomes["test_stuck_in_a_wait"]  # by pytest-timeout's signal; the worker goes on
    assert failed == "failure" and "Timeout (>3.0s) from pytest-timeout" in message, tail
    crashed = [message for _, message in outcomes["test_stuck_in_a_c_call"] if "crashed while running" in message]
    again = [message for _, message in outcomes["test_stuck_in_a_c_call"] if message not in crashed]
    assert len(crashed) == 1, tail  # its worker ended by the backstop, and pytest-xdist says so
    assert all("not run again: worker gw" in message and "died in this test" in message for message in again), tail
    assert "Timeout (0:00:03)!" in output and "in test_stuck_in_a_c_call" in output, tail  # every thread's stack
    # no other test ended a worker (the FAILURES section and the short summary, when the terminal is wide
    # enough not to cut it, both name the one crash)
    assert set(re.findall(r"worker '(gw\d+)' crashed while running '([^']+)'", output)) == {
        (crashed_worker, "test_inner.py::test_stuck_in_a_c_call")
        for crashed_worker in re.findall(r"worker '(gw\d+)' crashed while running", crashed[0])
    }, tail
    assert outcomes["test_runs_after_them"] == [("passed", "")], tail


# --- the hazard -------------------------------------------------------------------------------------


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def destroy_in_a_thread(ctx: zmq.Context) -> threading.Thread:
    """``ctx.destroy()`` (what pyzmq does to a context it garbage-collects) on a thread of its own."""
    thread = threading.Thread(target=ctx.destroy, name="destroy", daemon=True)
    thread.start()
    return thread


def test_a_plain_context_with_a_message_nobody_takes_blocks_until_someone_does():
    port = unused_port()
    plain = zmq.Context()  # pyzmq's own: the hazard (allowed in this file only, tests/transport/test_context.py)
    dealer = plain.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{port}")  # nobody binds it
    dealer.send(b"never taken")
    thread = destroy_in_a_thread(plain)
    thread.join(1.0)
    blocked = thread.is_alive()
    rescue = new_context()  # a reader at last: the message leaves, the destroy returns, no thread is left
    try:
        reader = rescue.socket(zmq.ROUTER)
        reader.bind(f"tcp://127.0.0.1:{port}")
        thread.join(30)
    finally:
        rescue.destroy(linger=0)
    assert blocked, "a plain context with a queued message is terminated at once: the hazard is gone"
    assert not thread.is_alive() and plain.closed


def test_a_context_from_the_factory_with_a_message_nobody_takes_is_destroyed_at_once():
    ctx = new_context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(f"tcp://127.0.0.1:{unused_port()}")
    dealer.send(b"never taken")
    thread = destroy_in_a_thread(ctx)
    thread.join(30)
    assert not thread.is_alive() and ctx.closed


COLLECTED_IN_A_CYCLE = """
import gc, threading, time
import zmq
from marketplace.transport.context import new_context

gc.disable()
ctx = {make}
dealer = ctx.socket(zmq.DEALER)
dealer.connect("tcp://127.0.0.1:1")  # nobody: the message stays queued
dealer.send(b"never sent")
frame = {{"ctx": ctx, "dealer": dealer, "monitor": dealer.get_monitor_socket()}}
frame["self"] = frame  # a reference cycle, as a failed test's traceback and frames make
del ctx, dealer, frame
gc.collect()
deadline = time.monotonic() + 20
while threading.active_count() > 1 and time.monotonic() < deadline:
    time.sleep(0.01)
print("collected, threads left:", threading.active_count() - 1)
"""


def collect_in_a_process(make: str, timeout_s: float) -> str | None:
    """What a process that garbage-collects a context made by ``make`` (in a cycle with its sockets,
    a message queued) prints, or None when it is still collecting after ``timeout_s``."""
    command = [sys.executable, "-W", "ignore", "-c", COLLECTED_IN_A_CYCLE.format(make=make)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:  # killed
        return None
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_plain_context_collected_with_its_sockets_hangs_the_garbage_collector():
    """Python clears the context's weak references to its sockets before any finalizer of the cycle
    runs: pyzmq's finalizer cannot close them and waits in term() for sockets whose own finalizers
    come after it, in the same thread."""
    assert collect_in_a_process("zmq.Context()", timeout_s=5) is None


def test_a_context_from_the_factory_is_collected_with_its_sockets_and_leaves_no_thread():
    assert collect_in_a_process("new_context()", timeout_s=60) == "collected, threads left: 0"
