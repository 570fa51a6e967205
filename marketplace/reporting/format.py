"""Number formatting and the sweep table header shared by the terminal tables."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from marketplace.messages.errors import cut

if TYPE_CHECKING:
    from rich.table import Table


def fmt(value: Any, digits: int = 4) -> str:
    """A value for a table cell: '-' for None, 4 significant digits for floats."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 owner``, ``2 owners`` (``many`` for irregular plurals)."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def shorten(text: str, limit: int = 240) -> str:
    """``text`` on one line, cut to about ``limit`` characters for a table cell or a terminal line,
    saying how long it was (the full text stays in report.json)."""
    return cut(" ".join(str(text).split()), limit, whole="report.json")


def mean_sd(row: dict[str, Any], column: str, spec: str, *, sd: bool = True) -> str:
    """``mean±sd`` of a sweep summary column (``column_mean``, ``column_sd``); '-' when missing."""
    mean, spread = row.get(f"{column}_mean"), row.get(f"{column}_sd")
    if mean is None:
        return "-"
    return f"{mean:{spec}}±{spread:{spec}}" if sd and spread else f"{mean:{spec}}"


def sweep_table_head(title: str, caption: str, keys: list[str]) -> Table:
    """A sweep's summary table with one column per swept key (its last dotted part); each protocol
    adds its own columns and rows."""
    from rich.table import Table

    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    for key in keys:
        table.add_column(key.rsplit(".", 1)[-1], no_wrap=True)
    return table


def relation_text(entry: dict[str, Any]) -> str:
    """ "replace-one: a row of D_v" from a ledger's ``neighbouring`` (or says that none is stated)."""
    relation = entry.get("neighbouring") or {}
    if not relation:
        return "neighbouring relation not stated"
    return f"{relation.get('relation')}: {relation.get('record')}"


def accountant_text(entry: dict[str, Any]) -> str:
    """What produced a ledger's (eps, delta), as the ledger states it in ``accountant`` (or says
    that it does not)."""
    accountant = entry.get("accountant")
    return accountant if isinstance(accountant, str) and accountant else "accountant not stated"


def ledger_text(name: str, entry: dict[str, Any], mechanism: str | None = None) -> str:
    """One privacy row: "D_s: eps = 0.025, delta = 0.0001 (exact Gaussian (...); replace-one: a
    point of D_s)", with the ledger's own ``accountant``; ``mechanism`` (the noise) goes first when given."""
    how = accountant_text(entry) if mechanism is None else f"{mechanism}, {accountant_text(entry)}"
    return f"{name}: eps = {fmt(entry.get('eps'))}, delta = {fmt(entry.get('delta'))} ({how}; {relation_text(entry)})"
