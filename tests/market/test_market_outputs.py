"""What a market shows its user: docs/market.md's market files are valid (and the one that sells
points plays), each quality is labelled with the way it truly points, sales.png names its axes and
counts in whole numbers, and the terminal tables never cut an id, however narrow the terminal."""

from __future__ import annotations

import io
import re

import matplotlib
import pytest
import yaml
from conftest import ROOT
from rich.console import Console

from marketplace import plugins
from marketplace.market import play
from marketplace.market.plots import quality_figure, sales_figure
from marketplace.market.quality import better, quality_label
from marketplace.market.spec import _quality_columns, check_worlds, parse_market
from marketplace.market.tables import print_tables, tables

matplotlib.use("Agg")

GUIDE = ROOT / "docs" / "market.md"


def market_blocks() -> list[dict]:
    """Every ```yaml block of docs/market.md, parsed."""
    text = GUIDE.read_text(encoding="utf-8")
    return [yaml.safe_load(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def points_block() -> dict:
    """docs/market.md's market file that sells points (the one with a summarize request)."""
    return next(b for b in market_blocks() if any(r["protocol"] == "summarize" for r in b["requests"]))


@pytest.fixture(scope="module")
def points(tmp_path_factory):
    """docs/market.md's points market, played in-process."""
    return play(points_block(), tmp_path_factory.mktemp("points") / "m", driver="inprocess")


def test_every_market_file_of_the_guide_reads_and_builds_its_data():
    blocks = market_blocks()
    assert len(blocks) >= 2
    for raw in blocks:
        spec = parse_market(raw, source="docs/market.md", base_dir=ROOT)
        check_worlds(spec)
    assert {"sketch", "stc", "pfds", "summarize"} <= {r["protocol"] for b in blocks for r in b["requests"]}


def test_the_guides_points_market_plays_and_its_summarize_requests_are_served(points):
    for rule in points.rules:
        rows = points.play(rule)["requests"]
        sold = [row for row in rows if row["protocol"] == "summarize"]
        assert sold and all(row["status"] == "served" and row["sale"]["points_bought"] > 0 for row in sold)


NO_SIDE = {"collapsed", "lambda", "released", "k", "released_centers", "sharers", "rho", "rho_embeddings", "rounds"}
"""Quality columns that are counts or settings: neither side of them is better."""


@pytest.mark.parametrize("protocol", ["sketch", "stc", "pfds", "summarize"])
def test_every_quality_column_reads_its_direction_from_its_name(protocol):
    for column in _quality_columns(protocol):
        side = better(column)
        if column.endswith(("accuracy", "auc", "spearman")):  # scores: fraction right, ROC area, rank correlation
            assert side == "higher", column
        elif column in NO_SIDE:
            assert side is None, column
        else:  # errors, costs, MMD^2 and its increase over greedy's, relative distances
            assert side == "lower", column
    assert better(plugins.exchange(protocol).sweep_headline[0]) == "lower"  # every headline is an error


def test_accuracy_is_labelled_higher_is_better_in_the_tables_and_the_figure(points):
    assert quality_label("accuracy") == "accuracy (higher is better)"
    rule_table, request_table, *_ = tables(points.raw)
    labels = [row[0] for row in rule_table[2] if row[0].startswith("mean ")]
    assert "mean summarize accuracy (served; higher is better)" in labels
    assert "mean sketch moment1_mre (served; lower is better)" in labels
    assert "summarize accuracy (higher is better)" in request_table[0]
    assert "sketch moment1_mre (lower is better)" in request_table[0]
    text = (points.folder / "market.md").read_text(encoding="utf-8")
    assert "accuracy (higher is better)" in text and "accuracy (lower" not in text
    fig = quality_figure(points.raw)
    try:
        ylabels = {axis.get_title(): axis.get_ylabel() for axis in fig.axes}
    finally:
        matplotlib.pyplot.close(fig)
    assert ylabels == {"summarize": "accuracy (higher is better)", "sketch": "moment1_mre (lower is better)"}


def test_sales_figure_names_its_axes_and_counts_points_in_whole_numbers(points):
    fig = sales_figure(points.raw)
    assert fig is not None
    try:
        fig.canvas.draw()
        rows = len(fig.axes) // len(points.rules)
        assert rows == 2
        for axis in fig.axes:
            assert axis.get_ylabel().strip()
            assert all(float(t).is_integer() for t in axis.get_xticks()), axis.get_xticks()
        points_axes = [a for a in fig.axes if a.get_title().endswith("points sold")]
        assert len(points_axes) == len(points.rules)
        for axis in points_axes:
            assert "count" in axis.get_ylabel()
            assert all(float(t).is_integer() for t in axis.get_yticks()), axis.get_yticks()
        for axis in fig.axes:
            if axis.get_title().endswith("(posted prices)"):
                assert "price" in axis.get_ylabel() and axis.get_xlabel().strip()
    finally:
        matplotlib.pyplot.close(fig)


@pytest.mark.parametrize("width", [80, 60])
def test_the_terminal_tables_show_every_id_whole_on_a_narrow_console(points, width):
    out = io.StringIO()
    print_tables(Console(file=out, width=width, color_system=None), points.raw)
    shown = out.getvalue()
    ids = [s["id"] for s in points.raw["stream"]] + list(points.raw["budgets"])
    ids += [s["consumer"] for s in points.raw["stream"]]
    missing = [i for i in ids if not re.search(rf"(?<![\w-]){re.escape(i)}(?![\w-])", shown)]
    assert not missing, shown
    assert "…" not in shown  # nothing is cut: what does not fit wraps
