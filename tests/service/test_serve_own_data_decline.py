"""A served owner whose file goes bad while it serves declines the session, and its reason, which
the server puts in the consumer's report, is the declared one: the owner's data does not fit the
schema. The value, its line and column and the file's path stay in the owner's agent's log."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from test_own_data_api import SKETCH, free_port  # the served own-data market this test breaks

import marketplace
from marketplace.service.declines import OWN_DATA_REFUSED

pytestmark = pytest.mark.slow

SECRET = "37.123456"


def texts(value) -> list[str]:
    """Every string in a JSON-like ``value``, keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for key, item in value.items() for t in [*texts(key), *texts(item)]]
    if isinstance(value, list):
        return [t for item in value for t in texts(item)]
    return []


def present(state) -> int:
    try:
        return json.loads((state / "server.json").read_text())["owners_present"]
    except (OSError, ValueError, KeyError):
        return 0


def test_a_value_outside_the_schema_reaches_the_consumers_report_as_the_declared_reason_only(tmp_path):
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
        deadline = time.monotonic() + 120
        while present(state) < 4:  # every agent checked its files when it started, and connected
            assert time.monotonic() < deadline, "the owners' agents did not connect"
            time.sleep(0.2)
        lines = (own / "owner-1.csv").read_text().splitlines()
        cells = lines[3].split(",")
        cells[1] = SECRET  # outside the public range [-12, 12]
        lines[3] = ",".join(cells)
        (own / "owner-1.csv").write_text("\n".join(lines) + "\n")
        report = marketplace.request(
            SKETCH,
            market=market.endpoint,
            keys=state / "consumers" / "alice",
            overrides={"sketch.epsilon": 0.3, "sketch.samples": 2000},
            data=own / "target.csv",
            out=tmp_path / "out",
        )
    text = json.dumps(report.raw)
    assert OWN_DATA_REFUSED in text
    assert SECRET not in text
    # nor a rounding of it in any text of the report (its figures are numbers, thousands of them, and some
    # hold the same digits by chance: 2637.1243...)
    assert not [words for words in texts(report.raw) if "37.12" in words]
    assert "line 4" not in text and "'f1'" not in text and str(own) not in text  # where it broke stays home
