"""The market's two figures (matplotlib, Agg): each owner's spent budget over the stream, one
panel per rule (``budget.png``), and each request's quality, both rules, one panel per protocol
(``quality.png``). A market played several times (``market.repeats``) draws each owner's mean
spend with a band of one sd, and each repeat's quality points with the mean and an error bar of one
(sample) sd per request."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

from marketplace.market.quality import quality_label
from marketplace.market.spread import mean_sd

_MARKERS = {"fcfs": "o", "dpf": "s"}


def _pyplot() -> ModuleType:
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
            ys, sds = _spent_after(raw, rule, owner)
            xs = list(range(1, len(ys) + 1))
            own = raw["budgets"][owner] != default
            if own:
                (line,) = axis.plot(
                    xs, ys, "-", linewidth=2, label=f"{owner} (budget {entry['budget'].get(dim, 0):.3g})"
                )
                axis.axhline(entry["budget"].get(dim, 0.0), color=line.get_color(), linestyle="--", linewidth=1)
            else:
                (line,) = axis.plot(
                    xs, ys, "-", color="0.6", linewidth=1, label=None if grey_labelled else "other owners"
                )
                grey_labelled = True
            if sds is not None and any(sds):
                low = [y - d for y, d in zip(ys, sds)]
                high = [y + d for y, d in zip(ys, sds)]
                axis.fill_between(xs, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
        if default is not None:
            limit = next(e["budget"].get(dim, 0.0) for o, e in play["owners"].items() if raw["budgets"][o] == default)
            axis.axhline(limit, color="0.3", linestyle=":", linewidth=1, label=f"common budget {limit:.3g}")
        summary = play["summary"]
        if _repeats(raw) > 1:
            served = mean_sd(summary["spread"]["served_total"], 3)
            axis.set_title(f"{rule}: {served} of {summary['requests']} requests served")
        else:
            axis.set_title(f"{rule}: {summary['served_total']} of {summary['requests']} requests served")
        axis.set_xlabel("requests arrived")
        axis.xaxis.set_major_locator(_whole())
        axis.set_ylabel(f"{dim} spent (lifetime ledger)" + (", mean ± sd" if _repeats(raw) > 1 else ""))
        axis.legend(fontsize=8, loc="upper left")
        axis.grid(alpha=0.3)
    fig.suptitle(f"{raw['market']}: owners' spent budget over the stream{_over(raw)}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _repeats(raw: Mapping[str, Any]) -> int:
    return int(raw.get("repeats", 1))


def _over(raw: Mapping[str, Any]) -> str:
    return f" ({_repeats(raw)} repeats)" if _repeats(raw) > 1 else ""


def _each_repeat(raw: Mapping[str, Any], rule: str) -> list[Mapping[str, Any]]:
    """``rule``'s play in each repeat (the one play when the market was played once)."""
    if _repeats(raw) == 1:
        return [raw["plays"][rule]]
    return [entry["plays"][rule] for entry in raw["repeat_plays"]]


def _spent_after(raw: Mapping[str, Any], rule: str, owner: str) -> tuple[list[float], list[float] | None]:
    """``owner``'s spend after each arrival under ``rule``: its mean over the repeats, and the
    sample sd (None for a single play)."""
    import numpy as np

    lines = np.array([p["owners"][owner]["spent_after"] for p in _each_repeat(raw, rule)], dtype=float)
    if len(lines) == 1:
        return list(lines[0]), None
    return list(lines.mean(axis=0)), list(lines.std(axis=0, ddof=1))


def _common_budget(raw: Mapping[str, Any]) -> Any:
    values = list(raw["budgets"].values())
    return max(values, key=values.count) if values else None


def plot_quality(raw: Mapping[str, Any], path: str | Path) -> None:
    """Draw :func:`quality_figure` into ``path``."""
    plt = _pyplot()
    fig = quality_figure(raw)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def quality_figure(raw: Mapping[str, Any]) -> Any:
    """Each request's quality (the metric that measures its protocol: ``market.quality``, by default
    the headline) against its place in the stream, one panel per protocol, one series per rule, the
    y axis named with the metric and which way is better; requests with no quality (not served, or
    collapsed) are left out. Over several repeats: each repeat's value faint, the mean with a one-sd
    error bar. The caller closes the figure."""
    plt = _pyplot()
    plays = raw["plays"]
    protocols = list(dict.fromkeys(s["protocol"] for s in raw["stream"]))
    fig, axes = plt.subplots(1, len(protocols), figsize=(5 * len(protocols), 4.0), squeeze=False)
    many = _repeats(raw) > 1
    for axis, protocol in zip(axes[0], protocols):
        metric = None
        for k, (rule, play) in enumerate(plays.items()):
            rows = [r for r in play["requests"] if r["protocol"] == protocol]
            metric = metric or next((r["metric"] for r in rows if r["metric"]), None)
            marker = _MARKERS.get(rule, "d")
            if not many:
                points = [(r["index"], r["quality"]) for r in rows if r["quality"] is not None]
                if points:
                    xs, ys = zip(*points)
                    axis.plot(xs, ys, marker, linestyle="none", alpha=0.8, label=rule)
                continue
            shift = 0.15 * (k - (len(plays) - 1) / 2)  # the rules side by side at each request
            points = [(r["index"] + shift, v) for r in rows for v in r["spread"]["quality"]["values"] if v is not None]
            if not points:
                continue
            xs, ys = zip(*points)
            (dots,) = axis.plot(xs, ys, marker, linestyle="none", alpha=0.25, markersize=4)
            means = [(r["index"] + shift, r["spread"]["quality"]) for r in rows if r["spread"]["quality"]["n"]]
            axis.errorbar(
                [x for x, _ in means],
                [q["mean"] for _, q in means],
                yerr=[q["sd"] or 0.0 for _, q in means],
                fmt=marker,
                color=dots.get_color(),
                capsize=3,
                label=f"{rule} (mean ± sd; faint: each repeat)",
            )
        axis.set_title(protocol)
        axis.set_xlabel("request (stream order)")
        axis.set_ylabel(quality_label(metric))
        axis.set_xlim(0.5, len(raw["stream"]) + 0.5)
        axis.xaxis.set_major_locator(_whole())
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=8)
    fig.suptitle(f"{raw['market']}: quality delivered per request{_over(raw)}")
    fig.tight_layout()
    return fig


def _whole() -> Any:
    """A tick locator that puts ticks on whole numbers only: for an axis of counts."""
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def plot_sales(raw: Mapping[str, Any], path: str | Path) -> bool:
    """Draw :func:`sales_figure` into ``path``; False (and nothing drawn) when nothing was sold."""
    fig = sales_figure(raw)
    if fig is None:
        return False
    plt = _pyplot()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def sales_figure(raw: Mapping[str, Any]) -> Any:
    """Each owner's points sold and earnings, in all after each request of the stream (stream order),
    one column per rule, the first repeat's play: points (whole numbers) above, earnings in the unit
    of the owners' posted prices (``market.terms.price`` is per point) below. None when nothing was
    sold. The caller closes the figure."""
    plays = raw["plays"]
    if not any(e.get("points_sold") for play in plays.values() for e in play["owners"].values()):
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(2, len(plays), figsize=(6 * len(plays), 7.0), squeeze=False, sharex=True)
    for k, (rule, play) in enumerate(plays.items()):
        for owner, entry in play["owners"].items():
            points, money = entry.get("points_sold_after") or [], entry.get("earnings_after") or []
            xs = list(range(1, len(points) + 1))
            (line,) = axes[0][k].step(xs, points, where="post", label=owner if entry.get("points_sold") else None)
            axes[1][k].step(xs, money, where="post", color=line.get_color())
        axes[0][k].set_title(f"{rule}: points sold")
        axes[0][k].set_ylabel("points sold so far (count)")
        axes[0][k].yaxis.set_major_locator(_whole())
        axes[1][k].set_title(f"{rule}: earnings (posted prices)")
        axes[1][k].set_ylabel("earned so far (price units: price x points)")
        axes[1][k].set_xlabel("requests of the stream (stream order)")
        for axis in (axes[0][k], axes[1][k]):
            axis.xaxis.set_major_locator(_whole())
            axis.grid(alpha=0.3)
        axes[0][k].legend(fontsize=7, loc="upper left", ncol=2)
    extra = " (the first repeat)" if _repeats(raw) > 1 else ""
    fig.suptitle(f"{raw['market']}: what each owner sold and earned over the stream{extra}")
    fig.tight_layout()
    return fig
