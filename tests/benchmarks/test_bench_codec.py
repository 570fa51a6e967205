"""The codec benchmark's smoke run: the script runs end to end, against a baseline too, so a change
to the codec's API or the frames breaks this test rather than a benchmark nobody runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "bench_codec.py"


def test_bench_codec_smoke_run_measures_every_frame_against_a_baseline(tmp_path: Path) -> None:
    out = tmp_path / "codec.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--smoke", "--baseline", str(ROOT), "--json", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert figures["smoke"] is True
    assert set(figures["ours"]) == set(figures["baseline"])
    assert {"bid", "round_open (d=140)", "point (dim=20)", "validation_set (500x20)"} <= set(figures["ours"])
    for row in figures["ours"].values():
        assert row["decode_s"] > 0 and row["precise_s"] > 0 and row["encode_s"] > 0 and row["bytes"] > 0
    assert "speed-up" in done.stdout and "bid" in done.stdout
