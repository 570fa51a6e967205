"""The marketplace of parties' own data from Python: ``marketplace.serve(..., owner_data=DIR)`` and
``marketplace.request(..., data=..., test=...)`` with a path or with arrays, and a target that does
not fit the schema refused before anything is sent."""

from __future__ import annotations

import socket
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

import marketplace
from marketplace.data.own_files import OwnDataError

pytestmark = pytest.mark.slow

SKETCH = ROOT / "scenarios" / "sketch-quickstart.yaml"
SETTINGS = {"sketch.epsilon": 0.3, "sketch.samples": 2000}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_and_request_with_the_parties_own_files_and_arrays(tmp_path):
    own = tmp_path / "own-data"
    made = subprocess.run(
        [sys.executable, "-m", "marketplace", "shares", str(SKETCH), "--out", str(own)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert made.returncode == 0, made.stderr
    state = tmp_path / "market"
    with marketplace.serve(
        own / "market.yaml",
        state=state,
        consumers=["alice"],
        owner_data=own,
        endpoint=f"tcp://127.0.0.1:{free_port()}",
        session_port=free_port(),
    ) as market:
        kit = state / "consumers" / "alice"
        by_path = marketplace.request(
            SKETCH,
            market=market.endpoint,
            keys=kit,
            overrides=SETTINGS,
            data=own / "target.csv",
            test=own / "test.csv",
            out=tmp_path / "by-path",
        )
        target = np.loadtxt(own / "target.csv", delimiter=",", skiprows=1, usecols=range(5))
        labels = np.loadtxt(own / "target.csv", delimiter=",", skiprows=1, usecols=5, dtype=int)
        groups = np.genfromtxt(own / "target.csv", delimiter=",", skip_header=1, usecols=6, dtype=str)
        by_arrays = marketplace.request(
            SKETCH,
            market=market.endpoint,
            keys=kit,
            overrides=SETTINGS,
            data={"X": target, "y": labels, "group": groups},
            out=tmp_path / "by-arrays",
        )
        with pytest.raises(OwnDataError, match=r"consumer \(target\): .*array X: expected shape \(n, 5\)"):
            marketplace.request(
                SKETCH,
                market=market.endpoint,
                keys=kit,
                overrides=SETTINGS,
                data=(target[:, :3], labels),
                out=tmp_path / "refused",
            )
        boxless = marketplace.request(  # a request that leaves out its box: the market's schema gives it
            {"name": "ask", "protocol": "sketch", "sketch": {"map": {"kind": "rff", "features": 200, "sigma": 0.5}}},
            market=market.endpoint,
            keys=kit,
            overrides=SETTINGS,
            data=own / "target.csv",
            out=tmp_path / "boxless",
        )
        sessions = market.sessions
    assert boxless.completed and boxless.raw["config"]["sketch"]["lower"] == [-12.0] * 5
    assert boxless.raw["map"]["attributes"] == ["f0", "f1", "f2", "f3", "f4"]  # the schema's columns name them
    for report in (by_path, by_arrays):
        assert report.completed and report.raw["deployment"]["data"] == "own"
        assert report.raw["lifetime"]["consumer"] == "alice"
    assert len(sessions) == 3  # the refused target never reached the marketplace
    assert (tmp_path / "by-arrays" / "own-target.npz").stat().st_mode & 0o077 == 0  # the consumer's rows: its own
