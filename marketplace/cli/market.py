"""``marketplace run MARKET.yaml`` and ``marketplace validate MARKET.yaml``: a market file on the command line."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marketplace.market.player import Outcome
    from marketplace.market.spec import MarketSpec

EXIT_OK, EXIT_USAGE, EXIT_RUN_FAILED = 0, 2, 3


def market_command(args: argparse.Namespace) -> int:
    """Validate or play the market file ``args.scenario`` (a ``run`` or ``validate`` namespace);
    ``--seed`` replaces ``market.seed`` and ``--repeats`` ``market.repeats``. The command line stops
    the forkserver on every way out (:func:`marketplace.runtime.forkserver.forkserver_running`)."""
    from marketplace.market.spec import MarketError, check_worlds, describe, read_market

    unsupported = [
        flag
        for flag, given in (
            ("--set", getattr(args, "overrides", None)),
            ("--sweep", getattr(args, "sweeps", None)),
            ("--insecure", getattr(args, "insecure", False)),
        )
        if given
    ]
    if unsupported:
        print(
            f"marketplace {args.command}: {args.scenario} is a market file: {', '.join(unsupported)} applies to "
            f"scenarios; "
            "change the market file instead (its `scenario:` section holds what every request starts from; "
            "--seed and --repeats apply to a market too)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        spec = read_market(args.scenario, seed=args.seed, repeats=getattr(args, "repeats", None))
        check_worlds(spec)
    except MarketError as err:
        print(f"marketplace: bad market file: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "validate":
        print(describe(spec))
        return EXIT_OK
    return _play(args, spec)


def _play(args: argparse.Namespace, spec: MarketSpec) -> int:
    from rich.console import Console

    from marketplace.market.run import play
    from marketplace.market.tables import print_tables
    from marketplace.runtime import RunFolderError

    # an owner declining a request is the market at work, not a warning: each request's line says who declined
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    console = Console(stderr=False)
    if not console.is_terminal:
        console = Console(stderr=False, width=200)

    def shown(rule: str, outcome: Outcome) -> None:
        r = outcome.request
        if outcome.status == "not granted":
            text = outcome.reason or "not granted"
        else:
            text = outcome.status + (f" ({outcome.reason})" if outcome.reason and outcome.status != "declined" else "")
        console.print(f"{rule} {r.id} {r.consumer} {r.protocol}: {text}", highlight=False, soft_wrap=True)

    try:
        report = play(
            spec, args.out or None, driver=args.driver, launch=args.launch, progress=None if args.quiet else shown
        )
    except RunFolderError as err:
        print(f"marketplace run: --out: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("marketplace: interrupted; every party process was stopped", file=sys.stderr)
        return 130
    if not args.quiet:
        print_tables(console, report.raw)
    plays = f" ({report.repeats} repeats: repeat-0/ ... repeat-{report.repeats - 1}/)" if report.repeats > 1 else ""
    folder = report.folder  # play() wrote the report there
    sales = ", sales.png" if folder is not None and (folder / "sales.png").exists() else ""
    print(f"{folder}/market.json, market.md, budget.png, quality.png{sales}{plays}")
    return EXIT_OK
