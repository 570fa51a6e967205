"""Golden reports: every shipped scenario, run small in process (and one per protocol under the
processes driver too, :data:`UNDER_PROCESSES`), gives the report recorded in tests/golden/ (the
deterministic part of it, ``golden.view.golden_view``): every count, selection, text and flag equal;
floats to 1e-9 relative (``FLOAT_REL``), or to the tolerance of the solver that made them
(``golden.view.SOLVER_FIGURES``). They hold under the newest releases of numpy, scipy and
scikit-learn and under the lower bounds pyproject.toml states.

They guard moves of code that must not change behaviour. A change that is meant to alter reports
re-records them (``PYTHONPATH=$PWD python3 tests/golden/record.py [--only NAME]``) and says why in
its commit.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from conftest import ROOT, needs_data
from golden.view import DRIVERS, HERE, OVERRIDES, golden_path, golden_view, tolerance_of

from marketplace import plugins
from marketplace.market.spec import is_market_file
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


UNDER_PROCESSES = ("quickstart", "sketch-quickstart", "stc-synthetic", "pfds-synthetic", "market-serve")
"""The goldens also run under the processes driver: one scenario per protocol and the served market.
Every golden file holds one report for both drivers, so the same seed giving the same report whichever
driver moved the messages is checked per protocol here, and per protocol too by the conformance
check ``history_same_under_both_drivers``; running every scenario twice more added a few minutes of
processes and tested the same transport again."""


def golden_cases() -> list:
    """One case per golden file under the in-process driver, and under the processes driver for
    :data:`UNDER_PROCESSES`; marked ``slow`` under the processes driver and ``data`` (skipped with the
    fetch command when absent) when the scenario reads a public dataset."""
    cases = []
    for path in sorted(HERE.glob("*.json")):
        name = f"{path.stem}.yaml"
        for driver in DRIVERS if path.stem in UNDER_PROCESSES else ("inprocess",):
            marks = [pytest.mark.slow] if driver == "processes" else []
            if name in SHIPPED and (datasets := datasets_of_scenario(name)):
                marks += [pytest.mark.data, needs_data(*datasets)]
            cases.append(pytest.param(name, driver, marks=marks, id=f"{path.stem}.{driver}"))
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
    if isinstance(got, float) and isinstance(want, float):
        rel, absolute = tolerance_of(path)
        if math.isclose(got, want, rel_tol=rel, abs_tol=absolute):
            return []
    if got != want or type(got) is not type(want):
        return [f"{path or '<report>'}: got {_short(got)}, golden {_short(want)}"]
    return []


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."


@pytest.mark.parametrize("name, driver", golden_cases())
def test_report_matches_golden(name: str, driver: str, run_cache):
    assert name in OVERRIDES, f"{name}: a golden file but no shipped scenario with overrides in golden/view.py"
    scenario = load_scenario(ROOT / "scenarios" / name, OVERRIDES[name])
    report = run_cache.run_scenario(scenario, driver=driver).report  # the session's run (others read it too)
    got = json.loads(json.dumps(golden_view(report)))  # as stored: JSON types, floats round-trip exactly
    want = json.loads(golden_path(name).read_text())
    found = differences(got, want)
    assert not found, (
        f"{name} under {driver} (overrides {OVERRIDES[name]}) differs from its golden report in "
        f"{len(found)} place(s); first: {found[0]}\n" + "\n".join(found[:25])
    )


def test_each_protocol_has_a_golden_under_the_processes_driver():
    protocols = {load_scenario(ROOT / "scenarios" / f"{stem}.yaml").config.protocol for stem in UNDER_PROCESSES}
    assert protocols == set(plugins.names()), protocols
    assert all((HERE / f"{stem}.json").is_file() for stem in UNDER_PROCESSES)


def test_every_shipped_scenario_has_golden_reports():
    assert sorted(OVERRIDES) == SHIPPED, "golden/view.py OVERRIDES must name exactly the shipped scenarios"
    missing = [golden_path(name).name for name in SHIPPED if not golden_path(name).is_file()]
    assert not missing, f"no golden report for {missing}: record them with tests/golden/record.py --only NAME"
    stale = sorted({path.name for path in HERE.glob("*.json")} - {golden_path(name).name for name in SHIPPED})
    assert not stale, f"golden reports of no shipped scenario: {stale}"


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


def test_a_solver_figure_has_the_solver_tolerance_and_everything_else_the_arithmetic_one():
    coef = {"party_details": {"owner-2": {"result": {"model": {"coef": [0.0012698867363156563]}}}}}
    moved = {"party_details": {"owner-2": {"result": {"model": {"coef": [0.00126988673787147]}}}}}  # 1.2e-9 rel
    assert differences(moved, coef) == []  # a scikit-learn fit stops at its own tolerance
    far = {"party_details": {"owner-2": {"result": {"model": {"coef": [0.00127]}}}}}
    assert len(differences(far, coef)) == 1  # a different fit is still found
    assert differences({"metrics": {"mmd2": 0.125 * (1 + 1e-8)}}, {"metrics": {"mmd2": 0.125}}) != []
    assert tolerance_of(".estimates.covariance[7][7]") == (1e-6, 1e-9)
    assert tolerance_of(".party_details.consumer.result.estimates.variances[8]") == (1e-6, 1e-9)
    assert tolerance_of(".metrics.mmd2") == (1e-9, 1e-12)


def test_the_view_leaves_out_solver_iterations_and_computed_digests_but_keeps_the_selection():
    report = {
        "selection": [["owner-2", 315, "14c7c67ac7c769fcc076cb956e46c831"]],
        "party_details": {"curator": {"result": {"selection": [["owner-2", 315, "14c7c67ac7c769fcc076cb956e46c831"]]}}},
        "estimates": {"projections": {"covariance": {"iterations": 12, "converged": True}, "cdf": {"attributes": [5]}}},
    }
    view = golden_view(report)
    assert view["selection"] == [["owner-2", 315]]
    assert view["party_details"]["curator"]["result"]["selection"] == [["owner-2", 315]]
    assert view["estimates"]["projections"] == {"covariance": {"converged": True}, "cdf": {"attributes": [5]}}
    assert report["selection"][0][2] == "14c7c67ac7c769fcc076cb956e46c831"  # the report itself is not changed
