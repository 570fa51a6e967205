"""Seconds-long smoke runs of the scale and flood benchmarks, so that a change of the report, the CLI
or the test harness they use breaks a test here instead of a benchmark nobody runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow


def bench(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_bench_scale_smoke(tmp_path):
    out = tmp_path / "scale.json"
    result = bench("bench_scale.py", "--smoke", "--json", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    rows = json.loads(out.read_text())
    runs = {r["driver"]: r for r in rows if "driver" in r}
    assert set(runs) == {"inprocess", "processes"}
    for row in runs.values():
        assert row["status"] == "completed" and row["wall_s"] > 0 and row["cpu_s"] > 0 and row["peak_pss_mb"] > 0
    assert runs["processes"]["consistency"] and runs["processes"]["per_hosted_owner_mb"] > 0
    assert 0 < runs["processes"]["connect_s"] < runs["processes"]["run_wall_s"] and runs["processes"]["round_ms"] > 0
    assert [r for r in rows if "ratio_wall" in r][0]["ratio_wall"] > 0


def test_bench_hostile_smoke(tmp_path):
    out = tmp_path / "hostile.json"
    result = bench("bench_hostile.py", "--smoke", "--json", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    assert row["flood"] == "refused" and row["status"] == "completed" and row["same_selection"]
    assert row["frames_sent"] > 1000 and not row["dropouts"]
