"""Play a market file: each rule's play (:mod:`.player`), then the report (:mod:`.report`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from marketplace.market.player import Outcome, play_rule
from marketplace.market.report import MarketReport, build_report
from marketplace.market.spec import MarketSpec, check_worlds, read_market


def play(
    source: str | Path | Mapping[str, Any] | MarketSpec,
    out: str | Path | None = None,
    *,
    driver: str = "processes",
    launch: str = "forkserver",
    seed: int | None = None,
    progress: Callable[[str, Outcome], None] | None = None,
) -> MarketReport:
    """Play a market file (a path, the mapping it holds, or a :class:`MarketSpec`) once per rule
    and return its :class:`~marketplace.market.report.MarketReport`, also written to ``out``
    (``market.json``, ``market.md``, ``budget.png``, ``quality.png`` and one folder per rule).

    ``out`` must be new or empty (default: ``runs/<market>-market-<timestamp>``); ``driver`` as
    :func:`marketplace.run`; ``seed`` replaces ``market.seed``; ``progress(rule, outcome)`` is
    called as each request is settled. Raises :class:`~marketplace.market.spec.MarketError`
    before anything runs if the file, or the data of one of its requests, is invalid."""
    from marketplace.runner.run import check_run_folder, default_run_folder

    if driver not in ("processes", "inprocess"):
        raise ValueError(f"The 'driver' parameter of play must be 'processes' or 'inprocess'. Got {driver!r} instead.")
    if isinstance(source, MarketSpec):
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"The 'seed' parameter of play must be a whole number >= 0. Got {seed!r} instead.")
        spec = source if seed is None else dataclasses.replace(source, seed=seed)
    else:
        spec = read_market(source, seed=seed)
    check_worlds(spec)
    folder = check_run_folder(out) if out is not None else default_run_folder(spec.name, "market")
    plays = [
        play_rule(spec, rule, folder / rule, driver=driver, launch=launch, on_request=progress) for rule in spec.rules
    ]
    report = build_report(spec, plays, driver=driver, folder=folder)
    report.write(folder)
    return report


play_market = play
"""The name :mod:`marketplace` exports :func:`play` under."""
