"""How a `summarize` report reads on the terminal: its head rows (rounds, parsimony, the central replay
check, each ledger of a private run and what the parties' lifetime ledgers were charged) and the table
of the summary's quality next to the baselines'. Reads the report only, never a world."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from marketplace.reporting.absent import is_absent
from marketplace.reporting.charge import charge_rows
from marketplace.reporting.format import fmt, ledger_text


def head_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [("rounds", f"{len(report.get('selection', []))} ({report.get('end_reason') or '-'})")]
    pars = report.get("parsimony") or {}
    sizes = f"|D_s| = {pars.get('summary_size', '-')}, |D_v| = {pars.get('validation_size', '-')}"
    if pars.get("embeddings_seen"):  # a less-trusted curator: embeddings instead of points
        rows.append(
            (
                "parsimony",
                f"rho = {fmt(pars.get('rho'))}, over embeddings {fmt(pars.get('rho_embeddings'))}  "
                f"(less-trusted curator saw {pars.get('points_seen', '-')} raw points and "
                f"{pars['embeddings_seen']} h1 embeddings; {sizes})",
            )
        )
    else:
        rows.append(
            ("parsimony", f"rho = {fmt(pars.get('rho'))}  (curator saw {pars.get('points_seen', '-')} points; {sizes})")
        )
    replay = report.get("checks", {}).get("central_replay", {})
    if replay.get("applicable", True):
        replayed = replay.get("dropouts_replayed") or {}
        without = (
            (
                f" (replayed without {', '.join(f'{o} from round {r}' for o, r in list(replayed.items())[:5])}"
                f"{', ...' if len(replayed) > 5 else ''})"
            )
            if replayed
            else ""
        )
        rows.append(
            ("check", f"selection equals the central replay of the protocol rule: {replay.get('matches')}{without}")
        )
    if private_run(report):
        for name, ledger in report.get("privacy", {}).items():
            if isinstance(ledger, dict) and "eps" in ledger:
                rows.append(("privacy", ledger_text(name, ledger)))
        rows += lifetime_rows(report)
        auction = report.get("auction") or {}
        if auction.get("warning"):
            rows.append(("[bold red]warning[/]", f"[red]{auction['warning']}[/]"))
    if report.get("sale"):
        rows.append(("sale", sale_text(report["sale"])))
    if report.get("flagged"):
        rows.append(("flagged", ", ".join(report["flagged"])))
    return rows


OWNER_LEDGERS = ("auction", "D_s")
"""The run's ledgers an owner's lifetime charge covers, added up (basic composition across them)."""
CONSUMER_LEDGER = "consumer:D_v"
"""The run's ledger the consumer's own lifetime charge covers."""


def lifetime_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """What each owner's and the consumer's lifetime ledger was charged, beside what the run's ledgers
    state: an owner's charge covers the auction and D_s together, declared before the run for all its
    rounds (the report's ``auction.declared``)."""
    privacy = report.get("privacy") or {}
    spent = [privacy.get(name, {}).get("eps") for name in OWNER_LEDGERS]
    declared = (report.get("auction") or {}).get("declared") or {}
    plan = (
        f" (the auction over {declared['rounds']} rounds, eps {fmt(declared['auction']['eps'], 6)}, and D_s's g_l "
        f"releases, eps {fmt(declared['D_s']['eps'], 6)}, added up)"
        if declared
        else ""
    )
    owners = (report.get("lifetime") or {}).get("owners") or {}
    stated = sum(spent) if all(isinstance(e, (int, float)) for e in spent) else None
    rows = charge_rows(report, dict.fromkeys(owners, stated), stated_as="the auction and D_s rows added up", plan=plan)
    consumer = privacy.get(CONSUMER_LEDGER) or {}
    return rows + charge_rows(report, {"consumer": consumer.get("eps")})


def sale_text(sale: dict[str, Any]) -> str:
    """``12 points bought for 30 (budget 40); 3 owners paid``: what the consumer paid for the points."""
    budget = sale.get("spending_budget")
    paid_to = sale.get("paid_to") or {}
    text = (
        f"{sale.get('points_bought', 0)} points bought for {fmt(sale.get('paid'))}"
        f" ({'budget ' + fmt(budget) if budget is not None else 'no spending budget'}); "
        f"{sum(1 for v in paid_to.values() if v)} owners paid"
    )
    if sale.get("asks_not_sent"):
        text += f"; {sale['asks_not_sent']} asks not sent (over budget)"
    return text


def private_run(report: dict[str, Any]) -> bool:
    """Whether the report is of a run with ``summarize.privacy.enabled``."""
    return bool(report.get("config", {}).get("summarize", {}).get("privacy", {}).get("enabled", False))


def tables(report: dict[str, Any]) -> list[Table]:
    quality = Table(
        title="summary quality: exact-kernel MMD^2 to D_v of the summary alone and with the public seed set "
        "(what the greedy rules minimize); accuracy on the consumer's test set",
        title_justify="left",
    )
    quality.add_column("summary")
    quality.add_column("MMD^2 to D_v", justify="right")
    quality.add_column("with seed set", justify="right")
    quality.add_column("linear-SVM accuracy", justify="right")
    m = report["metrics"]
    label = "protocol (private)" if private_run(report) else "protocol (non-private greedy)"
    quality.add_row(label, fmt(m.get("mmd2")), fmt(m.get("mmd2_with_seed_set")), fmt(m.get("accuracy")))
    baselines = m.get("baselines", {})
    if is_absent(baselines):  # a marketplace described by its schema: nobody holds every party's rows
        quality.add_row("baselines", *["not computed"] * 3, style="dim")
        quality.caption = (
            "the consumer measured the summary on its own rows; the baselines need every party's rows, "
            "which nobody holds here (references_absent in report.json)"
        )
        return [quality]
    for name, b in baselines.items():
        quality.add_row(
            name.replace("_", " "), fmt(b.get("mmd2")), fmt(b.get("mmd2_with_seed_set")), fmt(b.get("accuracy"))
        )
    caption = [
        f"{what} {m[key]:+.1f}% against the non-private greedy's"
        for key, what in (
            ("mmd2_with_seed_set_increase_over_greedy_pct", "private MMD^2 with the seed set (the objective):"),
            ("mmd2_alone_increase_over_greedy_pct", "private MMD^2 of the summary alone:"),
        )
        if m.get(key) is not None
    ]
    if caption:
        quality.caption = "; ".join(caption)
    return [quality]
