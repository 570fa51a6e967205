"""Every ZeroMQ context comes from one factory (marketplace.transport.context.new_context): no socket
of its contexts lingers unless it asks to, and an open context can be listed with who made it. That
none of them can block a process, on exit or in the garbage collector, is shown beside a plain
context that does, in tests/runtime/test_suite_never_hangs.py."""

from __future__ import annotations

import re

import zmq
from conftest import ROOT

from marketplace.transport.context import contexts_made, new_context, open_contexts

FACTORY = "marketplace/transport/context.py"
ALLOWED = {
    FACTORY: "the factory itself",
    "tests/runtime/test_suite_never_hangs.py": "shows that a plain context does hang (the hazard is real)",
}
"""The only files that may make a ZeroMQ context without the factory, and why."""
MAKES_A_CONTEXT = re.compile(r"\bzmq\.(asyncio\.)?Context(\.instance)?\(")


def test_no_code_makes_a_zeromq_context_but_the_factory():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in ("marketplace", "tests", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if str(path.relative_to(ROOT)) not in ALLOWED
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if MAKES_A_CONTEXT.search(line)
    ]
    assert not found, "make ZeroMQ contexts with marketplace.transport.context.new_context:\n" + "\n".join(found)


def test_the_scan_sees_a_plain_context_in_any_spelling():
    calls = [f"zmq.{name}(" for name in ("Context", "Context.instance", "asyncio.Context")]  # not spelled out here
    assert all(MAKES_A_CONTEXT.search(f"ctx = {call}io_threads=2)") for call in calls)
    assert not MAKES_A_CONTEXT.search("def serve(ctx: zmq.Context) -> None:")


def test_sockets_of_a_new_context_do_not_linger_monitors_included(zmq_context):
    sock = zmq_context.socket(zmq.DEALER)
    monitor = sock.get_monitor_socket()
    assert zmq_context.get(zmq.BLOCKY) == 0
    assert sock.getsockopt(zmq.LINGER) == 0 and monitor.getsockopt(zmq.LINGER) == 0


def test_a_socket_that_asks_for_a_bounded_linger_keeps_it(zmq_context):
    sock = zmq_context.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)
    assert sock.getsockopt(zmq.LINGER) == 2000


def test_io_threads_are_the_callers():
    ctx = new_context(3)
    try:
        assert ctx.get(zmq.IO_THREADS) == 3
    finally:
        ctx.term()


def test_an_open_context_is_listed_with_who_made_it_until_it_is_closed():
    first = new_context()
    second = new_context(owner="the test's server")
    try:
        mine = [ctx for ctx in open_contexts() if ctx in (first, second)]
        assert [ctx.owner for ctx in mine] == [
            "test_context.test_an_open_context_is_listed_with_who_made_it_until_it_is_closed",
            "the test's server",
        ]
        assert second.number == contexts_made() and first.number < second.number
    finally:
        first.term()
    assert first not in open_contexts() and second in open_contexts()
    second.destroy(linger=0)
    assert second not in open_contexts()
    assert "made by the test's server (closed)" in repr(second)
