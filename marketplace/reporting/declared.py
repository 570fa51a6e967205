"""A protocol's declarations as a reader sees them: its release plan and its declared view as
Markdown tables, for ``marketplace protocols --privacy NAME`` and for the tables of docs/privacy.md,
which are made from the same declarations and checked against them.

``python -m marketplace.reporting.declared docs/privacy.md`` rewrites every block of that file that
starts with ``<!-- declared: NAME FILE -->`` and ends with ``<!-- /declared -->`` from protocol
NAME's declarations for the scenario in FILE (a path from the project's root).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from marketplace import plugins
from marketplace.privacy.view import REPORT, RUNTIME

__all__ = ["BLOCK", "declared_markdown", "rewrite"]

BLOCK = re.compile(r"(<!-- declared: (\S+) (\S+) -->\n)(.*?)(<!-- /declared -->)", re.S)


def _cost(row: dict[str, Any]) -> str:
    if "eps" in row:
        return f"eps {row['eps']:g}" + (f", delta {row['delta']:g}" if row.get("delta") else "")
    return f"rho {row['rho']:g}" + (" (Gaussian)" if "mu" in row else "")


def declared_markdown(name: str, config: Any) -> str:
    """Protocol ``name``'s release plan for owner-1 and the consumer, and its declared view, for
    ``config``, as Markdown."""
    exchange = plugins.exchange(name)
    lines = [
        "| party | release | to | mechanism | sensitivity | cost (each) | at most | ledger |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for party in ("owner-1", "consumer"):
        plan = exchange.release_plan(config, party)
        if plan is None:
            notes.append(f"* {party}: the protocol declares no release plan.")
            continue
        if plan.unbounded:
            notes.append(f"* {party}: no finite cost bounds a run: {plan.unbounded}.")
        elif not plan.releases:
            notes.append(f"* {party}: releases nothing derived from its data.")
        for row in plan.describe():
            account = plan.account(row["account"])
            lines.append(
                f"| {party} | `{row['release']}` | {', '.join(row['to'])} | {row['mechanism']} | "
                f"{row['sensitivity']:g} ({row['norm']}) | {_cost(row)} | {row['count']} | "
                f"`{account.dataset or account.name}` ({account.neighbouring.relation}) |"
            )
        if plan.not_covered:
            notes.append(f"* {party}: not covered by its cost: {plan.not_covered}.")
    out = ["Releases (from the release plan):", "", *lines, ""]
    if notes:
        out += [*notes, ""]
    view = exchange.declared_view(config)
    if view is None:
        return "\n".join([*out, "The protocol declares no view.", ""])
    common = set(RUNTIME) | set(REPORT)
    out += ["What each other party receives of an owner's data (the declared view):", ""]
    out += ["| observer | field | is | what it holds |", "|---|---|---|---|"]
    for seen in view:
        if seen in common:
            continue
        out.append(f"| {seen.observer} | `{seen.field}` | {seen.kind} | {seen.note} |")
    out += [
        "",
        "Besides these, every party receives the runtime's own messages (`hello`, `heartbeat`, `error`, "
        "`shutdown`, `bye`) and the consumer the run report's common sections, all public.",
        "",
    ]
    return "\n".join(out)


def rewrite(path: Path, root: Path) -> bool:
    """Rewrite the declared blocks of ``path`` (scenario files relative to ``root``); whether it changed."""
    from marketplace.scenario.load import load_scenario

    text = path.read_text()

    def block(match: re.Match[str]) -> str:
        name, scenario = match.group(2), match.group(3)
        config = load_scenario(root / scenario).config
        return match.group(1) + declared_markdown(name, config) + match.group(5)

    new = BLOCK.sub(block, text)
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    target = Path(sys.argv[1])
    changed = rewrite(target, Path.cwd())
    print(f"{target}: {'rewritten' if changed else 'already up to date'}")
