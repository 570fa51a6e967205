"""Golden reports: the deterministic part of a run's report, and the small runs they are taken from.

Every shipped scenario is run with the overrides in ``OVERRIDES`` (small enough to take seconds)
and ``golden_view`` of its report is stored as ``tests/golden/<scenario>.json`` (``record.py``).
``tests/runtime/test_golden_reports.py`` runs each again under both drivers and compares with that one
file: the same seed must give the same view whichever driver moved the messages.

The view is the whole report except what differs from run to run or from driver to driver:
timings, process ids, hosts, paths, ports, the driver's own name and launch method, ZeroMQ
heartbeats (their number follows the wall clock), the per-connection details of the processes
driver, and the run folder in the paths of files a protocol saves (``files``). Everything else (status, selection,
metrics, privacy ledgers, parsimony, message counts
and bytes by kind and by party, the data summary, the resolved configuration, checks, each party's
result) is kept, so a changed default or a new report key shows up too.

Two kinds of figure are left out too, because the project's supported libraries (numpy, scipy,
scikit-learn, between the lower bounds in pyproject.toml and their newest releases) legitimately
disagree on them while the contract does not change: the iteration counts of library solvers
(:data:`LIBRARY_INTERNAL`), and the content digests of points whose features are computed with BLAS
(:data:`computed_digest`). Floats are compared by :func:`tolerance_of` the computation that made them.
"""

from __future__ import annotations

import copy
import fnmatch
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


LIBRARY_INTERNAL = ("*.projections.covariance.iterations",)
"""Key paths (fnmatch patterns over ``.a.b[3].c`` paths) of figures that belong to a library's
solver, not to the contract: the number of iterations scipy's L-BFGS-B takes to the joint projection's
tolerance differs between scipy releases (8, 9 or 10 on the same input) while the answers agree
to that tolerance. They are left out of the view; the report schema still checks their type."""

FLOAT_REL, FLOAT_ABS = 1e-9, 1e-12
"""Two floats this close are the same figure: the last bits of a sum or a BLAS product differ between
numpy and BLAS builds (numpy 2.4 moved some figures by 1e-15 relative), and a golden report guards
behaviour, not the machine's arithmetic. Anything the seed decides (selections, counts, bytes,
which owner, every text) must still be equal."""

SOLVER_FIGURES: tuple[tuple[str, float, float, str], ...] = (
    ("*.model.coef[[]*[]]", 1e-6, 1e-9, "pfds' scikit-learn fits (lbfgs, liblinear) stop at their own tolerance"),
    ("*.model.intercept", 1e-6, 1e-9, "pfds' scikit-learn fits (lbfgs, liblinear) stop at their own tolerance"),
    ("*.estimates.covariance[[]*", 1e-6, 1e-9, "sketch's joint projection: scipy's L-BFGS-B to a gap of 1e-10"),
    ("*.estimates.variances[[]*", 1e-6, 1e-9, "sketch's joint projection: scipy's L-BFGS-B to a gap of 1e-10"),
    ("*.estimates.moments.*", 1e-6, 1e-9, "sketch's joint projection: scipy's L-BFGS-B to a gap of 1e-10"),
    ("*.estimates.projections.*.max_change", 1e-6, 1e-9, "the largest move of that projection"),
    ("*.metrics.errors.*", 1e-6, 1e-9, "sketch's errors of the projected answers against the truth"),
)
"""Figures made by an iterative solver, (pattern, rel_tol, abs_tol, why): two supported library
releases stop it at different points within its own tolerance, so its outputs agree to about
1e-9 relative (seen: 2e-9 between scipy 1.10 and 1.17, 1e-8 between scikit-learn 1.6 and 1.9), not
to the last bits. Everything the solver's answer then decides exactly (a prediction, a selection,
a count) is still compared exactly."""


def tolerance_of(path: str) -> tuple[float, float]:
    """(rel_tol, abs_tol) for the float at key path ``path`` (``.estimates.covariance[7][7]``)."""
    for pattern, rel, absolute, _why in SOLVER_FIGURES:
        if fnmatch.fnmatchcase(path, pattern):
            return rel, absolute
    return FLOAT_REL, FLOAT_ABS


def golden_path(scenario: str) -> Path:
    """Where the golden view of ``scenario`` (a file name such as ``quickstart.yaml``) is stored: one
    file for both drivers, since the view must not depend on the driver."""
    return HERE / f"{Path(scenario).stem}.json"


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
                if isinstance(detail.get("simulator_view"), dict):  # what a party kept to itself: the same
                    detail["simulator_view"].pop(key, None)
                    if not detail["simulator_view"]:
                        del detail["simulator_view"]
            if isinstance(detail.get("result"), dict):
                detail["result"].pop("rounds", None)  # a curator's per-round records (see DROPPED_TOP)
    if isinstance(view.get("files"), dict):  # files a protocol saved in the run folder: their names in it
        view["files"] = _names_in_run_folder(view["files"])
    for selection in (view.get("selection"), ((details or {}).get("curator") or {}).get("result", {}).get("selection")):
        if isinstance(selection, list):
            selection[:] = [computed_digest(entry) for entry in selection]
    return _without(view, LIBRARY_INTERNAL)


def computed_digest(entry: Any) -> Any:
    """A summarize selection entry ``[owner, serial, content key]`` as ``[owner, serial]``: the content
    key hashes the point's float bytes, and where features are computed (mnist's random projection, one
    BLAS product) their last bits differ between numpy builds. Which owner's which point was selected,
    in which order, is the selection, and stays exact: the owner's serial -> row map (its
    ``simulator_view.result.sent_rows``) names the row."""
    return entry[:2] if isinstance(entry, list) and len(entry) == 3 and isinstance(entry[2], str) else entry


def _without(value: Any, patterns: tuple[str, ...], path: str = "") -> Any:
    """``value`` without the keys whose path matches one of ``patterns`` (changed in place)."""
    if isinstance(value, dict):
        for key in list(value):
            where = f"{path}.{key}"
            if any(fnmatch.fnmatchcase(where, pattern) for pattern in patterns):
                del value[key]
            else:
                _without(value[key], patterns, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _without(item, patterns, f"{path}[{index}]")
    return value


def _names_in_run_folder(files: Any) -> Any:
    """``files`` with every path cut to its last two parts (``sketches/owner-1.npz``): the run
    folder it lies in differs from run to run."""
    if isinstance(files, dict):
        return {key: _names_in_run_folder(value) for key, value in files.items()}
    if isinstance(files, list):
        return [_names_in_run_folder(value) for value in files]
    return "/".join(Path(files).parts[-2:]) if isinstance(files, str) else files
