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
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_bench_scale_smoke(tmp_path):
    out = tmp_path / "scale.json"
    figure = tmp_path / "curve.png"
    result = bench("bench_scale.py", "--smoke", "--json", str(out), "--plot", str(figure))
    assert result.returncode == 0, result.stderr[-3000:]
    assert figure.stat().st_size > 0 and "CPU us/owner-round" in result.stdout
    rows = json.loads(out.read_text())
    runs = {r["driver"]: r for r in rows if "driver" in r}
    assert set(runs) == {"inprocess", "processes"}
    for row in runs.values():
        assert row["status"] == "completed" and row["wall_s"] > 0 and row["cpu_s"] > 0 and row["peak_pss_mb"] > 0
    assert runs["processes"]["consistency"] and runs["processes"]["per_hosted_owner_mb"] > 0
    assert 0 < runs["processes"]["connect_s"] < runs["processes"]["run_wall_s"] and runs["processes"]["round_ms"] > 0
    assert [r for r in rows if "ratio_wall" in r][0]["ratio_wall"] > 0
    assert runs["inprocess"]["round_ms"] > 0  # timed from the curator's round lines, as for the processes driver
    # the curve again from the JSON alone, with a peer engine's figures beside it
    peers = tmp_path / "peers.json"
    peers.write_text(
        json.dumps(
            {
                "runs": [
                    {
                        "engine": "flower-sim",
                        "owners": 4,
                        "rounds": 5,
                        "ms_per_round": 300.0,
                        "cpu_s": 9.0,
                        "peak_pss_mb": 800.0,
                    }
                ]
            }
        )
    )
    again = bench("bench_scale.py", "--from-json", str(out), "--peers", str(peers))
    assert again.returncode == 0, again.stderr[-3000:]
    lines = [line.split() for line in again.stdout.splitlines()[1:]]
    assert {(line[0], line[1]) for line in lines} == {("4", "inprocess"), ("4", "processes"), ("4", "flower-sim")}


def test_bench_hostile_smoke(tmp_path):
    out = tmp_path / "hostile.json"
    result = bench("bench_hostile.py", "--smoke", "--json", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    assert row["flood"] == "refused" and row["status"] == "completed" and row["same_selection"]
    assert row["frames_sent"] > 1000 and not row["dropouts"]


def test_bench_serve_smoke(tmp_path):
    out = tmp_path / "serve.json"
    figure = tmp_path / "served.png"
    result = bench("bench_serve.py", "--smoke", "--busy", "1", "--json", str(out), "--plot", str(figure))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert figure.read_bytes()[:4] == b"\x89PNG" and f"scale figure drawn: {figure}" in result.stdout
    (row,) = json.loads(out.read_text())
    assert row["consumers"] == 2 and row["requests"] == row["completed"] == 2 and row["busy"] == 1
    assert len(row["delivered"]) == 4 and row["charged_undelivered"] == [] and row["reserved_left"] == []
    assert 0 < row["p50_s"] <= row["p95_s"] <= row["p99_s"] and row["requests_per_min"] > 0
    assert row["owner_cpu_s_per_request"] > 0 and row["server_cpu_s_per_request"] > 0
    assert len(row["latencies_s"]) == 2 and max(row["latencies_s"]) == pytest.approx(row["max_s"], abs=1e-3)
    # the figure again from the JSON alone, as from several runs' files
    again = bench("bench_serve.py", "--from-json", str(out), "--plot", str(tmp_path / "again.png"))
    assert again.returncode == 0 and (tmp_path / "again.png").read_bytes()[:4] == b"\x89PNG", again.stderr[-3000:]


def test_bench_serve_summarize_smoke(tmp_path):
    out = tmp_path / "points.json"
    result = bench(
        "bench_serve.py", "--smoke", "--protocol", "summarize", "--set", "summarize.rounds=4", "--json", str(out)
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    assert row["protocol"] == "summarize" and row["requests"] == row["completed"] == 2


def test_bench_request_shell_smoke(tmp_path):
    out = tmp_path / "shell.json"
    result = bench("bench_request_shell.py", "--smoke", "--json", str(out))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    row, series = json.loads(out.read_text())  # a process per request, then one `request --repeat N` process
    assert row["variant"] == "this" and row["requests"] == row["completed"] == 2
    assert 0 < row["median_connected_s"] < row["median_wall_s"]
    assert series["variant"] == "repeat" and series["exit_status"] == 0
    assert len(series["latencies_s"]) == series["repeat"] and 0 < series["median_latency_s"] < series["wall_s"]
