"""Every script in benchmarks/ runs, at a size that takes seconds, and reports what it promises.

A benchmark nobody runs rots: a changed report format or API breaks it silently (bench_runtime.py
once crashed on the report's new per-owner parts). Each test runs one script as a user would
(``python benchmarks/NAME.py ...``, its own process, this checkout on the path) with tiny sizes,
then checks the exit status and the figures it prints or writes. The figures of a smoke run mean
nothing; that the script still produces them is the point. ``test_every_benchmark_has_a_smoke_run``
fails when a new script lands without one (here or in another test file: bench_scale.py and
bench_hostile.py have theirs in test_bench_smoke.py, bench_codec.py in test_bench_codec.py).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, needs_data

BENCHMARKS = ROOT / "benchmarks"
HELPERS = {
    "timing.py",
    "flower_summarize.py",
    "proctree.py",
}  # imported by the scripts (the Flower app of bench_flower.py, /proc readers), not benchmarks


def run_benchmark(script: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, (
        f"{script} exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    )
    return done


def test_every_benchmark_has_a_smoke_run():
    """Every script in benchmarks/ is named, as a string, by some test file that runs it."""
    scripts = {p.name for p in BENCHMARKS.glob("*.py")} - HELPERS
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    unrun = sorted(name for name in scripts if f'"{name}"' not in tests)
    assert unrun == [], f"benchmarks without a smoke run in tests/: {unrun}"


def test_bench_summarize_core_smoke():
    out = run_benchmark("bench_summarize_core.py", "--smoke").stdout
    for name in ("h1.transform", "best_offer", "exact_kernel_greedy"):
        assert name in out


def test_bench_h2_smoke():
    out = run_benchmark("bench_h2.py", "--smoke").stdout
    assert "h2_release q=150" in out and "warm start" in out and "(D_v)" in out


def test_bench_owner_bid_smoke():
    out = run_benchmark("bench_owner_bid.py", "--rows", "2000", "--repeats", "1").stdout
    assert "ratio owner bid / bare matvec" in out


def test_bench_stc_smoke():
    out = run_benchmark("bench_stc.py", "--smoke").stdout
    assert "nna_release 1,000" in out and "kdtree_coreset" in out and "swaps" in out


def test_bench_sketch_smoke():
    out = run_benchmark(
        "bench_sketch.py", "--rows", "20000", "--repeats", "1", "--samples", "2000", "--accuracy", "--trials", "1"
    ).stdout
    assert "RFF.sum_features" in out and "fit_m2m n_s=2,000" in out and "MRE of the first moment" in out


@needs_data("adult")
def test_bench_pfds_smoke():
    out = run_benchmark("bench_pfds.py", "--rows", "3000", "--h-max", "4", "--repeats", "1").stdout
    assert "Adult n=3,000" in out


def test_bench_fuzz_smoke():
    out = run_benchmark("bench_fuzz.py", "--frames", "300", "--per-run", "100").stdout
    assert "crashes                0" in out


def test_bench_parsimony_smoke(tmp_path):
    path = tmp_path / "runs.csv"
    out = run_benchmark(
        "bench_parsimony.py", "--owners", "2,3", "--rounds", "4", "--seeds", "1", "--tau", "grow", "--csv", str(path)
    ).stdout
    assert "rho/K^(1/3)" in out
    rows = list(csv.DictReader(path.open()))
    assert [(r["owners"], r["tau"], r["status"]) for r in rows] == [("2", "2", "completed"), ("3", "3", "completed")]
    for (
        row
    ) in rows:  # the owners' points: one request per round plus the tau requests, at most floor(p / tau) per owner
        assert 4 <= int(row["owner_points"]) <= 4 + int(row["owners"]) * (4 // int(row["tau"]))
        assert float(row["mmd2"]) >= 0 and 0 <= float(row["accuracy"]) <= 1


def test_bench_parsimony_refuses_a_bad_tau():
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_parsimony.py"), "--tau", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "expected an integer >= 1 or 'grow', got '0'" in done.stderr


def test_bench_inprocess_scale_smoke(tmp_path):
    path = tmp_path / "scale.json"
    out = run_benchmark(
        "bench_inprocess_scale.py", "--owners", "8,40", "--rounds", "4", "--private", "--json", str(path)
    ).stdout
    assert "us/owner/round" in out
    runs = json.loads(path.read_text())["runs"]
    assert [(r["owners"], r["status"], r["rounds_done"]) for r in runs] == [(8, "completed", 4), (40, "completed", 4)]
    assert all(r["peak_rss_mb"] > 0 and r["ms_per_round"] > 0 for r in runs)


@pytest.mark.slow
def test_bench_runtime_smoke(tmp_path):
    path = tmp_path / "runtime.json"
    out = run_benchmark("bench_runtime.py", "--smoke", "--json", str(path)).stdout  # every part, K = 2, p = 5
    assert "1. Per-round latency" in out and "2. Transport overhead" in out and "3. Wall time" in out
    figures = json.loads(path.read_text())
    assert {r["driver"] for r in figures["rounds"]} == {"processes-forkserver", "inprocess"}
    assert all(r["completed"] == 1 for r in figures["rounds"])
    # the K = 16 target is judged on the measured floor run, with both subtractions shown beside it
    verdicts = figures["overhead"]["target_by_estimate"]
    assert set(verdicts) == {
        "measured (floor run, compute ~ 0)",
        "by subtraction, contended compute",
        "by subtraction, uncontended compute",
    }
    assert figures["overhead"]["target_met"] == verdicts["measured (floor run, compute ~ 0)"]["met"]
    assert "measured (floor run, compute ~ 0)" in out
    # one configuration for every part: the floor run and both ratio runs are part 1's, made once
    assert sorted(r["label"] for r in figures["runs"] if r.get("reused_from") == "rounds-k2") == [
        "floor-k2",
        "ratio-k2",
        "ratio-k2",
    ]


@pytest.mark.slow
def test_bench_faults_smoke(tmp_path):
    path = tmp_path / "faults.json"
    run_benchmark("bench_faults.py", "--trials", "1", "--rounds", "40", "--json", str(path))
    (trial,) = json.loads(path.read_text())
    assert trial["protocol_completed"] and trial["duplicates"] == 0 and trial["missing_rounds"] == 0


def _busy_loops_of(pid: int) -> list[int]:
    """Processes still running bench_load.py's busy loops for the benchmark process ``pid``."""
    left = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(argv) > 3 and argv[1] == b"-c" and b"watched, limit" in argv[2] and argv[3] == str(pid).encode():
            left.append(int(proc.name))
    return left


def test_bench_load_smoke(tmp_path):
    """One quickstart beside one busy loop: completed, reported, and the loop is gone afterwards."""
    path = tmp_path / "load.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(
        [sys.executable, str(BENCHMARKS / "bench_load.py"), "--smoke", "--json", str(path)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=600)  # a hang guard only
    finally:
        proc.kill()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    assert "1 busy loop(s) beside 1 run(s) of each of: quickstart.yaml" in out and "quickstart" in out
    figures = json.loads(path.read_text())
    assert figures["busy_loops"] == 1
    assert [(r["scenario"], r["completed"], r["total"]) for r in figures["summary"]] == [("quickstart", 1, 1)]
    (run,) = figures["runs"]
    assert run["exit"] == 0 and run["status"] == "completed" and run["owners_lost"] == 0 and run["reasons"] == []
    assert _busy_loops_of(proc.pid) == []


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--runs", "0", "--runs: expected an integer >= 1, got 0"),
        ("--busy", "-1", "--busy: expected an integer >= 0, got -1"),
        ("--scenario", "no-such.yaml", "--scenario: expected a scenario file, got 'no-such.yaml'"),
    ],
)
def test_bench_load_refuses_bad_counts(option, value, expected):
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_load.py"), option, value],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and expected in done.stderr


def test_bench_ledger_smoke(tmp_path):
    path = tmp_path / "ledger.json"
    out = run_benchmark("bench_ledger.py", "--smoke", "--json", str(path)).stdout
    assert "reserve + commit per request" in out and "median ms" in out
    blocks = json.loads(path.read_text())["blocks"]
    assert [b["rows_before"] for b in blocks] == [0, 10] and all(b["median_ms"] > 0 for b in blocks)


def test_bench_flower_smoke(tmp_path):
    """Flower's simulation engine and ours on the same world pick the same points (K = 4, 3 rounds)."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        pytest.skip("bench_flower.py needs Flower (flwr[simulation], Ray): pip install -e '.[compare]'")
    path = tmp_path / "flower.json"
    out = run_benchmark("bench_flower.py", "--smoke", "--json", str(path)).stdout
    assert "ms/round" in out and "flower-sim" in out and "ours-inprocess" in out
    assert "selection identical across engines: yes (2 of 2 completed runs match)" in out
    runs = json.loads(path.read_text())["runs"]
    assert [(r["engine"], r["status"], r["selection_matches"]) for r in runs] == [
        ("flower-sim", "completed", True),
        ("ours-inprocess", "completed", True),
    ]
    assert all(
        len(r["selection"]) == 3 and r["ms_per_round"] > 0 and r["cpu_s"] > 0 and r["peak_pss_mb"] > 0 for r in runs
    )


def test_bench_flower_compares_the_rows_ours_selected_with_flowers(tmp_path, monkeypatch):
    """bench_flower.py compares the (owner, row) points Flower's app picks with ours. A report names each
    point by its serial, never its row, so the script maps serials to rows; each mapped row's features
    and label must hash to the content key the report gives that point. Runs without Flower (the smoke
    run above needs it), so that a report change cannot make the script compare serials with rows."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import bench_flower

    import marketplace
    from marketplace import plugins
    from marketplace.parties import make_world, owner_position
    from marketplace.protocols.summarize.identity import point_key

    overrides = {"parties.owners": 6, "data.partition.scheme": "even", "summarize.rounds": 8, "summarize.baselines": []}
    scenario = marketplace.load(ROOT / "scenarios" / "quickstart.yaml", overrides)
    report = marketplace.run(scenario, tmp_path / "run", driver="inprocess")
    rows = bench_flower.selection_rows(report)
    world = make_world(scenario.config, plugins.exchange("summarize"))
    assert len(rows) == len(report["selection"]) == 8
    for (owner, row), (named, _serial, key) in zip(rows, report["selection"], strict=True):
        data = world.owners[owner_position(scenario.config, owner)]
        assert owner == named and point_key(data.X[row], int(data.y[row])) == key, (owner, row)
    assert [row for _, row in rows] != [serial for _, serial, _ in report["selection"]]


def test_bench_flower_serve_smoke(tmp_path):
    """Runs submitted to a SuperLink that is already up: every run writes its result, the figures are there."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        pytest.skip("bench_flower_serve.py needs Flower (flwr): pip install -e '.[compare]'")
    path = tmp_path / "flower-serve.json"
    out = run_benchmark("bench_flower_serve.py", "--smoke", "--json", str(path), timeout=600).stdout
    assert "2 SuperNodes online" in out and "flwr CLI alone" in out
    (row,) = json.loads(path.read_text())
    assert (row["submitters"], row["runs"], row["completed"], row["owners"], row["rounds"]) == (1, 2, 2, 2, 1)
    assert row["selections_identical"] and row["failed_examples"] == []
    assert 0 < row["p50_s"] <= row["p95_s"] <= row["p99_s"] and row["runs_per_min"] > 0
    assert 0 < row["result_written_p50_s"] < row["p99_s"] and row["owner_cpu_s_per_run"] > 0
    assert f"p50 {row['p50_s']:.3f} s" in out and "completed 2/2" in out


def test_bench_flower_serve_without_flower_names_the_extra():
    """Without Flower the script exits 2 and says how to install it."""
    try:
        import flwr  # noqa: F401

        pytest.skip("Flower is installed: the message for its absence cannot show")
    except ImportError:
        pass
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_flower_serve.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2
    assert "needs Flower" in done.stderr and "pip install -e '.[compare]'" in done.stderr


@pytest.mark.parametrize("curve", ["--curve", "--no-curve"])
def test_bench_wire_smoke(tmp_path, curve):
    """K = 16 owners in 2 owner hosts, 5 rounds of bare frames: the table and the figures are there."""
    path = tmp_path / "wire.json"
    out = run_benchmark("bench_wire.py", "--smoke", curve, "--json", str(path)).stdout
    assert "round_open 1,277 B to each owner, bid 132 B back" in out and "us CPU/owner-round" in out
    assert f"CURVE {'on' if curve == '--curve' else 'off'}" in out
    figures = json.loads(path.read_text())
    (row,) = figures["results"]
    assert row["owners"] == 16 and len(row["runs"]) == 1
    assert row["ms_per_round_min"] <= row["ms_per_round"] <= row["ms_per_round_max"]
    assert row["ms_per_round"] > 0 and row["connect_s"] > 0 and row["cpu_s_per_round"] > 0
    assert row["cpu_us_per_owner_round"] == pytest.approx(1e6 * row["cpu_s_per_round"] / 16)
    assert f"{row['owners']:>6} {row['ms_per_round']:>9.2f}" in out


def test_bench_wire_refuses_a_bad_count():
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_wire.py"), "--hosts", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "--hosts: expected an integer >= 1, got 0" in done.stderr
