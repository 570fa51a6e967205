"""The per-round history of every protocol: in the report, in rounds.csv and rounds.png, the same
under both drivers, and true to its definition (summarize's MMD^2 against the exact kernel on the
world's rows, its message counts against the protocol's message pattern, budgets that only grow)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import ROOT, tiny_raw
from golden.view import golden_view

from marketplace.parties import make_world
from marketplace.plugins import exchange
from marketplace.protocols.summarize.kernel import mmd2, prefix_mmd2
from marketplace.reporting.history import (
    CSV_FILE,
    PLOT_FILE,
    PLOTS_ENV,
    empty_history,
    history_section,
    write_history_files,
    write_rounds_csv,
)
from marketplace.runner.report_schema import report_problems
from marketplace.runner.run import run_scenario
from marketplace.scenario import load_scenario
from marketplace.scenario.load import parse_scenario

SMALL: dict[str, tuple[str, list[str]]] = {
    "summarize": ("quickstart.yaml", ["summarize.rounds=8"]),
    "summarize-private": ("quickstart-private.yaml", ["summarize.rounds=8", "summarize.features=30"]),
    "stc": ("stc-synthetic.yaml", ["parties.owners=3"]),
    "sketch": ("sketch-uniform.yaml", ["sketch.samples=2000", "parties.owners=3"]),
    "pfds": ("pfds-synthetic.yaml", ["parties.owners=4", "data.source.table.synthetic.rows=2000"]),
}
"""Per protocol (summarize twice: without and with privacy), a shipped scenario made a run of seconds."""


def _run(case: str, out: Path, driver: str = "inprocess") -> dict[str, Any]:
    name, overrides = SMALL[case]
    return run_scenario(load_scenario(ROOT / "scenarios" / name, overrides), out, driver=driver)


def _as_stored(value: Any) -> Any:
    return json.loads(json.dumps(value))


@pytest.fixture(scope="module")
def inprocess_runs(tmp_path_factory) -> dict[str, tuple[dict[str, Any], Path]]:
    runs = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PLOTS_ENV, "on")  # as for any user (the suite turns the per-run plots off elsewhere)
        for case in SMALL:
            out = tmp_path_factory.mktemp(case) / "run"
            runs[case] = (_run(case, out), out)
    return runs


@pytest.mark.parametrize("case", list(SMALL))
def test_every_protocol_reports_a_history_and_writes_its_files(inprocess_runs, case):
    report, out = inprocess_runs[case]
    assert report["status"] == "completed", report["failures"]
    history = report["history"]
    assert not report_problems(report)
    assert history["rounds"], f"{case}: no round recorded"
    assert history["columns"][0] == history["x"]
    assert set(history["plot"]) <= set(history["columns"]) and set(history["about"]) == set(history["columns"])
    with (out / CSV_FILE).open(newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == history["columns"]
    assert len(rows) == len(history["rounds"]) + 1
    assert [int(r[0]) for r in rows[1:]] == [rec[history["x"]] for rec in history["rounds"]]
    assert (out / PLOT_FILE).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _column(history: dict[str, Any], name: str) -> list[Any]:
    return [record[name] for record in history["rounds"]]


def _non_decreasing(values: list[Any]) -> bool:
    return all(b >= a for a, b in zip(values, values[1:]))


@pytest.mark.parametrize("case", ["summarize", "summarize-private"])
def test_summarize_history_follows_its_definition(inprocess_runs, case):
    report, _ = inprocess_runs[case]
    history = report["history"]
    rounds = len(report["selection"])
    assert _column(history, "round") == list(range(1, rounds + 1))
    assert _column(history, "summary_size") == list(range(1, rounds + 1))  # |D_s| grows by one point a round
    assert all(r >= 1 for r in _column(history, "requests"))
    assert _non_decreasing(_column(history, "bytes_sent"))
    eps = [c for c in history["columns"] if c.startswith("eps[")]
    assert bool(eps) == (case == "summarize-private")
    for column in eps:
        values = _column(history, column)
        assert _non_decreasing(values), f"{column} went down: {values}"
        assert values[-1] == pytest.approx(
            report["privacy"][column[4:-1]]["eps"], rel=1e-12
        )  # nothing spent after the last round
    # the last round's MMD^2 is the consumer's metrics.mmd2 (it scored the summary it received)
    assert history["rounds"][-1]["mmd2"] == pytest.approx(report["metrics"]["mmd2"], rel=1e-9)


def selected_rows(report: dict) -> list[list]:
    """Each point of the selection as [owner, row]: a selection names a point by its owner's serial, and
    the owner's own serial -> row map is what a simulation's report shows as the simulator's view."""
    details = report["party_details"]
    return [[o, details[o]["simulator_view"]["result"]["sent_rows"][k]] for o, k, _ in report["selection"]]


def test_summarize_history_mmd2_is_the_exact_kernel_mmd2_of_each_prefix(inprocess_runs):
    report, _ = inprocess_runs["summarize"]
    scenario = load_scenario(ROOT / "scenarios" / SMALL["summarize"][0], SMALL["summarize"][1])
    world = make_world(scenario.config, exchange("summarize"))
    rows = np.stack([world.owners[int(o.split("-")[1]) - 1].X[r] for o, r in selected_rows(report)])
    gamma = scenario.config.summarize.gamma
    want = [mmd2(rows[:n], world.validation.X, gamma) for n in range(1, len(rows) + 1)]
    assert _column(report["history"], "mmd2") == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_summarize_history_counts_the_curators_messages(inprocess_runs):
    """Non-private, no dropout: by round l the curator sent the target to K owners, l round openings
    to K owners and l requests; the bytes are those frames' (the report's per-kind bytes bound them)."""
    report, _ = inprocess_runs["summarize"]
    owners = report["config"]["parties"]["owners"]
    assert _column(report["history"], "messages_sent") == [
        owners + n * (owners + 1) for n in range(1, len(report["selection"]) + 1)
    ]
    by_kind = report["messages"]["by_kind"]
    sent_by_last_round = sum(by_kind[k]["bytes"] for k in ("target_embedding", "round_open", "request") if k in by_kind)
    assert report["history"]["rounds"][-1]["bytes_sent"] == sent_by_last_round


def test_summarize_less_trusted_history_scores_the_opened_points(tmp_path):
    raw = tiny_raw(curator="less_trusted")
    report = run_scenario(parse_scenario(raw, source="tiny", base_dir=tmp_path), tmp_path / "run", driver="inprocess")
    assert report["status"] == "completed", report["failures"]
    assert len(report["history"]["rounds"]) == len(report["selection"]) == raw["summarize"]["rounds"]
    assert report["history"]["rounds"][-1]["mmd2"] == pytest.approx(report["metrics"]["mmd2"], rel=1e-9)


def test_release_histories_accumulate_in_owner_order(inprocess_runs):
    stc, _ = inprocess_runs["stc"]
    assert _column(stc["history"], "owner") == ["owner-1", "owner-2", "owner-3"]
    centers = _column(stc["history"], "centers")
    assert _column(stc["history"], "centers_total") == list(np.cumsum(centers))
    assert stc["history"]["rounds"][-1]["centers_total"] == stc["metrics"]["released_centers"]
    sketch, _ = inprocess_runs["sketch"]
    assert _column(sketch["history"], "release") == [1, 2, 3]
    counts = _column(sketch["history"], "count")
    assert _column(sketch["history"], "merged_count") == [math.fsum(counts[:i]) for i in range(1, 4)]
    assert _column(sketch["history"], "epsilon") == [sketch["config"]["sketch"]["epsilon"]] * 3


def test_pfds_history_has_one_record_per_phase(inprocess_runs):
    report, _ = inprocess_runs["pfds"]
    history = report["history"]
    assert _column(history, "phase") == [1, 2] and _column(history, "step") == ["trees", "records"]
    assert _column(history, "sharers") == [len(report["trees"]["voters"]), len(report["trees"]["data_sources"])]
    assert history["rounds"][0]["tree_leaves"] == sum(report["trees"]["leaves"].values())
    eps = _column(history, "eps_max")
    assert eps[0] is not None and eps[0] < eps[1]  # the trees spend part of each sharer's budget, the records the rest
    assert eps[1] == max(ledger["eps"] for ledger in report["privacy"].values() if "eps" in ledger)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(SMALL))
def test_history_is_the_same_under_both_drivers(inprocess_runs, case, tmp_path):
    inprocess, _ = inprocess_runs[case]
    processes = _run(case, tmp_path / "run", driver="processes")
    assert processes["status"] == "completed", processes["failures"]
    assert _as_stored(processes["history"]) == _as_stored(inprocess["history"])
    assert (tmp_path / "run" / CSV_FILE).read_text() == (inprocess_runs[case][1] / CSV_FILE).read_text()


# --- the runtime part, without a run ----------------------------------------------------------------


def test_history_section_names_the_field_that_is_wrong():
    with pytest.raises(ValueError, match=r"history.x: expected one of the columns \['a'\], got 'round'"):
        history_section([], x="round", columns=["a"])
    with pytest.raises(ValueError, match=r"history.rounds\[1\]: columns \['b'\] are not among"):
        history_section([{"round": 1}, {"round": 2, "b": 3}], x="round", columns=["round"])
    with pytest.raises(ValueError, match=r"history.plot: expected columns other than 'round'"):
        history_section([], x="round", columns=["round", "a"], plot=["round"])


def test_history_section_orders_columns_and_fills_missing_cells(tmp_path):
    section = history_section(
        [{"v": np.float64(0.5), "round": np.int64(1)}, {"round": 2, "v": float("nan")}],
        x="round",
        columns=["v", "round"],
        plot=["v"],
        about={"v": "a value", "w": "no such column"},
    )
    assert section["columns"] == ["round", "v"]
    assert section["rounds"] == [{"round": 1, "v": 0.5}, {"round": 2, "v": None}]
    assert type(section["rounds"][0]["round"]) is int and section["about"] == {"v": "a value"}
    write_rounds_csv(section, tmp_path / "rounds.csv")
    assert (tmp_path / "rounds.csv").read_text().splitlines() == ["round,v", "1,0.5", "2,"]
    assert empty_history()["rounds"] == [] and empty_history()["columns"] == ["round"]


def test_prefix_mmd2_is_mmd2_of_every_prefix(monkeypatch):
    import marketplace.protocols.summarize.kernel as kernel

    rng = np.random.default_rng(5)
    X, Y = rng.normal(size=(23, 4)), rng.normal(0.4, 1.0, size=(9, 4))
    want = [mmd2(X[:n], Y, 0.3) for n in range(1, 24)]
    assert prefix_mmd2(X, Y, 0.3) == pytest.approx(want, rel=1e-12, abs=1e-14)
    monkeypatch.setattr(kernel, "KERNEL_BLOCK_ELEMENTS", 40)  # many row blocks: the blocks must join up
    assert prefix_mmd2(X, Y, 0.3) == pytest.approx(want, rel=1e-12, abs=1e-14)


def test_node_counts_protocol_frames_for_the_role_but_no_heartbeat():
    from marketplace.messages.kinds import Bye
    from marketplace.roles import CURATOR, Role, Send
    from marketplace.transport.node import Node

    class Sender(Role):
        party_id, role_name = "owner-1", "owner"

        def start(self):
            return [Send(CURATOR, Bye()), Send(CURATOR, Bye())]

        def handle(self, message):
            return []

    node = Node(Sender(), run_id="r", max_message_bytes=1 << 20)
    frames = node.start()
    node.heartbeat(CURATOR)
    assert node.party.traffic.messages_sent == 2
    assert node.party.traffic.bytes_sent == sum(len(f.frame) for f in frames)


def test_golden_view_leaves_the_history_out():
    report = {
        "status": "completed",
        "history": {"rounds": [{"round": 1}]},
        "party_details": {"curator": {"result": {"rounds": [{"round": 1}], "end_reason": "done"}}},
    }
    assert golden_view(report) == {
        "status": "completed",
        "parties": [],
        "party_details": {"curator": {"result": {"end_reason": "done"}}},
    }
    assert report["party_details"]["curator"]["result"]["rounds"]  # the report itself is not changed


@pytest.mark.parametrize("setting, drawn", [("on", True), ("off", False), ("0", False), ("No", False), ("", True)])
def test_round_plots_can_be_turned_off_and_the_csv_stays(inprocess_runs, tmp_path, monkeypatch, setting, drawn):
    report, _ = inprocess_runs["summarize"]
    monkeypatch.setenv(PLOTS_ENV, setting)
    written = write_history_files(report, tmp_path)
    assert (tmp_path / CSV_FILE).is_file() and (PLOT_FILE in written) == drawn == (tmp_path / PLOT_FILE).is_file()
