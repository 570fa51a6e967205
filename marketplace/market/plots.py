"""The market's two figures (matplotlib, Agg): each owner's spent budget over the stream, one
panel per rule (``budget.png``), and each request's quality, both rules, one panel per protocol
(``quality.png``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

_MARKERS = {"fcfs": "o", "dpf": "s"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_budget(raw: Mapping[str, Any], path: str | Path) -> None:
    """Each owner's spent budget (eps, or rho under the zcdp filter) after each arriving request,
    one panel per rule; owners with a budget of their own are drawn in colour with their budget
    as a dashed line, the others in grey."""
    plt = _pyplot()
    plays, dim = raw["plays"], raw["plotted"]
    default = _common_budget(raw)
    fig, axes = plt.subplots(1, len(plays), figsize=(6 * len(plays), 4.2), squeeze=False, sharey=True)
    for axis, (rule, play) in zip(axes[0], plays.items()):
        grey_labelled = False
        for owner, entry in play["owners"].items():
            ys = entry["spent_after"]
            xs = list(range(1, len(ys) + 1))
            own = raw["budgets"][owner] != default
            if own:
                (line,) = axis.plot(
                    xs, ys, "-", linewidth=2, label=f"{owner} (budget {entry['budget'].get(dim, 0):.3g})"
                )
                axis.axhline(entry["budget"].get(dim, 0.0), color=line.get_color(), linestyle="--", linewidth=1)
            else:
                axis.plot(xs, ys, "-", color="0.6", linewidth=1, label=None if grey_labelled else "other owners")
                grey_labelled = True
        if default is not None:
            limit = next(e["budget"].get(dim, 0.0) for o, e in play["owners"].items() if raw["budgets"][o] == default)
            axis.axhline(limit, color="0.3", linestyle=":", linewidth=1, label=f"common budget {limit:.3g}")
        axis.set_title(f"{rule}: {play['summary']['served_total']} of {play['summary']['requests']} requests served")
        axis.set_xlabel("requests arrived")
        axis.set_ylabel(f"{dim} spent (lifetime ledger)")
        axis.legend(fontsize=8, loc="upper left")
        axis.grid(alpha=0.3)
    fig.suptitle(f"{raw['market']}: owners' spent budget over the stream")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _common_budget(raw: Mapping[str, Any]) -> Any:
    values = list(raw["budgets"].values())
    return max(values, key=values.count) if values else None


def plot_quality(raw: Mapping[str, Any], path: str | Path) -> None:
    """Each request's quality (its protocol's headline metric) against its place in the stream,
    one panel per protocol, one series per rule; requests with no quality (not served) are left out."""
    plt = _pyplot()
    plays = raw["plays"]
    protocols = list(dict.fromkeys(s["protocol"] for s in raw["stream"]))
    fig, axes = plt.subplots(1, len(protocols), figsize=(5 * len(protocols), 4.0), squeeze=False)
    for axis, protocol in zip(axes[0], protocols):
        metric = None
        for rule, play in plays.items():
            rows = [r for r in play["requests"] if r["protocol"] == protocol]
            metric = metric or next((r["metric"] for r in rows if r["metric"]), None)
            points = [(r["index"], r["quality"]) for r in rows if r["quality"] is not None]
            if points:
                xs, ys = zip(*points)
                axis.plot(xs, ys, _MARKERS.get(rule, "d"), linestyle="none", alpha=0.8, label=rule)
        axis.set_title(protocol)
        axis.set_xlabel("request (stream order)")
        axis.set_ylabel(f"{metric or 'quality'} (lower is better)")
        axis.set_xlim(0.5, len(raw["stream"]) + 0.5)
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=8)
    fig.suptitle(f"{raw['market']}: quality delivered per request")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
