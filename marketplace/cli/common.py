"""What the commands share: the exit statuses, the ``--set`` flag, the scenario read from the
command line as every command reads it, the limits on reading a party's own file
(:func:`add_read_limits`, :func:`read_limits`), and the logging and signals of the long-lived commands."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from marketplace.data.own_files import ReadLimits

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


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (``--repeats 0`` would run nothing and say it did)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def add_read_limits(parser: argparse.ArgumentParser) -> None:
    """``--max-bytes``, ``--max-rows``, ``--max-field-chars`` and ``--max-row-chars`` on a command that
    reads a party's file: the fields of :class:`~marketplace.data.own_files.ReadLimits`."""
    d = ReadLimits()
    for flag, value, what in (
        (
            "--max-bytes",
            d.max_bytes,
            "bytes of a data file (on disk, after decompression, and its features in memory)",
        ),
        ("--max-rows", d.max_rows, "rows of a data file"),
        ("--max-field-chars", d.max_field_chars, "characters in one CSV field"),
        ("--max-row-chars", d.max_row_chars, "characters in one CSV row"),
    ):
        parser.add_argument(
            flag, type=positive_int, default=value, metavar="N", help=f"read at most N {what} (default {value:,})"
        )


def read_limits(args: argparse.Namespace) -> ReadLimits:
    """The :class:`~marketplace.data.own_files.ReadLimits` of the flags :func:`add_read_limits` added."""
    return ReadLimits(
        max_bytes=args.max_bytes,
        max_rows=args.max_rows,
        max_field_chars=args.max_field_chars,
        max_row_chars=args.max_row_chars,
    )


def log_at(level: str) -> None:
    """Log at ``level`` (``--log-level``; an unknown name logs at INFO) to stderr, with the time."""
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), format="%(asctime)s %(name)s %(message)s")


def ignore_stop_signals() -> None:
    """Ignore SIGTERM and SIGINT from here on: the process has stopped and only exits. (The interpreter
    puts back the default action of a signal it handled when it shuts down, so a late signal of a burst
    would kill it with a status that says it was killed; an ignored signal stays ignored.)

    A signal of a burst that lands while its handler is being replaced is noted by CPython's C handler
    and then finds no Python handler: CPython writes it to stderr as an unraisable "OSError: Signal 15
    ignored due to race condition", traceback and all (bpo-43406). Ignoring it is what this process
    asked for, so from here on that one report is left out (any other unraisable error still shows)."""
    import signal

    report = sys.unraisablehook

    def quiet(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, OSError) and "ignored due to race condition" in str(unraisable.exc_value):
            return
        report(unraisable)

    sys.unraisablehook = quiet
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)
