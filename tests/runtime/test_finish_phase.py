"""After the curator exits, the runner tells a party still computing (an owner fitting its model
after its ``bye``) from a hung one: the first gets ``transport.finish_timeout_s``, the second is a
straggler after the grace period, and so is a busy process serving a party the curator dropped.

The bounds on ``took`` tell the outcomes apart (given finish_s = 20 s or cut earlier, a child busy
for 30 s), far from the expected times, so a loaded machine does not break them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from marketplace.runner.processes import Child, ProcessRun, _watch, cpu_ticks

BUSY = "import time\nend = time.monotonic() + {s}\nwhile time.monotonic() < end: pass\n"


def child(tmp_path: Path, name: str, code: str, parties: list[str] | None = None) -> Child:
    proc = subprocess.Popen([sys.executable, "-c", code])
    return Child(name, proc, tmp_path / f"{name}.log", parties=parties or [name])


def watch(
    tmp_path: Path,
    others: list[Child],
    *,
    dropouts: set[str] = frozenset(),
    grace_s: float = 0.5,
    finish_s: float = 20.0,
) -> tuple[ProcessRun, float]:
    curator = child(tmp_path, "curator", "pass")
    run = ProcessRun(children=[curator, *others])
    started = time.monotonic()
    try:
        _watch(
            run,
            curator,
            deadline=started + 60,
            grace_s=grace_s,
            on_round=None,
            finish_s=finish_s,
            dropouts=lambda: set(dropouts),
        )
    finally:
        for c in run.children:
            c.proc.kill()
            c.proc.wait()
    return run, time.monotonic() - started


def test_a_party_still_computing_after_the_curator_exits_is_given_time_to_finish(tmp_path):
    run, took = watch(tmp_path, [child(tmp_path, "owner-1..owner-2", BUSY.format(s=4), ["owner-1", "owner-2"])])
    assert run.stragglers == [] and 3.5 < took < 20  # waited for it; the bound is finish_s, not a speed


def test_a_party_that_uses_no_cpu_is_a_straggler_after_the_grace_period(tmp_path):
    run, took = watch(tmp_path, [child(tmp_path, "owner-1", "import time; time.sleep(30)")])
    assert run.stragglers == ["owner-1"] and took < 20  # not given finish_s = 20 s (grace 0.5 s); no speed asserted


def test_a_busy_process_serving_a_dropped_owner_is_a_straggler_after_the_grace_period(tmp_path):
    run, took = watch(
        tmp_path, [child(tmp_path, "owner-1..owner-2", BUSY.format(s=30), ["owner-1", "owner-2"])], dropouts={"owner-2"}
    )
    assert run.stragglers == ["owner-1", "owner-2"] and took < 20  # not given finish_s = 20 s, nor its 30 s of work


def test_finishing_is_bounded_by_finish_timeout(tmp_path):
    run, took = watch(tmp_path, [child(tmp_path, "owner-1", BUSY.format(s=30))], finish_s=2.0)
    assert run.stragglers == ["owner-1"] and 1.5 < took < 20  # cut at finish_s = 2 s, not after its 30 s of work


def test_cpu_ticks_of_a_gone_process_is_none():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert cpu_ticks(proc.pid) is None
