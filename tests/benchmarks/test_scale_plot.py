"""The scale figure of ``benchmarks/scale_plot.py`` from a few made-up rows (no benchmark runs): its
lines land in the right panels with the right points, and the file written is a PNG."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from conftest import ROOT


@pytest.fixture
def scale_plot(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module("scale_plot")


def one_shot(owners: int, driver: str, round_ms: float, cpu_us: float) -> dict:
    """A ``bench_scale.py`` run row, with the keys the figure reads."""
    return {
        "owners": owners,
        "driver": driver,
        "exit": 0,
        "rounds": 5,
        "run_wall_s": 1.0,
        "cpu_s": 2.0,
        "peak_pss_mb": 100.0,
        "round_ms": round_ms,
        "rounds_cpu_us_per_owner_round": cpu_us,
    }


def served(owners: int, p50_s: float, owner_cpu_s: float, server_cpu_s: float) -> dict:
    """A ``bench_serve.py`` row, with the keys the figure reads."""
    return {
        "owners": owners,
        "protocol": "sketch",
        "consumers": 1,
        "requests": 3,
        "p50_s": p50_s,
        "owner_cpu_s_per_request": owner_cpu_s,
        "server_cpu_s_per_request": server_cpu_s,
    }


ROWS = [
    one_shot(4, "inprocess", 2.0, 50.0),
    one_shot(16, "inprocess", 5.0, 40.0),
    one_shot(4, "processes", 4.0, 80.0),
    one_shot(16, "processes", 9.0, 60.0),
    {"owners": 4, "pairs": 1, "ratio_wall": 1.5},  # a ratio row: not drawn
    served(4, 0.5, 0.04, 0.01),
    served(16, 0.8, 0.16, 0.016),
]
PEERS = [{"engine": "flower-sim", "owners": 16, "rounds": 5, "ms_per_round": 300.0, "cpu_s": 9.0}]


def test_the_figure_draws_latency_and_cpu_per_owner_against_k(scale_plot: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "scale.png"
    fig = scale_plot.draw(ROWS, path, PEERS, title="2 cores")

    latency, cpu = fig.axes
    assert (latency.get_xlabel(), latency.get_ylabel()) == ("owners K", "latency (ms)")
    assert (cpu.get_xlabel(), cpu.get_ylabel()) == ("owners K", "CPU per owner (µs)")
    assert all(ax.get_xscale() == ax.get_yscale() == "log" for ax in (latency, cpu))
    drawn = {ax: {line.get_label(): list(zip(*line.get_data())) for line in ax.lines} for ax in (latency, cpu)}
    assert drawn[latency] == {
        "one-shot round: inprocess": [(4, 2.0), (16, 5.0)],
        "one-shot round: processes": [(4, 4.0), (16, 9.0)],
        "one-shot round: flower-sim (Flower)": [(16, 300.0)],
        "served request p50: sketch, 1 consumer": [(4, 500.0), (16, 800.0)],
    }
    assert drawn[cpu] == {
        "one-shot, per round: inprocess": [(4, 50.0), (16, 40.0)],
        "one-shot, per round: processes": [(4, 80.0), (16, 60.0)],
        "served, per request: owners (sketch, 1 consumer)": [(4, 10_000.0), (16, 10_000.0)],  # 40 ms / 4, 160 ms / 16
        "served, per request: server (sketch, 1 consumer)": [(4, 2_500.0), (16, 1_000.0)],
    }
    colour = {line.get_label(): line.get_color() for ax in (latency, cpu) for line in ax.lines}
    assert colour["one-shot round: inprocess"] == colour["one-shot, per round: inprocess"]  # one source, one colour
    assert (
        colour["served request p50: sketch, 1 consumer"] == colour["served, per request: owners (sketch, 1 consumer)"]
    )
    assert len(set(colour.values())) == 5  # inprocess, processes, Flower, served, server
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_flowers_failed_runs_and_other_engines_are_left_out(scale_plot: ModuleType, tmp_path: Path) -> None:
    peers = tmp_path / "flower.json"
    peers.write_text(
        '{"runs": [{"engine": "flower-sim", "owners": 4, "status": "completed", "ms_per_round": 1.0},'
        ' {"engine": "flower-sim", "owners": 16, "status": "failed"},'
        ' {"engine": "ours-inprocess", "owners": 4, "status": "completed", "ms_per_round": 1.0}]}'
    )
    assert [(r["engine"], r["owners"]) for r in scale_plot.read_peers([str(peers)])] == [("flower-sim", 4)]


def test_the_command_draws_from_json_files(tmp_path: Path) -> None:
    """``python benchmarks/scale_plot.py PNG JSON...``: the figure from the benchmarks' --json files."""
    rows = [one_shot(64, "inprocess", 5.0, 60.0), one_shot(256, "inprocess", 18.0, 45.0)]
    (tmp_path / "scale.json").write_text(json.dumps(rows))
    (tmp_path / "serve.json").write_text(json.dumps([served(64, 0.6, 0.25, 0.13)]))
    png = tmp_path / "figure.png"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "scale_plot.py"),
            str(png),
            *(str(tmp_path / n) for n in ("scale.json", "serve.json")),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
