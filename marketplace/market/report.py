"""The market report: what each rule did with the same stream, per request, per owner and in all.

``market.json`` (every figure; wall-clock times only under ``timing``), ``market.md`` (the same
tables as the terminal), ``budget.png`` and ``quality.png``. Quality is the protocol's headline
metric as its sweeps print it (the first of its exchange's ``sweep_headline``, from the request's
report.json), or the column ``market.quality`` names: an error or a distance for every headline (lower
is better), a score such as summarize's ``accuracy`` (higher is better); :mod:`.quality` tells which.

A market played N times (``market.repeats``) keeps the first repeat's play under ``plays`` and sets
each figure's spread over the N repeats beside it (``summary.spread``, ``owners.<owner>.spread``,
``requests[i].spread``: :mod:`.spread`); ``repeat_plays`` then holds every repeat's play in full.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from marketplace.market.player import Outcome, Play, demands, filter_budgets
from marketplace.market.sales import consumer_sales, owner_sales, request_sale
from marketplace.market.spec import MarketSpec
from marketplace.market.spread import attach, play_spread, spread_text
from marketplace.reporting.format import plural
from marketplace.scheduling.rules import fits

SERVED = ("served", "partial")
STATUSES = ("served", "partial", "declined", "failed", "not granted", "refused")
NOISE_TEXT = (
    "The market runner derived every party's noise key for every request from (market seed, rule, request "
    "id, party) and held them all, so whoever holds the market seed can recompute and strip every release's "
    "noise: a simulation that reproduces itself, like `marketplace run`, not a deployment."
)


def quality_of(
    protocol: str, report: Mapping[str, Any] | None, metric: str | None = None
) -> tuple[str | None, float | None]:
    """(metric name, value) of a completed request's quality: the column ``metric`` of its
    protocol's sweep row, by default the protocol's headline (the first of its exchange's
    ``sweep_headline``); (name, None) when the run has no such figure, or when its release
    collapsed under its noise (its figures measure the prior, not the data)."""
    return _quality(protocol, _sweep_row(protocol, report), metric)


def collapsed(protocol: str, report: Mapping[str, Any] | None) -> bool:
    """Whether a completed request's release collapsed under its noise (its protocol's sweep row
    says so: a sketch whose noise swamps it), so that it has no quality."""
    return bool((_sweep_row(protocol, report) or {}).get("collapsed"))


def _sweep_row(protocol: str, report: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The protocol's sweep row of a completed request's report (None for any other)."""
    from marketplace import plugins

    if report is None or report.get("status") != "completed":
        return None
    return plugins.exchange(protocol).sweep_row(dict(report))


def _quality(protocol: str, row: Mapping[str, Any] | None, metric: str | None) -> tuple[str | None, float | None]:
    """:func:`quality_of` from the request's sweep row (None: not completed)."""
    from marketplace import plugins

    headline = plugins.exchange(protocol).sweep_headline
    name = metric or (headline[0] if headline else None)
    if name is None or row is None or row.get("collapsed"):  # a collapse's figures are not a quality
        return name, None
    value = row.get(name)
    return name, float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _declined(report: Mapping[str, Any] | None) -> list[str]:
    return sorted(((report or {}).get("lifetime") or {}).get("declined") or (), key=_owner_key)


def _owner_key(owner: str) -> tuple[int, str]:
    tail = owner.rsplit("-", 1)[-1]
    return (int(tail), owner) if tail.isdigit() else (0, owner)


def request_row(outcome: Outcome, quality: Mapping[str, str]) -> dict[str, Any]:
    """One request's line of a play; ``quality`` maps a protocol to the metric that measures it."""
    r, report = outcome.request, outcome.report
    row = _sweep_row(r.protocol, report)  # once: a sweep row reads the whole report
    metric, value = _quality(r.protocol, row, quality.get(r.protocol))
    return {
        "id": r.id,
        "index": r.index + 1,
        "order": outcome.order,
        "consumer": r.consumer,
        "protocol": r.protocol,
        "status": outcome.status,
        "reason": outcome.reason,
        "metric": metric,
        "quality": value if outcome.status in SERVED else None,
        "collapsed": bool((row or {}).get("collapsed")),
        "messages": ((report or {}).get("messages") or {}).get("total"),
        "parsimony": _parsimony(report),
        "charged": outcome.charged,
        "declined": _declined(report),
        "sale": request_sale(report),
        "folder": outcome.folder,
    }


def _parsimony(report: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The run's parsimony figures (what the curator saw: points, records), without its notes."""
    section = (report or {}).get("parsimony")
    if not isinstance(section, Mapping):
        return None
    return {k: v for k, v in section.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def play_section(spec: MarketSpec, play: Play, dim: str) -> dict[str, Any]:
    """Everything one rule's play shows: requests, owners (spend over time, service, value), summary."""
    rows = [request_row(o, spec.quality) for o in play.outcomes]
    budgets, asked = filter_budgets(spec), demands(spec)
    final = play.timeline[-1] if play.timeline else {}
    owners = {}
    for owner in spec.owner_ids:
        served = [row for row in rows if owner in row["charged"]]
        charged = {d: math.fsum(row["charged"][owner].get(d, 0.0) for row in served) for d in budgets[owner]}
        cheapest = [a.charges[owner] for a in asked.values() if owner in a.charges]
        spent = final.get(owner, {})
        owners[owner] = {
            "budget": dict(budgets[owner]),
            "spent": {d: spent.get(d, 0.0) for d in budgets[owner]},
            "spent_after": [t.get(owner, {}).get(dim, 0.0) for t in play.timeline],
            "served": len(served),
            "declined": sum(owner in row["declined"] for row in rows),
            "value": {"requests_served": len(served), "charged": charged},
            **owner_sales(rows, owner),
            "exhausted": bool(cheapest) and not any(fits(spent, c, budgets[owner]) for c in cheapest),
        }
    counts = {s: sum(row["status"] == s for row in rows) for s in STATUSES}
    quality: dict[str, Any] = {}
    for protocol in dict.fromkeys(row["protocol"] for row in rows):
        values = [row["quality"] for row in rows if row["protocol"] == protocol and row["quality"] is not None]
        quality[protocol] = {
            "metric": next((row["metric"] for row in rows if row["protocol"] == protocol), None),
            "mean": math.fsum(values) / len(values) if values else None,
            "requests": len(values),
            "collapsed": sum(row["protocol"] == protocol and row["collapsed"] for row in rows),
        }
    exhausted = [o for o, e in owners.items() if e["exhausted"]]
    summary = {
        "requests": len(rows),
        **{s.replace(" ", "_"): n for s, n in counts.items()},
        "served_total": counts["served"] + counts["partial"],
        "owners_exhausted": exhausted,
        "paid": math.fsum(row["sale"]["paid"] for row in rows),
        "points_sold": sum(row["sale"]["points_bought"] for row in rows),
        "mean_quality": quality,
    }
    return {"requests": rows, "owners": owners, "consumers": consumer_sales(rows), "summary": summary}


@dataclass(frozen=True)
class MarketReport:
    """A played market: ``raw`` is what ``market.json`` holds; ``folder`` where it was written."""

    raw: dict[str, Any]
    folder: Path | None = None

    @property
    def rules(self) -> list[str]:
        """The rules played, in order."""
        return list(self.raw["plays"])

    def play(self, rule: str) -> dict[str, Any]:
        """One rule's section: ``requests``, ``owners``, ``summary``."""
        return self.raw["plays"][rule]

    def summary(self, rule: str) -> dict[str, Any]:
        """One rule's summary: counts per status, owners exhausted, mean quality per protocol."""
        return self.play(rule)["summary"]

    def statuses(self, rule: str) -> dict[str, str]:
        """Request id -> status under ``rule``."""
        return {row["id"]: row["status"] for row in self.play(rule)["requests"]}

    @property
    def repeats(self) -> int:
        """How many times the stream was played under every rule (``market.repeats``)."""
        return int(self.raw.get("repeats", 1))

    def spread(self, rule: str) -> dict[str, Any]:
        """The spread of ``rule``'s summary over the repeats: each figure's mean, sd, n and values."""
        return self.summary(rule)["spread"]

    def repeat(self, i: int) -> dict[str, dict[str, Any]]:
        """Rule -> repeat ``i``'s play (``requests``, ``owners``, ``summary``; seed ``market.seed + i``)."""
        if not 0 <= i < self.repeats:
            raise IndexError(f"repeat {i} of a market played {self.repeats} time(s)")
        if self.repeats == 1:
            return self.raw["plays"]
        return self.raw["repeat_plays"][i]["plays"]

    def comparable(self) -> dict[str, Any]:
        """The report without wall-clock times and the folder it was written to (what one seed fixes)."""
        return {k: v for k, v in self.raw.items() if k not in ("timing", "folder", "driver")}

    def tables(self) -> list[tuple[str, list[str], list[list[str]]]]:
        """(title, header, rows) of the rule summary, the requests and the owners."""
        from marketplace.market.tables import tables

        return tables(self.raw)

    def write(self, folder: str | Path) -> None:
        """Write ``market.json``, ``market.md``, ``budget.png``, ``quality.png`` and, when points were
        sold, ``sales.png`` into ``folder``."""
        from marketplace.market.plots import plot_budget, plot_quality, plot_sales
        from marketplace.market.tables import markdown

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "market.json").write_text(json.dumps(self.raw, indent=1, allow_nan=False) + "\n", encoding="utf-8")
        (folder / "market.md").write_text(markdown(self.raw), encoding="utf-8")
        plot_budget(self.raw, folder / "budget.png")
        plot_quality(self.raw, folder / "quality.png")
        plot_sales(self.raw, folder / "sales.png")  # drawn only when anything was sold
        object.__setattr__(self, "folder", folder)

    @classmethod
    def load(cls, path: str | Path) -> MarketReport:
        """Read ``market.json`` (or the folder holding it)."""
        path = Path(path)
        path = path / "market.json" if path.is_dir() else path
        return cls(json.loads(path.read_text(encoding="utf-8")), path.parent)

    def __repr__(self) -> str:
        parts = [
            f"{rule}: {self.summary(rule)['served_total']}/{self.summary(rule)['requests']} served"
            for rule in self.rules
        ]
        return f"MarketReport({self.raw['market']!r}, {', '.join(parts)})"


def build_report(
    spec: MarketSpec, played: Sequence[Sequence[Play]], *, driver: str, folder: Path | None = None
) -> MarketReport:
    """The :class:`MarketReport` of ``played`` (per repeat, in repeat order: one :class:`Play` per
    rule) on ``spec``'s stream. ``plays.<rule>`` is the first repeat's play (seed ``market.seed``),
    each of its figures with its ``spread`` over every repeat beside it (:mod:`.spread`); when the
    market was played more than once, ``repeat_plays`` holds every repeat's plays in full."""
    dim = "rho" if spec.filter == "zcdp" else "eps"
    asked = demands(spec)
    stream = [
        {
            "id": r.id,
            "index": r.index + 1,
            "consumer": r.consumer,
            "protocol": r.protocol,
            "arrival": r.arrival,
            "entry": r.entry,
            "asked": len(asked[r.id].charges),
            "charge": _uniform(asked[r.id].charges),
        }
        for r in spec.requests
    ]
    sections = [{p.rule: play_section(spec, p, dim) for p in plays} for plays in played]
    for per_rule in sections:
        for section in per_rule.values():
            section["summary"]["text"] = summary_text(section["summary"])
    first = copy.deepcopy(sections[0])
    for rule, section in first.items():
        attach(section, play_spread([s[rule] for s in sections]))
        section["summary"]["spread"]["text"] = spread_text(
            section["summary"]["spread"], len(spec.requests), len(sections)
        )
    raw = {
        "market": spec.name,
        "source": spec.source,
        "seed": spec.seed,
        "repeats": len(sections),
        "seeds": [spec.seed + i for i in range(len(sections))],
        "driver": driver,
        "owners": spec.owners,
        "filter": spec.filter,
        "relation": spec.relation,
        "plotted": dim,
        "rules": list(spec.rules),
        "unlock_steps": spec.unlock_steps,
        "budgets": {o: spec.budget_of(o).as_dict() for o in spec.owner_ids},
        "noise": NOISE_TEXT,
        "value": "an owner's value is the number of requests its data served (its ledger charged them), the "
        "privacy budget those requests charged it, and, for a protocol that sells points (summarize), the points it "
        "sold and what it earned at its posted price",
        "terms": {"default": None if spec.terms is None else dict(spec.terms), "owners": dict(spec.owner_terms)},
        "stream": stream,
        "plays": first,
        "timing": _timing(played),
    }
    if len(sections) > 1:
        raw["repeat_plays"] = [
            {"repeat": i, "seed": spec.seed + i, "folder": f"repeat-{i}", "plays": per_rule}
            for i, per_rule in enumerate(sections)
        ]
    return MarketReport(raw, folder)


def _timing(played: Sequence[Sequence[Play]]) -> dict[str, Any]:
    """Wall-clock seconds per rule (over every repeat) and per request (the first repeat's; each
    repeat's under ``repeats`` when there are several)."""

    def one(p: Play) -> dict[str, Any]:
        return {"seconds": p.seconds, "requests": {o.request.id: o.seconds for o in p.outcomes if o.order}}

    out = {}
    for k, first in enumerate(played[0]):
        out[first.rule] = one(first)
        if len(played) > 1:
            each = [one(plays[k]) for plays in played]
            out[first.rule]["seconds"] = math.fsum(t["seconds"] for t in each)
            out[first.rule]["repeats"] = each
    return out


def _uniform(charges: Mapping[str, Mapping[str, float]]) -> Any:
    """The charge every asked owner pays, when it is the same for all; else the charge per owner."""
    values = list(charges.values())
    if values and all(v == values[0] for v in values):
        return dict(values[0])
    return {o: dict(c) for o, c in charges.items()}


def summary_text(summary: Mapping[str, Any]) -> str:
    """One line: served, partial, declined, failed, not granted, owners exhausted."""
    parts = [f"{summary['served_total']} of {plural(summary['requests'], 'request')} served"]
    if summary["partial"]:
        parts.append(f"{summary['partial']} of them by some owners only")
    for key, word in (
        ("declined", "declined by every owner"),
        ("failed", "failed"),
        ("not_granted", "not granted"),
        ("refused", "refused over the spending budget"),
    ):
        if summary[key]:
            parts.append(f"{summary[key]} {word}")
    exhausted = summary["owners_exhausted"]
    parts.append(f"{plural(len(exhausted), 'owner')} exhausted" + (f" ({', '.join(exhausted)})" if exhausted else ""))
    return "; ".join(parts)
