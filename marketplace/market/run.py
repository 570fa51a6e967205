"""Play a market file: each rule's play (:mod:`.player`), then the report (:mod:`.report`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marketplace.market.player import Outcome, play_rule
from marketplace.market.report import MarketReport, build_report
from marketplace.market.spec import MarketSpec, check_worlds, read_market

if TYPE_CHECKING:
    from marketplace.api import Driver, Launch


def play(
    source: str | Path | Mapping[str, Any] | MarketSpec,
    out: str | Path | None = None,
    *,
    driver: Driver = "processes",
    launch: Launch = "forkserver",
    seed: int | None = None,
    repeats: int | None = None,
    progress: Callable[[str, Outcome], None] | None = None,
) -> MarketReport:
    """Play a market file (a path, the mapping it holds, or a :class:`MarketSpec`) once per rule
    and return its :class:`~marketplace.market.report.MarketReport`, also written to ``out``
    (``market.json``, ``market.md``, ``budget.png``, ``quality.png`` and one folder per rule).

    ``out`` must be new or empty (default: ``runs/<market>-market-<timestamp>``); ``driver`` as
    :func:`marketplace.run`; ``seed`` replaces ``market.seed`` and ``repeats`` ``market.repeats``:
    with N repeats the whole stream is played N times under every rule, repeat i with seed
    ``seed + i`` from fresh ledgers in ``out/repeat-<i>/<rule>/``. ``progress(rule, outcome)`` is
    called as each request is settled (``rule`` reads ``repeat-<i>/<rule>`` when N > 1). Raises
    :class:`~marketplace.market.spec.MarketError` before anything runs if the file, or the data of
    one of its requests under any repeat's seed, is invalid."""
    from marketplace.runtime import check_run_folder, default_run_folder

    if driver not in ("processes", "inprocess"):
        raise ValueError(f"The 'driver' parameter of play must be 'processes' or 'inprocess'. Got {driver!r} instead.")
    if isinstance(source, MarketSpec):
        spec = _replaced(source, seed, repeats)
    else:
        spec = read_market(source, seed=seed, repeats=repeats)
    repeat_specs = [dataclasses.replace(spec, seed=s) for s in spec.seeds]
    for one in repeat_specs:  # every repeat's seed splits the data anew: each split must build
        check_worlds(one)
    folder = check_run_folder(out) if out is not None else default_run_folder(spec.name, "market")
    played = []
    for i, one in enumerate(repeat_specs):
        where = "" if spec.repeats == 1 else f"repeat-{i}/"
        shown = progress if progress is None or not where else _labelled(progress, where)
        played.append(
            [
                play_rule(
                    one,
                    rule,
                    folder / f"{where}{rule}",
                    driver=driver,
                    launch=launch,
                    on_request=shown,
                    where=f"{where}{rule}",
                )
                for rule in spec.rules
            ]
        )
    report = build_report(spec, played, driver=driver, folder=folder)
    report.write(folder)
    return report


def _replaced(spec: MarketSpec, seed: int | None, repeats: int | None) -> MarketSpec:
    """``spec`` with ``seed`` and ``repeats`` replaced where given (checked as the market file's)."""
    from marketplace.market.spec import MAX_REPEATS

    for name, value, low, high in (("seed", seed, 0, 2**63 - 1), ("repeats", repeats, 1, MAX_REPEATS)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            raise ValueError(
                f"The '{name}' parameter of play must be a whole number from {low} to {high}. Got {value!r} instead."
            )
    spec = spec if seed is None else dataclasses.replace(spec, seed=seed)
    spec = spec if repeats is None else dataclasses.replace(spec, repeats=repeats)
    if spec.seed + spec.repeats - 1 > 2**63 - 1:
        raise ValueError(f"The 'repeats' parameter of play would take seed {spec.seed} past 2**63 - 1.")
    return spec


def _labelled(progress: Callable[[str, Outcome], None], where: str) -> Callable[[str, Outcome], None]:
    """``progress`` with each rule named by its repeat's folder (``repeat-1/fcfs``)."""
    return lambda rule, outcome: progress(f"{where}{rule}", outcome)


play_market = play
"""The name :mod:`marketplace` exports :func:`play` under."""
