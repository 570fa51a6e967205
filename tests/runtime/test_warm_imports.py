"""The background import of what a role needs at its end: started only for roles that name such
modules, and waited for before the role imports them itself (two threads importing scikit-learn
at once can leave one of them a partially initialised module)."""

from __future__ import annotations

import subprocess
import sys

from conftest import tiny_raw

from marketplace import plugins
from marketplace.parties import build_role, make_world, party_ids, share_of
from marketplace.scenario import parse_scenario

WAIT = """
import sys, threading
from marketplace import warm_imports
assert "sklearn.svm" not in sys.modules
warm_imports.wait_for_background_imports()  # nothing started: returns at once
warm_imports.load_in_background(("sklearn.svm", "sklearn.pipeline"))
warm_imports.wait_for_background_imports()
assert {"sklearn.svm", "sklearn.pipeline"} <= set(sys.modules)
assert [t.name for t in threading.enumerate() if t.name == "warm-imports"] == []
from sklearn.svm import LinearSVC  # whole, not partially initialised
print("ok")
"""


def test_waiting_returns_once_the_modules_are_loaded():
    out = subprocess.run([sys.executable, "-c", WAIT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_only_the_summarize_consumer_asks_for_warm_imports(tmp_path):
    scenario = parse_scenario(tiny_raw(), source="tiny", base_dir=tmp_path)
    world = make_world(scenario.config, plugins.exchange(scenario.config.protocol))
    wants = {
        p: build_role(
            scenario.config, p, world=share_of(world, p), exchange=plugins.exchange(scenario.config.protocol)
        ).warm_imports
        for p in party_ids(scenario.config)
    }
    assert wants.pop("consumer") == (
        "sklearn.svm",
        "sklearn.pipeline",
        "sklearn.preprocessing",
        "sklearn.metrics.pairwise",
    )
    assert set(wants.values()) == {()}


def test_loaders_started_from_many_threads_run_one_at_a_time_and_every_wait_returns(monkeypatch):
    """A client sending requests from several threads starts a loader per request: each waits for the
    ones before it (two never import at once), and a wait never meets a loader not yet started."""
    import importlib
    import threading
    import time

    from marketplace import warm_imports

    inside, overlaps, errors = [0], [], []
    lock = threading.Lock()

    def slow_import(name: str):
        with lock:
            inside[0] += 1
            overlaps.append(inside[0])
        time.sleep(0.002)
        with lock:
            inside[0] -= 1

    monkeypatch.setattr(importlib, "import_module", slow_import)

    def request() -> None:
        try:
            warm_imports.load_in_background(("a", "b"))
            warm_imports.wait_for_background_imports()
        except Exception as err:  # the race this guards against raised RuntimeError from join()
            errors.append(err)

    threads = [threading.Thread(target=request) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    warm_imports.wait_for_background_imports()
    assert errors == []
    assert len(overlaps) == 32 and max(overlaps) == 1
