"""The consoles on the command line: the ``--console HOST:PORT`` and ``--console-token`` flags of
``serve`` and ``agent`` (:func:`add_console_flags`, :func:`start`), and ``marketplace console``, a
consumer's console of its output folders (``--reports DIR``), or an operator's (``--state``) or an
owner's (``--ledgers``, ``--ids``) started on its own, beside a server or an agent already running.

The web stack is imported only when a console is asked for (:mod:`marketplace.console.web`), so
``marketplace request`` and every command without ``--console`` start as fast as before.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from marketplace.cli.common import EXIT_OK, EXIT_USAGE

CONSOLE_EXAMPLES = """\
examples:
  marketplace console --reports runs                  a consumer's purchases: every report.json under runs/
  marketplace console --state market --listen 127.0.0.1:8081          the operator's, of a server running
  marketplace console --ledgers market/owners --ids owner-1..owner-3  the owners' ledgers
  marketplace console --reports runs --listen 0.0.0.0:8080            off loopback: a token is required
"""


def add_console_flags(parser: argparse.ArgumentParser, whose: str) -> None:
    """``--console HOST:PORT`` and ``--console-token`` on ``serve`` or ``agent``."""
    parser.add_argument(
        "--console",
        metavar="HOST:PORT",
        help=f"serve a read-only web console of {whose} at HOST:PORT (say 127.0.0.1:8080); off loopback it "
        "requires a token (--console-token, $MARKETPLACE_CONSOLE_TOKEN, or one made and printed at start)",
    )
    parser.add_argument(
        "--console-token", metavar="TOKEN", help="the token the console requires (default: none on loopback)"
    )


def start(args: argparse.Namespace, app: Callable[[str | None], Any], command: str) -> Any:
    """Start the console ``args`` asks for (None when it asks for none) serving ``app(token)``; a
    console that cannot start raises ValueError naming the flag."""
    if not getattr(args, "console", None):
        return None
    from marketplace.console import access
    from marketplace.console.web import ConsoleError, start_console

    try:
        listen = access.listen(args.console, args.console_token)
        return start_console(
            app(listen.token), listen, lambda line: print(f"marketplace {command}: {line}", file=sys.stderr, flush=True)
        )
    except (access.ConsoleAddressError, ConsoleError) as err:
        raise ValueError(str(err)) from None


def operator_app(state: Path) -> Callable[[str | None], Any]:
    """The operator's console of the marketplace serving from ``state``."""

    def make(token: str | None) -> Any:
        from marketplace.console.web import operator_app as app

        return app(state.resolve(), token)

    return make


def owner_app(ledgers: Path, owners: list[str]) -> Callable[[str | None], Any]:
    """The owners' console of ``owners``' ledgers in ``ledgers``."""

    def make(token: str | None) -> Any:
        from marketplace.console.web import owner_app as app

        return app(ledgers.resolve(), owners, token)

    return make


def add_console_parser(sub: argparse._SubParsersAction) -> None:
    """``marketplace console --reports DIR | --state DIR | --ledgers DIR --ids OWNERS [--listen HOST:PORT]``."""
    console = sub.add_parser(
        "console",
        help="a read-only web console: a consumer's purchases (--reports), or an operator's or owner's",
        description="Serve a read-only web console until Ctrl-C: a consumer's purchases, bills and each report's "
        "figures from its output folders (--reports DIR: every report.json under DIR), an operator's view of "
        "a running marketplace (--state DIR), or owners' ledgers (--ledgers DIR --ids OWNERS). `serve --console` "
        "and `agent --console` start the operator's and the owners' with the process they watch.",
        epilog=CONSOLE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = console.add_mutually_exclusive_group(required=True)
    which.add_argument("--reports", metavar="DIR", help="a consumer's output folders (marketplace request --out)")
    which.add_argument("--state", metavar="DIR", help="a served marketplace's state folder (serve --state)")
    which.add_argument("--ledgers", metavar="DIR", help="owners' ledger folder (agent --ledgers, or its --keys)")
    console.add_argument("--ids", help="with --ledgers: the owners, owner-1..owner-3 or a comma list")
    console.add_argument(
        "--listen", default="127.0.0.1:8080", metavar="HOST:PORT", help="where to serve it (default: 127.0.0.1:8080)"
    )
    console.add_argument(
        "--token", metavar="TOKEN", help="the token it requires (required off loopback: default one made and printed)"
    )
    console.set_defaults(func=console_command)


def _app(args: argparse.Namespace) -> Callable[[str | None], Any]:
    if args.state:
        return operator_app(Path(args.state))
    if args.ledgers:
        from marketplace.parties import parse_owner_ids

        if not args.ids:
            raise ValueError("--ledgers: expected --ids too (the owners whose ledgers to show)")
        return owner_app(Path(args.ledgers), parse_owner_ids(args.ids, 1_000_000))
    reports = Path(args.reports).resolve()
    if not reports.is_dir():
        raise ValueError(f"--reports {args.reports}: expected a folder (of marketplace request's output folders)")

    def make(token: str | None) -> Any:
        from marketplace.console.web import consumer_app

        return consumer_app(reports, token)

    return make


def console_command(args: argparse.Namespace) -> int:
    """``marketplace console``: serve the console asked for until SIGTERM or Ctrl-C."""
    import signal

    args.console, args.console_token = args.listen, args.token
    try:
        console = start(args, _app(args), "console")
    except ValueError as err:
        print(f"marketplace console: {err}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        console.stop()
    return EXIT_OK
