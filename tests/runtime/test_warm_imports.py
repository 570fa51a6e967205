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
