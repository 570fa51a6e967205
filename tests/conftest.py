"""Shared fixtures: small scenarios, the shared data folder, a runner for the CLI as a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
needs_shared_data = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=f"the public datasets folder {SHARED_DATA} is absent")
"""Marks a test that reads ../shared/data (skipped, saying why, when the folder is absent)."""


def run_cli(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`marketplace ARGS...` as a new user would run it, in its own process."""
    return subprocess.run([sys.executable, "-m", "marketplace", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


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
            "source": {"kind": "covariate_shift", "covariate_shift": {"dim": 3, "components": 4, "rows_per_component": 40}},
            "partition": {"scheme": "by_group", "skew": 0.7},
            "consumer": {"target_groups": [0], "target_share": 0.5, "validation_size": 8, "test_size": 10},
            "seed_set": {"groups": [3], "size": 4},
        },
        "summarize": {"rounds": 6, "gamma": 0.5, "features": 30, "baselines": [], **summarize},
        "transport": {"heartbeat_interval_s": 0.2, "heartbeat_timeout_s": 5.0, "start_timeout_s": 30.0},
    }
    return raw
