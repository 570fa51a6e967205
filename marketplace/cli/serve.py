"""``marketplace serve`` (a marketplace that stays up, through :func:`marketplace.service.api.open_market`)
and ``keys consumer`` (a new consumer's kit; :mod:`marketplace.cli.tools` registers it under ``keys``).

The flags of :class:`~marketplace.service.options.ServeOptions` are added by :func:`add_serve_options`
and read back into one by :func:`serve_options`; ``agent`` and ``request`` are :mod:`.agent` and
:mod:`.request`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from marketplace.cli import console
from marketplace.cli.common import EXIT_INTERNAL, EXIT_OK, EXIT_USAGE, ignore_stop_signals, log_at
from marketplace.cli.console import add_console_flags
from marketplace.service.options import ServeOptions

if TYPE_CHECKING:
    from marketplace.scenario import Scenario

SERVE_EXAMPLES = """\
examples:
  marketplace serve scenarios/market-serve.yaml --state market --consumers alice,bob,carol
  marketplace request scenarios/sketch-quickstart.yaml --market tcp://127.0.0.1:7700 --keys market/consumers/alice
  marketplace keys consumer dave --market market   another consumer's kit (market/consumers/dave), admitted at once
  marketplace ledger show market/owners/owner-3.ledger.sqlite
  kill -TERM $(jq .pid market/server.json)        (or Ctrl-C): stops cleanly
"""


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    return _whole_number(text, 1)


def _count(text: str) -> int:
    return _whole_number(text, 0)


def add_serve_parser(sub: argparse._SubParsersAction) -> None:
    """``marketplace serve SCENARIO --state DIR ...``: its own flags around those of :func:`add_serve_options`."""
    serve = sub.add_parser(
        "serve",
        help="start a marketplace that stays up: a server, and owner agents, serving many consumers at once",
        description="Start the marketplace described by SCENARIO (its owners, data, transport and the owners' lifetime "
        "budgets; its protocol section is not used: each request brings its own) and keep it up until "
        "SIGTERM or Ctrl-C. Consumers send requests with `marketplace request`; each request runs as a "
        "session of its own over the parties' live connections (up to --max-sessions at once, admitted by "
        "--rule), and every owner charges its lifetime ledger first.",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("scenario", help="the marketplace's scenario file (YAML)")
    add_serve_options(serve)
    serve.add_argument(
        "--init",
        action="store_true",
        help="make the marketplace's missing keys and kits, write the scenario resolved to STATE/market.yaml, "
        "then exit (never replaces a key)",
    )
    serve.add_argument(
        "--kits",
        metavar="DIR",
        help="with --init: write each owner's kit to DIR/<owner>/ and each consumer's to DIR/consumers/<name>/ "
        "(one volume each, in a container deployment); the state keeps only their public keys",
    )
    serve.add_argument(
        "--chown", metavar="UID[:GID]", help="with --init: give the state and kits to this user (needs root)"
    )
    serve.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    serve.add_argument("--log-level", default="INFO")
    add_console_flags(serve, "the marketplace for its operator (sessions, latency, owners, /metrics)")
    serve.set_defaults(func=serve_command)


def add_serve_options(serve: argparse.ArgumentParser) -> None:
    """The flags of :class:`~marketplace.service.options.ServeOptions`, read back by :func:`serve_options`."""
    serve.add_argument(
        "--state",
        required=True,
        metavar="DIR",
        help="where the marketplace keeps its keys, the owners' ledgers and the sessions (kept across restarts)",
    )
    serve.add_argument(
        "--endpoint",
        default="tcp://127.0.0.1:7700",
        metavar="tcp://ADDR:PORT",
        help="the control endpoint (default: tcp://127.0.0.1:7700; tcp://0.0.0.0:7700 in a container)",
    )
    serve.add_argument(
        "--max-sessions",
        type=_positive_int,
        default=8,
        metavar="N",
        help="sessions that run at once at most (default: 8); further requests wait in the queue, as do "
        "requests that arrive while the running sessions are pressed for their deadlines",
    )
    serve.add_argument(
        "--ramp",
        type=_count,
        default=2,
        metavar="N",
        help="sessions younger than a second that may run at once (default: 2): a burst of requests starts at "
        "the pace at which the machine shows it copes; 0 lifts the ramp (up to --max-sessions at once)",
    )
    serve.add_argument(
        "--references",
        action="store_true",
        help="compute the central references of a simulated marketplace (baselines, central replays, the "
        "truth on everyone's rows) for every session; by default only for a request that asks "
        "(marketplace request --references): they cost the server the protocol's work again",
    )
    serve.add_argument(
        "--rule",
        choices=("fcfs", "dpf"),
        default=None,
        help="the scheduling rule that admits waiting requests: fcfs (first come, first served) or dpf "
        "(Dominant Privacy Fairness, as in market workloads); default: fcfs",
    )
    serve.add_argument(
        "--unlock-steps",
        type=_positive_int,
        metavar="N",
        help="with --rule dpf: each arriving request unlocks 1/N of every owner's budget (default: 1024)",
    )
    # sessions run on the control connections now: these two are accepted, unused, so older command lines work
    serve.add_argument("--session-port", type=int, help=argparse.SUPPRESS)
    serve.add_argument("--advertise", help=argparse.SUPPRESS)
    serve.add_argument(
        "--consumers",
        default="",
        metavar="NAMES",
        help="comma-separated consumer names to make keys and kits for (STATE/consumers/<name>/), when missing",
    )
    serve.add_argument(
        "--no-owners", action="store_true", help="start no owner agents: owners connect with `marketplace agent`"
    )
    serve.add_argument(
        "--owner-data",
        metavar="DIR",
        help="a folder of <owner>.csv files (or .npz), one per owner: the "
        "agents serve starts give each owner its own file (a "
        "marketplace described by its public schema, data.schema)",
    )
    serve.add_argument(
        "--owners-per-process", type=int, metavar="N", help="owners per agent process (default: two agents)"
    )


def serve_options(args: argparse.Namespace) -> ServeOptions:
    """The :class:`~marketplace.service.options.ServeOptions` of the flags :func:`add_serve_options`
    added; ValueError names a bad consumer name."""
    return ServeOptions(
        state=Path(args.state),
        endpoint=args.endpoint,
        session_port=args.session_port,
        advertise=args.advertise,
        consumers=tuple(name.strip() for name in args.consumers.split(",") if name.strip()),
        start_owners=not args.no_owners,
        owners_per_process=args.owners_per_process,
        owner_data=Path(args.owner_data) if args.owner_data else None,
        max_sessions=args.max_sessions,
        ramp=args.ramp,
        rule=args.rule or "fcfs",
        unlock_steps=args.unlock_steps,
        references=args.references,
    )


KEYS_CONSUMER_EXAMPLES = """\
examples:
  marketplace keys consumer dave --market market
  marketplace request scenarios/sketch-quickstart.yaml --market tcp://127.0.0.1:7700 --keys market/consumers/dave
"""


def add_keys_consumer_parser(keys_sub: argparse._SubParsersAction) -> None:
    """``marketplace keys consumer NAME --market STATE``, an action of the ``keys`` command."""
    consumer = keys_sub.add_parser(
        "consumer",
        help="allow a new consumer at a marketplace that stays up: its key pair and kit, in the state folder",
        description="Make consumer NAME's key pair and kit in STATE/consumers/NAME/ (its secret key, the\n"
        "server's public key and market.yaml), as `serve --consumers NAME` does, and allow its public key\n"
        "(STATE/keys/consumers/NAME.key). A marketplace serving from STATE admits it at once, without a\n"
        "restart. An existing consumer is never replaced.",
        epilog=KEYS_CONSUMER_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    consumer.add_argument(
        "name",
        metavar="NAME",
        help="the consumer's name: lower case letters, digits, '-' and '_', starting with a letter",
    )
    consumer.add_argument(
        "--market", required=True, metavar="STATE", help="the marketplace's state folder (what `serve --state` took)"
    )
    consumer.set_defaults(func=keys_consumer_command)


def keys_consumer_command(args: argparse.Namespace) -> int:
    """``marketplace keys consumer``: :func:`marketplace.service.keys.add_consumer`, and how to use the kit."""
    from marketplace.service.keys import add_consumer

    try:
        kit = add_consumer(args.market, args.name)
    except (OSError, ValueError) as err:
        print(f"marketplace keys consumer: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"consumer {args.name!r}: its kit is {kit} (give it to the consumer: it holds its secret key)")
    print(f"a marketplace serving from {args.market} admits it now; send a request with:")
    print(f"  marketplace request SCENARIO.yaml --market {_control_endpoint(Path(args.market))} --keys {kit}")
    return EXIT_OK


def _control_endpoint(state: Path) -> str:
    """The endpoint a consumer reaches the marketplace at: the one its server.json names, unless it is
    an address of every interface (then the host is for the consumer to fill in)."""
    import json

    try:
        endpoint = str(json.loads((state / "server.json").read_text())["endpoint"])
    except (OSError, ValueError, KeyError, TypeError):
        return "tcp://HOST:PORT"
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    return f"tcp://HOST:{port}" if host in ("0.0.0.0", "*", "[::]", "") else endpoint


def serve_command(args: argparse.Namespace) -> int:
    """``marketplace serve``: :func:`marketplace.service.api.open_market` (or, with ``--init``, the keys
    and kits alone), served until SIGTERM or Ctrl-C."""
    from marketplace.api import load
    from marketplace.scenario import ScenarioError
    from marketplace.service.api import open_market
    from marketplace.service.options import ServeOptionsError

    log_at(args.log_level)
    try:
        market = load(args.scenario, sets=args.overrides)
        options = serve_options(args)
    except (ScenarioError, ValueError) as err:
        print(f"marketplace serve: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.init:
        return _init(args, market, options.consumers)
    try:
        # SIGTERM or Ctrl-C, even while the marketplace still starts, and however many: the handlers
        # only record them; the server's thread stops (marketplace.service.stop_signals)
        served = open_market(market, options, stop_on_signals=True)
    except ServeOptionsError as err:
        print(f"marketplace serve: {err}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:  # noqa: BLE001 - a bind that fails, a key that cannot be read
        print(f"marketplace serve: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    try:
        shown = console.start(args, console.operator_app(options.state), "serve")
    except ValueError as err:  # its address cannot be bound: the marketplace stops as on SIGTERM
        print(f"marketplace serve: {err}", file=sys.stderr)
        served.stop()
        ignore_stop_signals()
        return EXIT_USAGE
    try:
        return served.wait()
    except Exception as err:  # noqa: BLE001 - the server failed while serving
        print(f"marketplace serve: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        if shown is not None:
            shown.stop()
        ignore_stop_signals()


def _init(args: argparse.Namespace, market: Scenario, consumers: tuple[str, ...]) -> int:
    import os

    from marketplace.provision import parse_owner
    from marketplace.service.keys import init_keys
    from marketplace.service.state_lock import StateLock, StateLocked

    state, kits = Path(args.state), Path(args.kits) if args.kits else None
    lock = StateLock(state)  # held while --init writes: no server starts on a half-made state either
    try:
        owner = parse_owner(args.chown) if args.chown else None
        state.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock.acquire()
    except StateLocked as err:
        print(
            f"marketplace serve --init: --state {state}: a running marketplace holds this state folder "
            f"(`marketplace serve`, pid {err.holder}); expected a state folder no server uses, since --init "
            f"would rewrite its market.yaml and kits under it: nothing was changed. Stop that server first "
            f"(kill -TERM {err.holder}), or give --init another --state",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except (OSError, ValueError) as err:
        print(f"marketplace serve --init: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        # the marketplace's scenario, resolved, where the server can read it whoever owns the original, and in
        # every kit (public: an agent or consumer checks its own rows against its schema)
        init_keys(
            state,
            owners=market.config.parties.owners,
            consumers=list(consumers),
            kits=kits,
            market_text=market.dump_yaml(),
        )
    except (OSError, ValueError) as err:
        print(f"marketplace serve --init: {err}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        lock.release()
    if owner is not None:
        for root in (state, kits):
            if root is None:
                continue
            for path in [root, *root.rglob("*")]:
                os.chown(path, *owner)
    print(
        f"marketplace serve --init: keys of {market.config.parties.owners} owners and {len(consumers)} consumers "
        f"in {state}" + (f", kits in {kits}" if kits else "")
    )
    return EXIT_OK
