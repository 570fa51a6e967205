"""The `marketplace` command line: the top-level parser, and ``main``.

Each command registers its own parser and handler (``set_defaults(func=...)``) from the module of
its group: :mod:`.run` (run, validate; a market file through :mod:`.market`), :mod:`.privacy`
(privacy compose, privacy calibrate), :mod:`.ledger`, :mod:`.serve` (serve, keys consumer),
:mod:`.agent`, :mod:`.request`, :mod:`.shop` (catalogue, quote), :mod:`.console` (the web consoles),
:mod:`.assemble`, :mod:`.provision`, :mod:`.tools` (shares, protocols, probe, keys), :mod:`.datasets` (data),
:mod:`.parties` (curator, owner, consumer, owners), and the subcommands a protocol plug-in adds
(:func:`marketplace.plugins.add_commands`).
Every handler calls the library it drives: the Python API (:mod:`marketplace.api`, :mod:`marketplace.service.api`), the
runner, the accountant, the ledgers, the dataset cache. Nothing of the library imports this package
(an import-linter contract in ``pyproject.toml``): only ``python -m marketplace`` does.
"""

from __future__ import annotations

import argparse
import os
import sys

from marketplace.cli.common import EXIT_OK, EXIT_USAGE
from marketplace.version import __version__

DESCRIPTION = """\
A privacy-preserving AI data marketplace. A curator, K data owners and a consumer run as separate
processes that talk msgpack over ZeroMQ; a scenario file (YAML) says what to run.

Start here:
  marketplace run scenarios/quickstart.yaml            run every party as its own process
  marketplace run scenarios/quickstart.yaml --driver inprocess --set parties.owners=8
  marketplace run scenarios/quickstart-private.yaml --driver inprocess --sweep summarize.rounds=20,40 --repeats 3
  marketplace validate scenarios/quickstart.yaml       check a scenario without running it
  marketplace run scenarios/market.yaml --driver inprocess   a market: requests against owners' lifetime budgets
  marketplace data fetch adult                         download a public dataset (checked) for the scenarios that use it
  marketplace privacy compose --epsilon 0.01 --count 1656 --delta 0.01 --theorem advanced
  marketplace ledger show kits/owner-1                 an owner's lifetime privacy ledger: spent, remaining, history
  marketplace sketch query RUN/sketches/merged.npz --scenario RUN/scenario.resolved.yaml --moments 2

One party at a time (what each container runs; each writes its report to parties/<party>.json):
  marketplace provision S.yaml --out kits --endpoint tcp://HOST:5555   one kit per party: keys and start.sh
  marketplace curator  --scenario S.yaml --endpoint tcp://0.0.0.0:5555 --keys kits/curator
  marketplace owner    --scenario S.yaml --endpoint tcp://HOST:5555 --keys kits/owner-1 --id owner-1
  marketplace owners   --scenario S.yaml --endpoint tcp://HOST:5555 --keys KEYS --ids owner-1..owner-250   (one process)
  marketplace consumer --scenario S.yaml --endpoint tcp://HOST:5555 --keys kits/consumer
  marketplace assemble parties --scenario S.yaml --out run          the run report from the parties' reports

A marketplace that stays up (docs/serve.md), and market workloads (docs/market.md):
  marketplace serve scenarios/market-serve.yaml --state market --consumers alice,bob,carol
  marketplace request scenarios/sketch-quickstart.yaml --market tcp://127.0.0.1:7700 --keys market/consumers/alice
  marketplace keys consumer dave --market market   another consumer's kit, admitted while it serves
  marketplace catalogue --market tcp://127.0.0.1:7700 --keys market/consumers/alice   what it sells
  marketplace quote scenarios/sketch-quickstart.yaml --market tcp://127.0.0.1:7700 --keys market/consumers/alice
  marketplace console --reports runs               a consumer's purchases in the browser (serve/agent: --console)

Exit status: 0 completed, 2 bad scenario or arguments (nothing started), 3 the run failed, 1 internal error.
"""


def _parser() -> argparse.ArgumentParser:
    """The whole command line; ``--help`` lists the commands in the order they are added here."""
    from marketplace import plugins
    from marketplace.cli import (
        agent,
        assemble,
        console,
        datasets,
        ledger,
        parties,
        privacy,
        provision,
        request,
        run,
        serve,
        shop,
        tools,
    )

    parser = argparse.ArgumentParser(
        prog="marketplace", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"marketplace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run.add_run_parser(sub)
    run.add_validate_parser(sub)
    privacy.add_parser(sub)
    ledger.add_parser(sub)
    serve.add_serve_parser(sub)
    agent.add_agent_parser(sub)
    request.add_request_parser(sub)
    shop.add_shop_parsers(sub)
    console.add_console_parser(sub)
    assemble.add_assemble_parser(sub)
    provision.add_parser(sub)
    tools.add_shares_parser(sub)
    tools.add_protocols_parser(sub)
    tools.add_probe_parser(sub)
    tools.add_keys_parser(sub)
    plugins.add_commands(sub)
    datasets.add_parser(sub)
    parties.add_party_parsers(sub)
    parties.add_owners_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``marketplace`` command. Output piped into a reader that stops early (``| head``) ends
    the command quietly, as with any Unix tool."""
    try:
        return _main(argv)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's final flush must not fail again
        return EXIT_OK


def _main(argv: list[str] | None = None) -> int:
    from marketplace.runtime import forkserver_running

    argv = sys.argv[1:] if argv is None else argv
    # a run that forks its parties starts the server first: its imports (half a second or more) run
    # while this process builds its parser, reads the scenario and builds the world; every way out of
    # the command (a parse error, a bad scenario, an interrupted run) stops it
    with forkserver_running(start=_runs_forked_parties(argv)):
        parser = _parser()
        _report_broken_plugins()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        return args.func(args)


def _report_broken_plugins() -> None:
    """One line on stderr per installed plug-in that cannot be loaded (:func:`marketplace.plugins.broken`):
    the command goes on without it, as does every command that does not use it."""
    from marketplace import plugins

    for name, reason in plugins.broken().items():
        print(f"marketplace: plug-in {name!r} left out: {reason}; commands that use it will fail", file=sys.stderr)


def _runs_forked_parties(argv: list[str]) -> bool:
    """Whether ``argv`` is a `marketplace run` that will fork its parties from the forkserver (the
    default), read before the parser is built, which imports half the libraries itself."""
    if len(argv) < 2 or argv[0] != "run" or any(a in ("-h", "--help") for a in argv):
        return False
    words = " ".join(argv[1:]).replace("=", " ").split()
    for option, default in (("--driver", "processes"), ("--launch", "forkserver")):
        given = [words[i + 1] for i, w in enumerate(words[:-1]) if w == option]
        if (given[-1] if given else default) != default:
            return False
    return True


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
