"""Golden reports: the deterministic part of a run's report, and the small runs they are taken from.

Before code moves between modules, every shipped scenario is run under both drivers with the
overrides in ``OVERRIDES`` (small enough to take seconds) and ``golden_view`` of its report is
stored as ``tests/golden/<scenario>.<driver>.json`` (``record.py``). ``tests/runtime/test_golden_reports.py``
runs them again and compares: the same seed must give the same view, bit for bit.

The view is the whole report except what differs from run to run or from driver to driver:
timings, process ids, hosts, paths, ports, the driver's own name and launch method, ZeroMQ
heartbeats (their number follows the wall clock), the per-connection details of the processes
driver, and the run folder in the paths of files a protocol saves (``files``). Everything else (status, selection,
metrics, privacy ledgers, parsimony, message counts
and bytes by kind and by party, the data summary, the resolved configuration, checks, each party's
result) is kept, so a changed default or a new report key shows up too.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
HERE = Path(__file__).resolve().parent
DRIVERS = ("inprocess", "processes")

OVERRIDES: dict[str, list[str]] = {
    "adult.yaml": ["summarize.rounds=10"],
    "digits.yaml": ["summarize.rounds=10"],
    "mnist.yaml": ["summarize.rounds=10"],
    "paper-adult.yaml": ["summarize.rounds=10", "summarize.features=30"],
    "paper-synthetic.yaml": ["summarize.rounds=10", "summarize.features=30"],
    "pfds-adult.yaml": ["parties.owners=10", "pfds.baseline_agents=2", "data.source.table.rows=2000"],
    "pfds-bank.yaml": ["parties.owners=10", "pfds.baseline_agents=2", "data.source.table.rows=3000"],
    "pfds-bike.yaml": ["parties.owners=10", "pfds.baseline_agents=2", "data.source.table.rows=5000"],
    "pfds-diabetes.yaml": ["parties.owners=5", "pfds.baseline_agents=2"],
    "pfds-synthetic.yaml": ["parties.owners=5", "data.source.table.synthetic.rows=2000"],
    "private-shift.yaml": ["summarize.rounds=10"],
    "quickstart-private.yaml": ["summarize.rounds=10", "summarize.features=30"],
    "quickstart.yaml": ["summarize.rounds=10"],
    "sketch-lifesci.yaml": ["sketch.samples=2000"],
    "sketch-occupancy.yaml": ["sketch.samples=2000"],
    "sketch-quickstart.yaml": ["sketch.samples=2000"],
    "market-serve.yaml": ["sketch.samples=2000"],
    "market-serve-points.yaml": ["summarize.rounds=6", "summarize.features=30"],
    "summarize-buy.yaml": ["summarize.rounds=8", "summarize.features=30"],
    "sketch-uniform.yaml": ["sketch.samples=2000"],
    "stc-mnist.yaml": [],
    "stc-office.yaml": [],
    "stc-superconductivity.yaml": [],
    "stc-synthetic.yaml": [],
}
"""Per shipped scenario, the ``--set`` overrides that make it a run of seconds. They keep the
scenario's protocol and data source and shrink rounds, owners, sizes and samples."""

DROPPED_TOP = ("timing", "pid_of_runner", "driver", "launch", "transport_security", "history")
"""Report keys left out whole: wall-clock figures, the runner's process id, and what names the
driver (the rest of the report must not depend on it). The per-round history (and the curator's
``rounds`` it is made from) came after the golden files were recorded; tests/runtime/test_history.py
checks it is the same under both drivers."""


def golden_path(scenario: str, driver: str) -> Path:
    """Where the golden view of ``scenario`` (a file name such as ``quickstart.yaml``) under
    ``driver`` is stored."""
    return HERE / f"{Path(scenario).stem}.{driver}.json"


def golden_view(report: dict[str, Any]) -> dict[str, Any]:
    """The part of ``report`` that the scenario and its seed determine: equal for two runs of the
    same scenario, under either driver. ``report`` is not changed."""
    view = {key: copy.deepcopy(value) for key, value in report.items() if key not in DROPPED_TOP}
    transport = (view.get("config") or {}).get("transport")
    if isinstance(transport, dict):
        transport.pop("curve_keys", None)  # the run folder's key folder under the processes driver
    if isinstance(view.get("versions"), dict):
        view["versions"].pop("marketplace", None)  # the package's release number; the wire protocol's stays
    messages = view.get("messages")
    if isinstance(messages, dict):
        messages.pop("heartbeats", None)  # ZeroMQ heartbeats: one per interval of wall time
    view["parties"] = [
        {key: party.get(key) for key in ("id", "role", "status")} for party in report.get("parties") or []
    ]
    details = view.get("party_details")
    if isinstance(details, dict):
        for detail in details.values():
            for key in ("driver", "log", "timing"):  # connection counters, log path, timings
                detail.pop(key, None)
            if isinstance(detail.get("result"), dict):
                detail["result"].pop("rounds", None)  # a curator's per-round records (see DROPPED_TOP)
    if isinstance(view.get("files"), dict):  # files a protocol saved in the run folder: their names in it
        view["files"] = _names_in_run_folder(view["files"])
    return view


def _names_in_run_folder(files: Any) -> Any:
    """``files`` with every path cut to its last two parts (``sketches/owner-1.npz``): the run
    folder it lies in differs from run to run."""
    if isinstance(files, dict):
        return {key: _names_in_run_folder(value) for key, value in files.items()}
    if isinstance(files, list):
        return [_names_in_run_folder(value) for value in files]
    return "/".join(Path(files).parts[-2:]) if isinstance(files, str) else files
