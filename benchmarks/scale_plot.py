"""The scale figure: latency and CPU per owner against the number of owners K, one-shot and served.

Shared by ``bench_scale.py --plot`` and ``bench_serve.py --plot``, and a command of its own that draws
one figure from the ``--json`` files of both (and Flower's, from ``bench_flower.py --json``):

    python benchmarks/scale_plot.py scale.png scale.json serve-4.json serve-64.json --peers flower.json

Two panels, K on a log scale:

* **latency (ms)**: a one-shot ``summarize`` round (``bench_scale.py``: the median ms per round of
  each driver; Flower's engines from ``bench_flower.py``), and a served request's p50 from the
  consumer's call to the report in hand (``bench_serve.py``, one line per protocol and number of
  concurrent consumers);
* **CPU per owner (µs)**: the whole process tree's CPU over the rounds, per owner and round
  (one-shot), and the owner agents' and the server's CPU per request, per owner (served). Flower's
  ``bench_flower.py`` CPU covers its whole run, set-up included, so it has no point here.

The rows are told apart by their keys: a ``bench_scale.py`` run row has ``driver``, a
``bench_serve.py`` row ``p50_s``; other rows (``bench_scale.py``'s ratio rows) are left out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

LATENCY_LABEL = "latency (ms)"
CPU_LABEL = "CPU per owner (µs)"
K_LABEL = "owners K"


@dataclass(frozen=True)
class Series:
    """One line of the figure: its label, its panel (``latency`` or ``cpu``), its (K, value) points,
    whether it is served (drawn dashed) or one-shot (solid), and what it measures (``source``: the
    lines of one source share a colour across the panels)."""

    label: str
    panel: str
    points: tuple[tuple[int, float], ...]
    served: bool = False
    source: str = ""


def read_rows(paths: list[str]) -> list[dict[str, Any]]:
    """The rows of ``--json`` files (a list of rows each, as both benchmarks write them)."""
    return [row for name in paths for row in json.loads(Path(name).read_text())]


def read_peers(paths: list[str]) -> list[dict[str, Any]]:
    """Flower's completed runs from ``bench_flower.py --json`` files (``{"runs": [...]}``)."""
    peers = []
    for name in paths:
        data = json.loads(Path(name).read_text())
        peers += [
            row
            for row in (data.get("runs", []) if isinstance(data, dict) else data)
            if row.get("engine", "").startswith("flower")
            and row.get("ok", True)
            and row.get("status", "completed") == "completed"
        ]
    return peers


def _median_cpu_per_owner_round(runs: list[dict[str, Any]]) -> float | None:
    if not all("rounds_cpu_us_per_owner_round" in r for r in runs):
        return None
    return round(statistics.median(r["rounds_cpu_us_per_owner_round"] for r in runs), 1)


def scale_curve(rows: list[dict[str, Any]], peers: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One line per (K, engine) of ``bench_scale.py``'s run rows: the medians of its runs' run wall,
    ms per round, CPU, CPU per owner-round (of the rounds alone) and peak PSS; ``peers`` adds other
    engines' rows (``bench_flower.py --json`` records: ``engine``, ``owners``, ``ms_per_round``,
    ``cpu_s``, ``peak_pss_mb``; their CPU covers the whole run, so no per-round figure is derived from it)."""
    groups: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in rows:
        if "driver" in row and row.get("exit") == 0:
            groups.setdefault((row["owners"], row["driver"]), []).append(row)
    curve = []
    for (owners, driver), runs in sorted(groups.items()):
        ms = [r["round_ms"] for r in runs if "round_ms" in r] or [1000 * r["run_wall_s"] / r["rounds"] for r in runs]
        curve.append(
            {
                "owners": owners,
                "engine": driver,
                "runs": len(runs),
                "run_wall_s": round(statistics.median(r["run_wall_s"] for r in runs), 2),
                "ms_per_round": round(statistics.median(ms), 2),
                "cpu_s": round(statistics.median(r["cpu_s"] for r in runs), 1),
                "cpu_us_per_owner_round": _median_cpu_per_owner_round(runs),
                "peak_pss_mb": round(statistics.median(r["peak_pss_mb"] for r in runs), 0)
                if all(r.get("peak_pss_mb") for r in runs)
                else None,
            }
        )
    by_peer: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in peers or []:
        if row.get("ms_per_round") is not None:
            by_peer.setdefault((row["owners"], row["engine"]), []).append(row)
    for (owners, engine), runs in sorted(by_peer.items()):
        pss = [r["peak_pss_mb"] for r in runs if r.get("peak_pss_mb")]
        cpu = [r["cpu_s"] for r in runs if r.get("cpu_s")]
        curve.append(
            {
                "owners": owners,
                "engine": engine,
                "runs": len(runs),
                "run_wall_s": None,
                "ms_per_round": round(statistics.median(r["ms_per_round"] for r in runs), 2),
                "cpu_s": round(statistics.median(cpu), 1) if cpu else None,
                "cpu_us_per_owner_round": None,  # bench_flower.py's CPU is the whole run's, set-up included
                "peak_pss_mb": round(statistics.median(pss), 0) if pss else None,
            }
        )
    return curve


def _engine_name(engine: str) -> str:
    return f"{engine} (Flower)" if engine.startswith("flower") else engine


def scale_series(curve: list[dict[str, Any]]) -> list[Series]:
    """The one-shot lines of a :func:`scale_curve`: ms per round, and CPU µs per owner-round, by engine."""
    series = []
    for engine in dict.fromkeys(row["engine"] for row in curve):
        rows = sorted((r for r in curve if r["engine"] == engine), key=lambda r: r["owners"])
        name = _engine_name(engine)
        series.append(
            Series(
                f"one-shot round: {name}",
                "latency",
                tuple((r["owners"], r["ms_per_round"]) for r in rows),
                source=engine,
            )
        )
        cpu = tuple((r["owners"], r["cpu_us_per_owner_round"]) for r in rows if r["cpu_us_per_owner_round"] is not None)
        if cpu:
            series.append(Series(f"one-shot, per round: {name}", "cpu", cpu, source=engine))
    return series


def _served_point(rows: list[dict[str, Any]], key: str, scale: float, per_owner: bool) -> float | None:
    """The median over ``rows`` (one K) of ``key`` times ``scale``, divided by K with ``per_owner``."""
    values = [r[key] for r in rows if r.get(key) is not None]
    if not values:
        return None
    return statistics.median(values) * scale / (rows[0]["owners"] if per_owner else 1)


def serve_series(rows: list[dict[str, Any]]) -> list[Series]:
    """The served lines of ``bench_serve.py`` rows, one set per (protocol, concurrent consumers): the
    p50 latency of a request, and the owners' and the server's CPU per request, per owner."""
    groups: dict[tuple[str, int], dict[int, list[dict[str, Any]]]] = {}
    for row in rows:
        if "p50_s" in row and row.get("requests"):
            key = (row.get("protocol", "sketch"), row["consumers"])
            groups.setdefault(key, {}).setdefault(row["owners"], []).append(row)
    series = []
    for (protocol, consumers), by_k in sorted(groups.items()):
        name = f"{protocol}, {consumers} consumer{'s' if consumers != 1 else ''}"
        for panel, label, key, scale, per_owner, source in (
            ("latency", f"served request p50: {name}", "p50_s", 1e3, False, name),
            ("cpu", f"served, per request: owners ({name})", "owner_cpu_s_per_request", 1e6, True, name),
            ("cpu", f"served, per request: server ({name})", "server_cpu_s_per_request", 1e6, True, f"server {name}"),
        ):
            points = [(k, _served_point(by_k[k], key, scale, per_owner)) for k in sorted(by_k)]
            kept = tuple((k, v) for k, v in points if v is not None and v > 0)
            if kept:
                series.append(Series(label, panel, kept, served=True, source=source))
    return series


def figure(series: list[Series], title: str | None = None) -> Figure:
    """The two panels (latency, CPU per owner) against K, log-log, one line per series; a
    :class:`~matplotlib.figure.Figure` of its own (no pyplot state), to save or inspect."""
    fig = Figure(figsize=(12, 4.8))
    left, right = fig.subplots(1, 2)
    colours = {source: f"C{i % 10}" for i, source in enumerate(dict.fromkeys(line.source for line in series))}
    for line in series:
        ax = left if line.panel == "latency" else right
        ax.plot(
            [k for k, _ in line.points],
            [v for _, v in line.points],
            marker="s" if line.served else "o",
            linestyle="--" if line.served else "-",
            label=line.label,
            color=colours[line.source],
        )
    left.set(xscale="log", yscale="log", xlabel=K_LABEL, ylabel=LATENCY_LABEL, title="Latency: a round, a request")
    right.set(xscale="log", yscale="log", xlabel=K_LABEL, ylabel=CPU_LABEL, title="CPU per owner: a round, a request")
    for ax in (left, right):
        ax.grid(True, which="both", alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def draw(
    rows: list[dict[str, Any]], path: Path, peers: list[dict[str, Any]] | None = None, title: str | None = None
) -> Figure:
    """The figure of ``rows`` (either benchmark's, or both) and Flower's ``peers``, saved as a PNG at ``path``."""
    fig = figure(scale_series(scale_curve(rows, peers)) + serve_series(rows), title)
    fig.savefig(path, dpi=110, format="png")
    return fig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("png", help="where to draw the figure")
    parser.add_argument("json", nargs="+", help="bench_scale.py and bench_serve.py --json files")
    parser.add_argument("--peers", nargs="*", default=[], metavar="JSON", help="bench_flower.py --json files")
    parser.add_argument("--title", help="a line above the panels (the machine, say)")
    args = parser.parse_args(argv)
    draw(read_rows(args.json), Path(args.png), read_peers(args.peers), args.title)
    print(f"scale figure drawn: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
