"""Parties started by `marketplace run` are scheduled as batch jobs (Linux SCHED_BATCH), ZeroMQ's I/O
thread included; parties started by hand keep the default policy. (That it speeds runs up is
measured in benchmarks/bench_scale.py, not timed here.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import tiny_raw

from marketplace.runner.run import run_scenario
from marketplace.scenario import parse_scenario

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")

THREADS = """
import json, os, zmq
from marketplace.runtime.scheduling import batch_scheduling, scheduling_policy
from marketplace.transport.context import new_context
before = scheduling_policy()
on = batch_scheduling() if {batch} else False
ctx = new_context()
sock = ctx.socket(zmq.DEALER); sock.connect("tcp://127.0.0.1:1")  # starts the I/O thread
import time
deadline = time.monotonic() + 10
while True:  # a new thread names itself once it runs (a batch one may not run at once)
    names = {{}}
    for tid in os.listdir("/proc/self/task"):
        name = open(f"/proc/self/task/{{tid}}/comm").read().strip()
        names[f"{{name}} {{tid}}"] = os.sched_getscheduler(int(tid)) == os.SCHED_BATCH
    if any(n.startswith("ZMQbg/IO") for n in names) or time.monotonic() > deadline:
        break
    time.sleep(0.01)
sock.close(linger=0); ctx.term()
print(json.dumps({{"before": before, "on": on, "after": scheduling_policy(), "batch_by_thread": names}}))
"""


@pytest.mark.parametrize("batch", [True, False])
def test_batch_scheduling_reaches_zeromqs_io_thread_started_after_it(batch):
    out = subprocess.run(
        [sys.executable, "-c", THREADS.format(batch=batch)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["before"] == "normal"
    io_threads = {name: on for name, on in seen["batch_by_thread"].items() if name.startswith("ZMQbg/IO")}
    assert io_threads, seen
    if batch:
        assert seen["on"] and seen["after"] == "batch" and all(seen["batch_by_thread"].values()), seen
    else:
        assert seen["after"] == "normal" and not any(seen["batch_by_thread"].values()), seen


@pytest.mark.parametrize("launch", ["forkserver", "exec"])
def test_every_party_the_runner_starts_runs_as_a_batch_job(tmp_path, launch):
    raw = tiny_raw()
    raw["parties"]["owners_per_process"] = 2  # a host of two owners and a party of its own
    report = run_scenario(
        parse_scenario(raw, source="tiny", base_dir=tmp_path), tmp_path / "run", driver="processes", launch=launch
    )
    assert report["status"] == "completed", report["failures"]
    policies = {
        party: (details.get("driver") or {}).get("scheduling") for party, details in report["party_details"].items()
    }
    assert policies == {party: "batch" for party in ["curator", "owner-1", "owner-2", "owner-3", "consumer"]}
    assert os.sched_getscheduler(0) != os.SCHED_BATCH  # the caller's own policy is left alone
