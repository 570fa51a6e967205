"""Golden reports: every shipped scenario, run small under each driver, gives the report recorded
in tests/golden/ (the deterministic part of it, ``golden.view.golden_view``): every value equal, floats
to 1e-9 relative (:data:`FLOAT_REL`).

They guard moves of code that must not change behaviour. A change that is meant to alter reports
re-records them (``PYTHONPATH=$PWD python3 tests/golden/record.py [--only NAME]``) and says why in
its commit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, needs_data
from golden.view import DRIVERS, HERE, OVERRIDES, golden_path, golden_view

from marketplace.market.spec import is_market_file
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario

SHIPPED = sorted(path.name for path in (ROOT / "scenarios").glob("*.yaml") if not is_market_file(path))


def datasets_of_scenario(name: str) -> tuple[str, ...]:
    """The public datasets the shipped scenario ``name`` reads (none for generated data)."""
    from marketplace.data.config import SourceConfig
    from marketplace.data.sources import datasets_of
    from marketplace.scenario.load import read_yaml
    from marketplace.schema import build

    raw = read_yaml((ROOT / "scenarios" / name).read_text())
    return tuple(datasets_of(build(SourceConfig, (raw.get("data") or {}).get("source") or {})))


def golden_cases() -> list:
    """One case per golden file, marked ``slow`` under the processes driver and ``data`` (skipped
    with the fetch command when absent) when the scenario reads a public dataset."""
    cases = []
    for path in sorted(HERE.glob("*.json")):
        stem, driver = path.stem.rsplit(".", 1)
        name = f"{stem}.yaml"
        marks = [pytest.mark.slow] if driver == "processes" else []
        if name in SHIPPED and (datasets := datasets_of_scenario(name)):
            marks += [pytest.mark.data, needs_data(*datasets)]
        cases.append(pytest.param(name, driver, marks=marks, id=path.stem))
    return cases


def differences(got: Any, want: Any, path: str = "") -> list[str]:
    """Every key path where ``got`` and ``want`` differ, with both values, depth first in key order."""
    if isinstance(got, dict) and isinstance(want, dict):
        found = []
        for key in sorted(set(got) | set(want), key=str):
            where = f"{path}.{key}"
            if key not in got:
                found.append(f"{where}: missing from the report (golden: {_short(want[key])})")
            elif key not in want:
                found.append(f"{where}: new in the report ({_short(got[key])}), not in the golden file")
            else:
                found += differences(got[key], want[key], where)
        return found
    if isinstance(got, list) and isinstance(want, list):
        found = [] if len(got) == len(want) else [f"{path}: {len(got)} items, golden has {len(want)}"]
        for index, (a, b) in enumerate(zip(got, want)):
            found += differences(a, b, f"{path}[{index}]")
        return found
    if (
        isinstance(got, float)
        and isinstance(want, float)
        and math.isclose(got, want, rel_tol=FLOAT_REL, abs_tol=FLOAT_ABS)
    ):
        return []
    if got != want or type(got) is not type(want):
        return [f"{path or '<report>'}: got {_short(got)}, golden {_short(want)}"]
    return []


FLOAT_REL, FLOAT_ABS = 1e-9, 1e-12
"""Two floats this close are the same figure: the last bits of a sum or a BLAS product differ between
numpy and BLAS builds (numpy 2.4 moved some figures by 1e-15 relative), and a golden report guards
behaviour, not the machine's arithmetic. Anything the seed decides (selections, counts, bytes,
which owner, every text) must still be equal."""


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


@pytest.mark.parametrize("name, driver", golden_cases())
def test_report_matches_golden(name: str, driver: str, tmp_path: Path):
    assert name in OVERRIDES, f"{name}: a golden file but no shipped scenario with overrides in golden/view.py"
    report = run_scenario(load_scenario(ROOT / "scenarios" / name, OVERRIDES[name]), tmp_path / "run", driver=driver)
    got = json.loads(json.dumps(golden_view(report)))  # as stored: JSON types, floats round-trip exactly
    want = json.loads(golden_path(name, driver).read_text())
    found = differences(got, want)
    assert not found, (
        f"{name} under {driver} (overrides {OVERRIDES[name]}) differs from its golden report in "
        f"{len(found)} place(s); first: {found[0]}\n" + "\n".join(found[:25])
    )


def test_every_shipped_scenario_has_golden_reports():
    assert sorted(OVERRIDES) == SHIPPED, "golden/view.py OVERRIDES must name exactly the shipped scenarios"
    missing = [
        golden_path(name, driver).name
        for name in SHIPPED
        for driver in DRIVERS
        if not golden_path(name, driver).is_file()
    ]
    assert not missing, f"no golden report for {missing}: record them with tests/golden/record.py --only NAME"
    stale = sorted(
        {path.name for path in HERE.glob("*.json")} - {golden_path(n, d).name for n in SHIPPED for d in DRIVERS}
    )
    assert not stale, f"golden reports of no shipped scenario and driver: {stale}"


def test_differences_names_the_first_differing_key_path():
    want = {"metrics": {"mmd2": 0.125, "baselines": {"uniform": [1, 2]}}, "status": "completed"}
    got = {"metrics": {"mmd2": 0.1250001, "baselines": {"uniform": [1, 3]}}, "status": "completed", "extra": 1}
    assert differences(want, want) == []
    assert differences(got, want) == [
        ".extra: new in the report (1), not in the golden file",
        ".metrics.baselines.uniform[1]: got 3, golden 2",
        ".metrics.mmd2: got 0.1250001, golden 0.125",
    ]
    assert differences({"mmd2": 0.12500000000000003}, {"mmd2": 0.125}) == []  # the last bits of the arithmetic
    assert differences({"a": 1}, {"a": 1.0}) == [".a: got 1, golden 1.0"]


def test_golden_view_leaves_out_what_differs_between_runs_and_keeps_the_rest():
    report = {
        "status": "completed",
        "driver": "processes",
        "launch": "forkserver",
        "pid_of_runner": 41,
        "timing": {"wall_s": 1.5},
        "transport_security": "curve",
        "metrics": {"mmd2": 0.1},
        "versions": {"marketplace": "0.1.0", "wire_protocol": 2},
        "config": {"seed": 3, "transport": {"curve_keys": "/tmp/x/run/keys", "heartbeat_interval_s": 0.5}},
        "messages": {"total": 9, "heartbeats": {"sent": 4}, "by_kind": {"bid": {"count": 4, "bytes": 528}}},
        "parties": [{"id": "owner-1", "role": "owner", "status": "completed", "pid": 77, "host": "vm", "exit_code": 0}],
        "party_details": {
            "owner-1": {
                "result": {"end_status": "completed"},
                "driver": {"io_s": 0.1},
                "log": "/tmp/a.log",
                "timing": {},
            }
        },
        "files": {"sketches": {"merged": "/tmp/golden-abc/run/sketches/merged.npz"}},
    }
    kept = json.loads(json.dumps(report))
    assert golden_view(report) == {
        "status": "completed",
        "metrics": {"mmd2": 0.1},
        "versions": {"wire_protocol": 2},
        "config": {"seed": 3, "transport": {"heartbeat_interval_s": 0.5}},
        "messages": {"total": 9, "by_kind": {"bid": {"count": 4, "bytes": 528}}},
        "parties": [{"id": "owner-1", "role": "owner", "status": "completed"}],
        "party_details": {"owner-1": {"result": {"end_status": "completed"}}},
        "files": {"sketches": {"merged": "sketches/merged.npz"}},
    }
    assert report == kept  # the report itself is not changed
