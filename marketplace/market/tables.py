"""The market report's tables, as plain (title, header, rows), for the terminal and for ``market.md``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from marketplace.market.quality import direction, quality_label
from marketplace.market.spread import mean_sd
from marketplace.reporting.format import fmt

Table = tuple[str, list[str], list[list[str]]]


def _amount(amounts: Mapping[str, float] | None) -> str:
    if not amounts:
        return "-"
    return ", ".join(f"{k}={v:.4g}" for k, v in amounts.items() if k != "delta" or v)


def _charge(charge: Mapping[str, Any]) -> str:
    if charge and all(isinstance(v, (int, float)) for v in charge.values()):
        return _amount(charge)
    return "per owner"


def _repeated(raw: Mapping[str, Any]) -> int:
    """How many repeats the report spreads over (1: its tables show the one play's figures)."""
    return int(raw.get("repeats", 1))


def rule_table(raw: Mapping[str, Any]) -> Table:
    """One column per rule: requests served, partly served, declined, failed, not granted, owners
    exhausted, and the mean quality per protocol over the requests it served; mean±sd over the
    repeats when the market was played more than once."""
    plays, n = raw["plays"], _repeated(raw)
    rules = list(plays)
    rows = []
    for key, label in (
        ("served_total", "requests served"),
        ("partial", "  of them by some owners only"),
        ("declined", "declined by every owner"),
        ("failed", "failed"),
        ("not_granted", "not granted"),
        ("refused", "refused over the spending budget"),
    ):
        if key == "refused" and not any(plays[r]["summary"].get(key) for r in rules):
            continue  # a row only for a market where a request was refused for its price
        if n > 1:
            rows.append([label, *(mean_sd(plays[r]["summary"]["spread"][key]) for r in rules)])
        else:
            rows.append([label, *(str(plays[r]["summary"][key]) for r in rules)])
    if n > 1:
        rows.append(["owners exhausted", *(mean_sd(plays[r]["summary"]["spread"]["owners_exhausted"]) for r in rules)])
    else:
        rows.append(["owners exhausted", *(str(len(plays[r]["summary"]["owners_exhausted"])) for r in rules)])
    protocols = list(dict.fromkeys(p for r in rules for p in plays[r]["summary"]["mean_quality"]))
    for protocol in protocols:
        cells, metric = [], None
        for r in rules:
            q = plays[r]["summary"]["mean_quality"].get(protocol) or {}
            metric = metric or q.get("metric")
            if n > 1:
                spread = plays[r]["summary"]["spread"]["mean_quality"].get(protocol) or {}
                gone = f", {mean_sd(spread['collapsed'])} collapsed" if any(spread["collapsed"]["values"]) else ""
                served = mean_sd(spread["requests"])
                cells.append(f"{mean_sd(spread.get('mean'))} (n={spread['mean']['n']}/{n}; {served}{gone})")
            else:
                gone = f", {q['collapsed']} collapsed" if q.get("collapsed") else ""
                cells.append(f"{fmt(q.get('mean'))} ({q.get('requests', 0)}{gone})")
        words = direction(metric)
        rows.append([f"mean {protocol} {metric} (served{'; ' + words if words else ''})", *cells])
    title = f"{raw['market']}: {len(raw['stream'])} requests, {raw['owners']} owners, filter {raw['filter']}"
    if n > 1:
        seeds = raw.get("seeds") or [raw["seed"]]
        title += (
            f"; mean±sd over {n} repeats (seeds {seeds[0]} to {seeds[-1]}; a quality's n counts the repeats "
            "with one, then the requests it averages)"
        )
    return (title, ["", *rules], rows)


def _statuses(counts: Mapping[str, int]) -> str:
    """A request's statuses over the repeats: the one status, or each with its count."""
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{status} x{k}" for status, k in counts.items())


def _measures(raw: Mapping[str, Any]) -> str:
    """What measures each protocol's requests, with the way it points: ``"sketch moment1_mre (lower is
    better), summarize accuracy (higher is better)"`` (the metric named on the requests' rows)."""
    metrics: dict[str, str | None] = {}
    for play in raw["plays"].values():
        for row in play["requests"]:
            if not metrics.get(row["protocol"]):
                metrics[row["protocol"]] = row.get("metric")
    return ", ".join(f"{protocol} {quality_label(metric)}" for protocol, metric in metrics.items())


def request_table(raw: Mapping[str, Any]) -> Table:
    """One row per request in stream order: arrival, consumer, protocol, charge per owner, and for
    each rule its status, the order it ran in, its quality and the owners that declined it; over
    several repeats, its statuses, its quality's mean±sd (and in how many repeats it had one) and
    the first repeat's run order and declining owners."""
    plays, n = raw["plays"], _repeated(raw)
    rules = list(plays)
    header = ["request", "arrival", "consumer", "protocol", "charge/owner"]
    for r in rules:
        header += [f"{r} status", f"{r} run", f"{r} quality", f"{r} declined"]
    rows = []
    for i, s in enumerate(raw["stream"]):
        row = [s["id"], fmt(float(s["arrival"])), s["consumer"], s["protocol"], _charge(s["charge"])]
        for r in rules:
            q = plays[r]["requests"][i]
            if n > 1:
                spread = q["spread"]
                gone = f", {spread['collapsed']} collapsed" if spread["collapsed"] else ""
                quality = f"{mean_sd(spread['quality'])} ({spread['quality']['n']} of {n}{gone})"
                status = _statuses(spread["statuses"])
            else:
                quality = "collapsed" if q.get("collapsed") else fmt(q["quality"])
                status = q["status"]
            row += [status, fmt(q["order"]), quality, str(len(q["declined"])) if q["declined"] else "-"]
        rows.append(row)
    title = (
        f"Requests (quality: {_measures(raw)}; `collapsed` where the noise swamped the release, which has none; "
        "run: the order it ran in)"
    )
    if n > 1:
        title = (
            f"Requests over {n} repeats (quality: {_measures(raw)}; mean±sd over the repeats that served it without a "
            "collapse; run and declined: the first repeat's)"
        )
    return (title, header, rows)


def owner_table(raw: Mapping[str, Any]) -> Table:
    """One row per owner: its budget, and for each rule what it spent, served and declined (mean±sd
    over the repeats when there are several)."""
    plays, n = raw["plays"], _repeated(raw)
    rules = list(plays)
    header = ["owner", "budget"]
    sells = _sells(raw)
    for r in rules:
        header += [f"{r} spent", f"{r} served", f"{r} declined"] + ([f"{r} sold", f"{r} earned"] if sells else [])
    rows = []
    for owner, budget in raw["budgets"].items():
        row = [owner, _amount({"eps": budget["epsilon"], "delta": budget["delta"]})]
        for r in rules:
            e = plays[r]["owners"][owner]
            if n > 1:
                spread = e["spread"]
                spent = ", ".join(
                    f"{d}={mean_sd(f)}" for d, f in spread["spent"].items() if d != "delta" or any(f["values"])
                )
                tired = f" (exhausted in {spread['exhausted']} of {n})" if spread["exhausted"] else ""
                row += [spent + tired, mean_sd(spread["served"]), mean_sd(spread["declined"])]
            else:
                row += [
                    _amount(e["spent"]) + (" (exhausted)" if e["exhausted"] else ""),
                    str(e["served"]),
                    str(e["declined"]),
                ]
            if sells:
                row += [str(e.get("points_sold", 0)), fmt(float(e.get("earnings", 0.0)))]
        rows.append(row)
    title = "Owners (value: requests served and budget charged" + ("; points sold and earnings" if sells else "") + ")"
    if n > 1:
        title = (
            f"Owners (value: requests served and budget charged; mean±sd over {n} repeats"
            + ("; points sold and earnings: the first repeat's" if sells else "")
            + ")"
        )
    return (title, header, rows)


def _sells(raw: Mapping[str, Any]) -> bool:
    """Whether any request of any rule bought points (a protocol that sells them: summarize)."""
    return any(row.get("sale", {}).get("points_bought") for play in raw["plays"].values() for row in play["requests"])


def consumer_table(raw: Mapping[str, Any]) -> Table:
    """One row per consumer: for each rule what it paid, the points it bought, its mean quality over
    the requests served, and quality per unit paid (the first repeat's figures)."""
    plays = raw["plays"]
    rules = list(plays)
    header = ["consumer"]
    for r in rules:
        header += [f"{r} paid", f"{r} points", f"{r} quality", f"{r} quality/paid"]
    consumers = list(dict.fromkeys(c for r in rules for c in plays[r].get("consumers") or {}))
    rows = []
    for consumer in consumers:
        row = [consumer]
        for r in rules:
            c = (plays[r].get("consumers") or {}).get(consumer) or {}
            row += [
                fmt(c.get("paid")),
                str(c.get("points_bought", 0)),
                fmt(c.get("quality")),
                fmt(c.get("quality_per_paid")),
            ]
        rows.append(row)
    title = (
        "Consumers (paid for the points they bought; quality/paid: summed quality over what was paid, value for "
        "money only where a higher quality is better)"
    )
    if _repeated(raw) > 1:
        title += "; the first repeat's"
    return (title, header, rows)


def tables(raw: Mapping[str, Any]) -> list[Table]:
    """The tables of a market report: rules, requests, owners, and consumers when anything was bought."""
    out = [rule_table(raw), request_table(raw), owner_table(raw)]
    return out + ([consumer_table(raw)] if _sells(raw) else [])


def markdown(raw: Mapping[str, Any]) -> str:
    """``market.md``: the tables in Markdown, each rule's summary line and the noise statement."""
    lines = [
        f"# Market {raw['market']}",
        "",
        f"Seed {raw['seed']}, {raw['owners']} owners, lifetime filter `{raw['filter']}` ({raw['relation']}), "
        f"rules {', '.join(raw['plays'])}; DPF unlocks 1/{raw['unlock_steps']} of every budget per arrival.",
        "",
    ]
    if _repeated(raw) > 1:
        seeds = raw["seeds"]
        lines += [
            f"Played {_repeated(raw)} times, seeds {seeds[0]} to {seeds[-1]}, each repeat from fresh ledgers "
            "(`repeat-<i>/`); the tables show mean±sd over the repeats (sample sd), the lines below the first "
            "repeat, then the spread.",
            "",
        ]
    for rule, play in raw["plays"].items():
        lines.append(f"* **{rule}**: {play['summary']['text']}")
        if _repeated(raw) > 1:
            lines.append(f"  ({play['summary']['spread']['text']})")
    lines.append("")
    for title, header, rows in tables(raw):
        lines += [f"## {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell.replace("|", "/") for cell in row) + " |" for row in rows]
        lines.append("")
    lines += [f"{raw['value'][0].upper()}{raw['value'][1:]}.", "", raw["noise"], ""]
    return "\n".join(lines)


ID_COLUMNS = ("request", "owner", "consumer")
"""The columns of ids, shown whole however narrow the terminal (the other columns wrap)."""


def print_tables(console: Any, raw: Mapping[str, Any]) -> None:
    """The tables on a rich console, then each rule's summary line. A table too wide for the console
    is shown once per rule (its shared columns, then that rule's), and its ids are never cut."""
    for title, header, rows in tables(raw):
        for part in _fitted(console, (title, header, rows), list(raw["plays"])):
            console.print(_rich_table(*part))
    for rule, play in raw["plays"].items():
        if _repeated(raw) > 1:
            console.print(f"{rule}: {play['summary']['spread']['text']}; first repeat: {play['summary']['text']}")
        else:
            console.print(f"{rule}: {play['summary']['text']}")


def _rich_table(title: str, header: list[str], rows: list[list[str]]) -> Any:
    """A rich table of (title, header, rows): an id column as wide as its longest id and never
    wrapped, every other column wrapped (folded inside a word only when a word does not fit)."""
    from rich.table import Table as RichTable

    table = RichTable(title=title, title_justify="left")
    for k, name in enumerate(header):
        if name in ID_COLUMNS:
            table.add_column(name, no_wrap=True, min_width=max(len(name), *(len(row[k]) for row in rows)))
        else:
            table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def _fitted(console: Any, table: Table, rules: list[str]) -> list[Table]:
    """``table``, or, when it cannot fit the console without cutting its words and it has columns per
    rule (``<rule> status``, ...), one table per rule: the shared columns, then that rule's."""
    title, header, rows = table
    shared = [k for k, name in enumerate(header) if not name.startswith(tuple(f"{r} " for r in rules))]
    if len(shared) == len(header) or _unbroken_width(header, rows) <= console.width:
        return [table]
    parts = []
    for rule in rules:
        keep = shared + [k for k, name in enumerate(header) if name.startswith(f"{rule} ")]
        parts.append((f"{title}: {rule}", [header[k] for k in keep], [[row[k] for k in keep] for row in rows]))
    return parts


def _unbroken_width(header: list[str], rows: list[list[str]]) -> int:
    """The narrowest the table can be drawn with no word cut: each column's longest word, its padding
    (one space each side) and a border per column, plus the closing border."""
    words = [
        max(len(word) for cell in (name, *(row[k] for row in rows)) for word in cell.split() or [""])
        for k, name in enumerate(header)
    ]
    return sum(w + 3 for w in words) + 1
