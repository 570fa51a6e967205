"""What the commands that read a scenario share: the exit statuses, the ``--set`` flag, and the
scenario read from the command line as every command reads it."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from marketplace.scenario import Scenario

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_RUN_FAILED = 0, 1, 2, 3


def add_set(parser: argparse.ArgumentParser, *, help: str | None = None) -> None:
    """``--set KEY.PATH=VALUE`` (repeatable), collected in ``args.overrides``."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE", help=help)


def scenario_of(args: argparse.Namespace) -> Scenario | None:
    """``args.scenario`` read with its ``--set`` overrides, and with ``--insecure`` and ``--keys``
    when the command has them; None, after saying why on stderr, when no scenario was given or it
    is not a valid one (the command then exits 2)."""
    if args.scenario is None:
        print(
            f"marketplace {args.command}: no scenario: pass --scenario FILE or set MARKETPLACE_SCENARIO",
            file=sys.stderr,
        )
        return None
    if getattr(args, "insecure", False):
        args.overrides.append("transport.security=none")
    if getattr(args, "keys", None):
        args.overrides.append(f"transport.curve_keys={Path(args.keys).resolve()}")
    from marketplace.api import load
    from marketplace.scenario import ScenarioError

    try:
        return load(args.scenario, sets=args.overrides)
    except ScenarioError as err:
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        return None
