"""Assembling the run report from the parties' own reports, and writing it as JSON and CSV."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path
from typing import Any

from marketplace.transport.counters import HEARTBEAT


def message_summary(
    parties: list[dict[str, Any]], *, dropped: set[str] | frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Totals per kind and per party from the senders' counters, checked against the receivers'.

    Heartbeats are counted apart: their number depends on timing, protocol messages do not. Frames
    to or from a connection that is no party of the run (error replies to an unidentified sender)
    are counted under ``strangers``, not in the totals. A difference between what a party sent and
    what its receiver counted is *explained* when either is a party the curator dropped (a crashed
    owner does not count what was in flight to it): those are listed apart, and ``agree`` says
    whether every other count matches.
    """
    by_kind: dict[str, dict[str, int]] = defaultdict(lambda: {"count": 0, "bytes": 0})
    by_party: dict[str, dict[str, int]] = defaultdict(
        lambda: {"sent": 0, "received": 0, "bytes_sent": 0, "bytes_received": 0}
    )
    heartbeats = {"sent": 0, "received": 0, "bytes": 0}
    sent_keys: dict[tuple[str, str, str], int] = defaultdict(int)
    recv_keys: dict[tuple[str, str, str], int] = defaultdict(int)
    rejected: dict[str, dict[str, int]] = {}
    ids = {party.get("id") for party in parties}
    strangers = {"sent": 0, "received": 0}
    for party in parties:
        counters = party.get("counters") or {}
        for row in counters.get("sent", []):
            if row["receiver"] not in ids:
                strangers["sent"] += row["count"]
                continue
            if row["kind"] == HEARTBEAT:
                heartbeats["sent"] += row["count"]
                heartbeats["bytes"] += row["bytes"]
                continue
            by_kind[row["kind"]]["count"] += row["count"]
            by_kind[row["kind"]]["bytes"] += row["bytes"]
            by_party[row["sender"]]["sent"] += row["count"]
            by_party[row["sender"]]["bytes_sent"] += row["bytes"]
            sent_keys[(row["sender"], row["receiver"], row["kind"])] += row["count"]
        for row in counters.get("received", []):
            if row["sender"] not in ids:
                strangers["received"] += row["count"]
                continue
            if row["kind"] == HEARTBEAT:
                heartbeats["received"] += row["count"]
                continue
            by_party[row["receiver"]]["received"] += row["count"]
            by_party[row["receiver"]]["bytes_received"] += row["bytes"]
            recv_keys[(row["sender"], row["receiver"], row["kind"])] += row["count"]
        if counters.get("rejected"):
            rejected[party["id"]] = counters["rejected"]
    differences = [
        {
            "sender": s,
            "receiver": r,
            "kind": k,
            "sent": sent_keys.get((s, r, k), 0),
            "received": recv_keys.get((s, r, k), 0),
        }
        for (s, r, k) in sorted(set(sent_keys) | set(recv_keys))
        if sent_keys.get((s, r, k), 0) != recv_keys.get((s, r, k), 0)
    ]
    mismatches = [d for d in differences if d["sender"] not in dropped and d["receiver"] not in dropped]
    explained = [d for d in differences if d["sender"] in dropped or d["receiver"] in dropped]
    return {
        "total": sum(v["count"] for v in by_kind.values()),
        "bytes": sum(v["bytes"] for v in by_kind.values()),
        "by_kind": dict(sorted(by_kind.items())),
        "by_party": dict(sorted(by_party.items())),
        "heartbeats": heartbeats,
        "rejected": rejected,
        "strangers": strangers,
        "consistency": {
            "sent": sum(sent_keys.values()),
            "received": sum(recv_keys.values()),
            "agree": not mismatches,
            "mismatches": mismatches,
            "explained_by_dropouts": explained,
        },
    }


def timing_summary(parties: list[dict[str, Any]], wall_s: float, extra_transport_s: float = 0.0) -> dict[str, Any]:
    """Wall time, and the parties' time split into protocol compute and transport (codec + socket I/O),
    over the parties whose reports state their timings (in a deployment an owner keeps its own: its
    compute time grows with its rows; see :mod:`marketplace.runtime.publication`)."""
    per_party = {}
    compute = transport = 0.0
    for p in parties:
        t = p.get("timing")
        if t is None:
            continue  # no report, or a party that kept its timings to itself
        c = t.get("compute_s", 0.0)
        tr = t.get("codec_s", 0.0) + t.get("io_s", 0.0)
        compute += c
        transport += tr
        per_party[p["id"]] = {
            "compute_s": c,
            "transport_s": tr,
            "idle_s": t.get("idle_s", 0.0),
            "wall_s": t.get("wall_s"),
        }
    out = {"wall_s": wall_s, "compute_s": compute, "transport_s": transport + extra_transport_s, "by_party": per_party}
    curator = next((p for p in parties if p.get("id") == "curator"), None)
    driver = (curator or {}).get("driver") or {}
    if "last_arrival_s" in driver:  # over sockets: how long every party took to connect and say hello
        out["connect_s"] = driver["last_arrival_s"]
        out["connected"] = driver.get("arrivals", 0)
    return out


def write_messages_csv(report: dict[str, Any], path: Path) -> None:
    """One row per (scope, name): messages and bytes by kind and by party, for spreadsheets."""
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scope", "name", "count", "bytes", "received", "bytes_received"])
        for kind, v in report["messages"]["by_kind"].items():
            w.writerow(["kind", kind, v["count"], v["bytes"], "", ""])
        for party, v in report["messages"]["by_party"].items():
            w.writerow(["party", party, v["sent"], v["bytes_sent"], v["received"], v["bytes_received"]])
