"""What a run lost: the owners the curator went on without, and whether anything of the owners'
reached the result at all. A run that lost every owner, or ended with nothing from them, is a
failed run whatever its parties say: its metrics would be the consumer's alone."""

from __future__ import annotations

from typing import Any

from marketplace.messages.errors import cut

SHOWN = 10
"""Lost owners named one by one in the summary line; the rest are counted (report.json has all)."""


def excluded_owners(curator: dict[str, Any]) -> dict[str, str]:
    """Owner id -> why the curator took it out of the run, from the curator's result: its
    ``dropouts`` (lost, silent, refused) and the owners it ``flagged`` (a release it could not use)."""
    out: dict[str, str] = {}
    for owner, record in (curator.get("dropouts") or {}).items():
        record = record if isinstance(record, dict) else {}
        if record.get("declined"):
            continue  # it declined under its lifetime budget: not lost (see declined_owners)
        where = f"round {record['round']}: " if record.get("round") is not None else ""
        out[str(owner)] = f"{where}{record.get('reason') or 'lost'}"
    for owner, problem in (curator.get("flagged") or {}).items():
        out.setdefault(str(owner), f"flagged: {problem}")
    return out


def declined_owners(curator: dict[str, Any]) -> dict[str, str]:
    """Owner id -> why it declined the run under its lifetime budget (the curator's dropouts
    marked ``declined``)."""
    return {
        str(o): str(r.get("reason") or "declined")
        for o, r in (curator.get("dropouts") or {}).items()
        if isinstance(r, dict) and r.get("declined")
    }


def owners_lost(owners: int, curator: dict[str, Any]) -> dict[str, Any]:
    """The report's ``owners_lost`` section: how many of the run's ``owners`` were lost, which and
    why, and one line that says it (the terminal's summary shows it)."""
    lost = excluded_owners(curator)
    if not lost:
        summary = f"none of {owners} owners lost"
    else:
        named = ", ".join(f"{o} ({cut(why, 120)})" for o, why in list(lost.items())[:SHOWN])
        more = f", and {len(lost) - SHOWN} more (report.json: owners_lost)" if len(lost) > SHOWN else ""
        summary = f"{len(lost)} of {owners} owners lost: {named}{more}"
    return {"count": len(lost), "owners": owners, "lost": lost, "summary": summary}


def loss_failures(lost: dict[str, Any], nothing_released: str | None, declined: int = 0) -> list[str]:
    """Why the run failed because of what it lost: every owner lost or declined, or
    (``nothing_released``, the protocol's own check) nothing of the owners in the result. Empty when
    the run kept something."""
    if lost["owners"] and lost["count"] >= lost["owners"]:
        return [f"every owner was lost ({lost['summary']}): the protocol could not finish with its owners"]
    if lost["owners"] and lost["count"] + declined >= lost["owners"]:
        return [
            f"every owner declined (its lifetime budget) or was lost ({declined} declined; {lost['summary']}): "
            "nothing of the owners could be released"
        ]
    if nothing_released:
        return [f"nothing from the owners reached the result: {nothing_released}"]
    return []
