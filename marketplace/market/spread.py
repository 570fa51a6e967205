"""The spread of a market's figures over its repeats: mean, sample standard deviation and n of each.

A market played N times (``market.repeats``; repeat i with seed ``market.seed + i``) gives every
figure of a rule's play N values: its requests served, each owner's spent budget, each protocol's
mean quality, each request's quality. :func:`play_spread` puts each figure's spread next to it:
``{"mean", "sd", "n", "values"}``, where ``values`` holds each repeat's figure in repeat order
(None where a repeat has none, such as the quality of a request not served or collapsed), ``n``
counts the repeats that have one, and ``sd`` is the sample standard deviation (ddof = 1; None
below two values), as the sweeps' summaries take it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from marketplace.reporting.format import plural

COUNTS = ("served_total", "served", "partial", "declined", "failed", "not_granted", "refused")
"""The summary's request counts that get a spread (``requests`` is the stream's length, the same in every repeat)."""


def stat(values: Sequence[float | None]) -> dict[str, Any]:
    """``{"mean", "sd", "n", "values"}`` of one figure over the repeats (None values are left out
    of mean, sd and n; sd is the sample standard deviation, None below two values)."""
    present = [float(v) for v in values if v is not None]
    n = len(present)
    mean = math.fsum(present) / n if n else None
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in present) / (n - 1)) if n > 1 and mean is not None else None
    return {"mean": mean, "sd": sd, "n": n, "values": list(values)}


def play_spread(sections: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The spread of one rule's plays (its ``requests``, ``owners``, ``summary`` section per repeat,
    in repeat order): ``{"summary": {...}, "owners": {owner: {...}}, "requests": [{...}, ...]}``,
    each part to be set beside the figures it spreads (:func:`attach`)."""
    summaries = [s["summary"] for s in sections]
    first = sections[0]
    dims = list(next(iter(first["owners"].values()))["spent"]) if first["owners"] else []
    summary: dict[str, Any] = {key: stat([s[key] for s in summaries]) for key in COUNTS}
    summary["owners_exhausted"] = stat([len(s["owners_exhausted"]) for s in summaries])
    summary["spent"] = {
        d: stat([math.fsum(e["spent"].get(d, 0.0) for e in s["owners"].values()) for s in sections]) for d in dims
    }
    quality = {}
    for protocol in dict.fromkeys(p for s in summaries for p in s["mean_quality"]):
        each = [s["mean_quality"].get(protocol) or {} for s in summaries]
        quality[protocol] = {
            "metric": next((q["metric"] for q in each if q.get("metric")), None),
            "mean": stat([q.get("mean") for q in each]),
            "requests": stat([q.get("requests", 0) for q in each]),
            "collapsed": stat([q.get("collapsed", 0) for q in each]),
        }
    summary["mean_quality"] = quality
    owners = {}
    for owner in first["owners"]:
        entries = [s["owners"][owner] for s in sections]
        owners[owner] = {
            "spent": {d: stat([e["spent"].get(d, 0.0) for e in entries]) for d in dims},
            "served": stat([e["served"] for e in entries]),
            "declined": stat([e["declined"] for e in entries]),
            "exhausted": sum(bool(e["exhausted"]) for e in entries),
        }
    requests = []
    for i in range(len(first["requests"])):
        rows = [s["requests"][i] for s in sections]
        statuses: dict[str, int] = {}
        for row in rows:
            statuses[row["status"]] = statuses.get(row["status"], 0) + 1
        requests.append(
            {
                "quality": stat([row["quality"] for row in rows]),
                "statuses": statuses,
                "collapsed": sum(bool(row["collapsed"]) for row in rows),
            }
        )
    return {"summary": summary, "owners": owners, "requests": requests}


def attach(section: dict[str, Any], spread: Mapping[str, Any]) -> None:
    """Set each part of ``spread`` (:func:`play_spread`) as ``spread`` beside the figures it spreads:
    ``summary.spread``, ``owners.<owner>.spread``, ``requests[i].spread``."""
    section["summary"]["spread"] = spread["summary"]
    for owner, entry in section["owners"].items():
        entry["spread"] = spread["owners"][owner]
    for row, part in zip(section["requests"], spread["requests"], strict=True):
        row["spread"] = part


def spread_text(spread: Mapping[str, Any], requests: int, repeats: int) -> str:
    """One line of a rule's spread over ``repeats`` plays: requests served, declined, not granted."""
    parts = [f"over {plural(repeats, 'repeat')}: {mean_sd(spread['served_total'])} of {requests} requests served"]
    for key, word in (
        ("declined", "declined by every owner"),
        ("failed", "failed"),
        ("not_granted", "not granted"),
        ("refused", "refused over the spending budget"),
    ):
        if any(spread[key]["values"]):
            parts.append(f"{mean_sd(spread[key])} {word}")
    return "; ".join(parts) + " (mean±sd)"


def mean_sd(figure: Mapping[str, Any] | None, digits: int = 4) -> str:
    """``mean±sd`` of a spread figure (``mean`` alone when sd is None); '-' when it has no value."""
    if not figure or figure.get("mean") is None:
        return "-"
    mean = f"{figure['mean']:.{digits}g}"
    return mean if figure.get("sd") is None else f"{mean}±{figure['sd']:.{min(digits, 2)}g}"
