"""What a market's requests bought and paid: per request, per owner over time, per consumer.

A protocol that sells points (``summarize``) reports its bill in its report's ``sale`` section: the
consumer's spending budget, what it paid in all and to each owner, and the points it bought (every
point an asked owner handed over, at that owner's posted price). Every request, whatever its
protocol, also pays each owner with a ``price_per_eps`` for the privacy its ledger charged
(:mod:`marketplace.privacy.lifetime.pricing`). Each owner's own ledger records the points it sold, the
privacy price and what it earned in all, in the report's ``lifetime.owners.<owner>.sale``. A request no
owner priced pays nothing.

Quality per unit paid divides a consumer's summed quality by what it paid in all; it reads as value
for money only for a figure where higher is better (an accuracy). For an error, a lower figure per
unit paid is not better value: read the quality and the price side by side.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def request_sale(report: Mapping[str, Any] | None) -> dict[str, Any]:
    """One request's bill: ``paid`` (for points and for privacy), ``privacy_paid`` (the part paid for the
    owners' privacy, as their ledgers recorded it), ``points_bought``, ``sold`` (owner -> points, from
    the owners' ledgers when they kept them, else the curator's bill) and ``earned`` (owner -> what it
    earned, points and privacy)."""
    sale = (report or {}).get("sale") or {}
    owners = (((report or {}).get("lifetime") or {}).get("owners")) or {}
    sales = {o: r["sale"] for o, r in owners.items() if isinstance(r.get("sale"), Mapping)}
    sold = {o: s["sold"] for o, s in sales.items()}
    earned = {o: s["earnings"] for o, s in sales.items()}
    privacy = math.fsum(float(s.get("privacy_earnings") or 0.0) for s in sales.values())
    for owner, n in (sale.get("bought") or {}).items():  # no ledger record: the curator's bill says it
        sold.setdefault(owner, n)
        earned.setdefault(owner, (sale.get("paid_to") or {}).get(owner, 0.0))
    return {
        "paid": float(sale.get("paid") or 0.0) + privacy,
        "privacy_paid": privacy,
        "points_bought": int(sale.get("points_bought") or 0),
        "sold": {o: n for o, n in sold.items() if n},
        "earned": {o: e for o, e in earned.items() if e},
    }


def owner_sales(rows: Sequence[Mapping[str, Any]], owner: str) -> dict[str, Any]:
    """``owner``'s points sold and earnings in all, and after each request of the stream (in stream
    order; a request that did not run adds nothing)."""
    points, money, points_after, earnings_after = 0, 0.0, [], []
    for row in rows:
        bill = row.get("sale") or {}
        points += int((bill.get("sold") or {}).get(owner) or 0)
        money += float((bill.get("earned") or {}).get(owner) or 0.0)
        points_after.append(points)
        earnings_after.append(money)
    return {
        "points_sold": points,
        "earnings": money,
        "points_sold_after": points_after,
        "earnings_after": earnings_after,
    }


def consumer_sales(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per consumer: its requests, how many were served, what it paid, points bought, its mean quality
    over the served requests that have one, and quality per unit paid (summed quality / paid; None
    when it paid nothing)."""
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        c = out.setdefault(
            row["consumer"], {"requests": 0, "served": 0, "paid": 0.0, "points_bought": 0, "_quality": []}
        )
        c["requests"] += 1
        c["served"] += row["status"] in ("served", "partial")
        bill = row.get("sale") or {}
        c["paid"] += float(bill.get("paid") or 0.0)
        c["points_bought"] += int(bill.get("points_bought") or 0)
        if row.get("quality") is not None:
            c["_quality"].append(float(row["quality"]))
    for c in out.values():
        values = c.pop("_quality")
        c["quality"] = math.fsum(values) / len(values) if values else None
        c["quality_per_paid"] = math.fsum(values) / c["paid"] if values and c["paid"] > 0 else None
    return out
