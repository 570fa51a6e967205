"""What each owner gave up over a run, and to whom: the report's ``privacy_per_owner`` section and
its terminal table (the runner finds a run's exposures with :func:`marketplace.runtime.per_owner.owner_section`).

The ledgers are kept per protected dataset (``D_s``, ``auction``, an owner's rows); an owner wants
to know, for each party that observes something of its data (the consumer, the curator, the other
owners), which ledgers bound what that party learns about its records, and what nothing bounds.
Each exchange states its protocol's model (``owner_exposure(config, report)``, following the "who
observes what" of ``docs/privacy.md``) as a list of :class:`Exposure` per owner, naming ledgers by
their key in ``report["privacy"]``; this module reads those ledgers generically (eps, delta,
accountant, neighbouring relation and scope, and ``noise`` when a ledger has it), writes the owner's
own id as ``<owner>`` so that owners in the same position read alike, and collapses owners whose
rows are identical into one group (``owner-1..owner-64``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from rich.table import Table

from marketplace.reporting.format import fmt, shorten

OWNER = "<owner>"
"""Stands for each owner of a group in the section's text."""

OTHER_OWNERS = "other owners"

TABLE_GROUPS = 12
"""The terminal shows at most this many groups of owners (report.json has them all)."""

LEDGER_FIELDS = ("eps", "delta", "accountant", "neighbouring", "noise")
"""What a row copies from a ledger (those it has)."""


@dataclass(frozen=True)
class Exposure:
    """What one observer receives of an owner's data, the ledgers that bound what it learns (keys
    of ``report["privacy"]``), and what nothing bounds."""

    observer: str
    sees: str
    ledgers: tuple[str, ...] = ()
    not_protected: tuple[str, ...] = field(default_factory=tuple)


def per_owner_section(
    owners: list[str], exposures: dict[str, list[Exposure]], privacy: dict[str, Any]
) -> dict[str, Any]:
    """``{"groups": [{"owners", "label", "observers": [...]}, ...]}``: each owner's exposures
    with their ledgers read from ``privacy``, identical owners grouped (first appearance first).
    With a single owner there are no other owners, and no row for them."""
    alone = len(owners) == 1  # no other owner to observe anything
    rows = {
        owner: [
            _observer(owner, e, privacy) for e in exposures.get(owner, []) if not (alone and e.observer == OTHER_OWNERS)
        ]
        for owner in owners
    }
    groups: dict[str, list[str]] = {}
    for owner in owners:
        groups.setdefault(json.dumps(rows[owner], sort_keys=True, default=str), []).append(owner)
    return {
        "groups": [
            {"owners": members, "label": owner_ranges(members), "observers": rows[members[0]]}
            for members in groups.values()
        ]
    }


def _observer(owner: str, exposure: Exposure, privacy: dict[str, Any]) -> dict[str, Any]:
    ledgers, not_protected = [], list(exposure.not_protected)
    for name in exposure.ledgers:
        entry = privacy.get(name)
        if not isinstance(entry, dict):
            not_protected.append(f"{name}: no ledger in the report")
        elif entry.get("guarantee") == "none":
            not_protected.append(f"{name}: {entry.get('note', 'no guarantee')}")
        else:
            view = {"ledger": name, **{k: entry[k] for k in LEDGER_FIELDS if k in entry}}
            if entry.get("eps") is None and entry.get("note"):
                view["note"] = entry["note"]
            ledgers.append(view)
    row = {"observer": exposure.observer, "sees": exposure.sees, "ledgers": ledgers, "not_protected": not_protected}
    return _generic(row, owner)


PLAIN = frozenset({int, float, bool, type(None)})
"""Values :func:`_generic` keeps as they are without a look (the rows' numbers: K owners x their rows)."""


def _generic(value: Any, owner: str) -> Any:
    """``value`` with the owner's own id written as ``<owner>`` (``owner-1`` but not ``owner-12``)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in PLAIN else _generic(v, owner) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in PLAIN else _generic(v, owner) for v in value]
    if isinstance(value, str):  # most hold no owner id: no pattern to build
        return re.sub(rf"{re.escape(owner)}(?!\d)", OWNER, value) if owner in value else value
    if isinstance(value, dict):
        return {k: _generic(v, owner) for k, v in value.items()}
    if isinstance(value, list):
        return [_generic(v, owner) for v in value]
    return value


def owner_ranges(owners: list[str]) -> str:
    """``owner-1..owner-4, owner-7`` for runs of consecutive owner numbers (other ids listed as they are)."""
    numbers, others = [], []
    for owner in owners:
        match = re.fullmatch(r"owner-(\d+)", owner)
        (numbers.append(int(match.group(1))) if match else others.append(owner))
    parts, numbers = [], sorted(set(numbers))
    start = prev = None
    for n in [*numbers, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            parts.append(f"owner-{start}" if start == prev else f"owner-{start}..owner-{prev}")
        start = prev = n
    return ", ".join(parts + others)


# --- the terminal table ----------------------------------------------------------------------------


def per_owner_table(section: Any) -> Table:
    """The section as a table: one row per group of owners and observer. Bad or missing data gives
    a table that says so instead of raising."""
    table = Table(
        title="what each owner gave up, and to whom (<owner>: each owner of the row; docs/privacy.md)",
        title_justify="left",
    )
    for name in ("owners", "observer", "sees", "bounded by", "not protected"):
        table.add_column(name, overflow="fold")
    try:
        groups = section["groups"]
        for group in groups[:TABLE_GROUPS]:
            first = True
            for obs in group["observers"]:
                table.add_row(
                    str(group.get("label", "-")) if first else "",
                    str(obs.get("observer", "-")),
                    shorten(obs.get("sees", "-"), 320),
                    _bounds(obs.get("ledgers") or []),
                    "\n".join(f"• {shorten(t, 320)}" for t in obs.get("not_protected") or []) or "-",
                )
                first = False
            table.add_section()
        if len(groups) > TABLE_GROUPS:
            rest = sum(len(g.get("owners") or ()) for g in groups[TABLE_GROUPS:])
            table.add_row(
                f"{len(groups) - TABLE_GROUPS} more groups ({rest} owners)",
                "",
                "",
                "in report.json (privacy_per_owner)",
                "",
            )
        if section.get("unavailable"):
            table.add_row("-", "-", "-", f"not available: {shorten(str(section['unavailable']), 200)}", "-")
        elif not groups:
            table.add_row("-", "-", "-", "no owner in this run", "-")
    except (KeyError, TypeError, AttributeError) as err:
        table.add_row("-", "-", "-", f"per-owner section unreadable ({type(err).__name__}: {err})", "-")
    return table


def _bounds(ledgers: list[Any]) -> str:
    if not ledgers:
        return "no ledger"
    return "\n".join(_ledger_line(entry) for entry in ledgers)


def noise_text(noise: dict[str, Any]) -> str:
    """A ledger's ``noise`` field in a few words: who could strip it (the report holds the rest),
    read from its ``origin`` (:func:`marketplace.privacy.noise.origin_of`), never from its wording,
    and, for a ledger whose ``coins`` another party could reproduce, that its eps does not hold
    against them."""
    from marketplace.privacy.noise import origin_of

    origin = origin_of(noise)
    if origin == "seed":
        who = "every party of the run (seed-derived)"
    elif origin == "key":
        where = str(noise.get("key_file") or "")
        who = "only the holder of " + (where.rsplit("/", 1)[-1] if where else "the party's noise key file")
    else:
        who = "nobody"
    text = f"noise strippable by: {who}"
    if noise.get("coins"):  # a sampled choice drawn from the same stream: whoever reproduces it voids the eps
        text += "; its coins reproducible by the same, so its eps does not hold against them"
    return text


def _ledger_line(entry: Any) -> str:
    if not isinstance(entry, dict):
        return f"unreadable ledger entry: {shorten(repr(entry), 80)}"
    name = entry.get("ledger", "?")
    if entry.get("eps") is None:
        return f"{name}: no figure ({entry.get('note', 'none stated')})"
    neighbouring = entry.get("neighbouring")
    relation = neighbouring if isinstance(neighbouring, dict) else {}
    text = (
        f"{name}: eps = {fmt(entry.get('eps'))}, delta = {fmt(entry.get('delta'))} "
        f"({entry.get('accountant') or 'accountant not stated'}; "
        f"{relation.get('relation', 'relation not stated')}: {relation.get('record', '-')})"
    )
    if relation.get("scope"):
        text += f"; scope: {shorten(relation['scope'], 320)}"
    noise = entry.get("noise")
    if isinstance(noise, dict) and noise:
        text += "; " + noise_text(noise)
    elif noise is not None:
        text += f"; noise: {noise}"
    return text
