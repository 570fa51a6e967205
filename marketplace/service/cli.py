"""The command line of a marketplace that stays open: ``serve``, ``agent``, ``request``, and
``keys consumer`` (a new consumer's kit; :mod:`marketplace.cli.tools` registers it under ``keys``)."""

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


def add_parsers(sub: argparse._SubParsersAction) -> None:
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
    serve.set_defaults(func=serve_command)

    agent = sub.add_parser(
        "agent",
        help="host data owners for a marketplace that stays up: join its sessions until it stops",
        description="Connect each owner in --ids to the marketplace at --market under its own key (--keys holds "
        "<owner>.key_secret for each and the server's server.key), and take part in every session the "
        "server invites them to; each owner charges its lifetime ledger (in --ledgers) before it releases "
        "anything.",
    )
    agent.add_argument("--market", required=True, metavar="tcp://HOST:PORT", help="the marketplace's control endpoint")
    agent.add_argument("--keys", required=True, metavar="DIR", help="the owners' secret keys and server.key")
    agent.add_argument("--ids", required=True, help="the owners to host: owner-1..owner-8, or a comma list")
    agent.add_argument("--ledgers", metavar="DIR", help="where the owners' lifetime ledgers are kept (default: --keys)")
    agent.add_argument(
        "--work",
        metavar="DIR",
        help="session folders: each hosted owner's own report of each session, <session>/<owner>.json, readable "
        "by this user only (default: --keys/sessions)",
    )
    agent.add_argument(
        "--exit-with",
        type=int,
        metavar="PID",
        help="leave when process PID is gone (what serve passes to the agents it starts)",
    )
    agent.add_argument(
        "--data",
        metavar="SPEC",
        help="each hosted owner's own rows: FILE (an agent of one owner), "
        "owner-1=a.csv,owner-2=b.csv, or a folder of <owner>.csv (or .npz); "
        "checked against the marketplace's schema before the agent connects",
    )
    agent.add_argument(
        "--schema",
        metavar="MARKET.yaml",
        help="the marketplace's file (its public data schema) to check "
        "--data against (default: market.yaml in --keys, if there)",
    )
    agent.add_argument(
        "--price",
        type=float,
        metavar="P",
        help="the hosted owners' price per point they sell (summarize), instead of the marketplace's price; "
        "the marketplace's limits on points hold unless --points or --points-per-consumer is given too",
    )
    agent.add_argument(
        "--points", type=int, metavar="N", help="the most points each hosted owner sells in its lifetime"
    )
    agent.add_argument(
        "--points-per-consumer",
        type=int,
        metavar="N",
        help="the most points each hosted owner sells to any one consumer",
    )
    ReadLimits.add_arguments(agent)
    agent.add_argument("--log-level", default="INFO")
    agent.set_defaults(func=agent_command)

    req = sub.add_parser(
        "request",
        help="send a request to a marketplace that stays up, run its consumer and receive its report",
        description="Open a session at the marketplace --market with the consumer key in --keys (a consumer's kit: "
        "<name>.key_secret and server.key), run SCENARIO's protocol with its own target against the "
        "marketplace's owners, and write the session's report to --out.",
        epilog=SERVE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    req.add_argument("scenario", nargs="?", help="the request: a scenario file (protocol, its settings, data.consumer)")
    req.add_argument(
        "--resume",
        metavar="SESSION",
        help="instead of a new request, fetch again what an earlier session of yours released to you (after a "
        "lost connection or a close that timed out): your consumer runs its part again on it; nothing runs at "
        "the owners and nothing is charged",
    )
    req.add_argument("--market", required=True, metavar="tcp://HOST:PORT")
    req.add_argument("--keys", required=True, metavar="DIR", help="this consumer's kit")
    req.add_argument(
        "--out", metavar="DIR", help="output folder, new or empty (default: runs/<scenario name>-request-<time>)"
    )
    req.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    req.add_argument(
        "--wait", type=float, default=3600.0, metavar="SECONDS", help="give up after this long (queue included)"
    )
    req.add_argument(
        "--data",
        metavar="TARGET.csv",
        help="your own target D_v (CSV or .npz), for a marketplace described by "
        "its public schema: it stays with your consumer process",
    )
    req.add_argument("--test", metavar="TEST.csv", help="your own test set (same format as --data)")
    req.add_argument(
        "--schema",
        metavar="MARKET.yaml",
        help="the marketplace's file, to check --data against before "
        "the request is sent (default: market.yaml in --keys, if there)",
    )
    ReadLimits.add_arguments(req)
    req.add_argument("--quiet", action="store_true", help="print only the report's path and status")
    req.add_argument(
        "--chown-like",
        metavar="PATH",
        help="give the output folder and its files to the owner of PATH (a container writing into a host folder)",
    )
    req.set_defaults(func=request_command)


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


def _logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), format="%(asctime)s %(name)s %(message)s")


def serve_command(args: argparse.Namespace) -> int:
    """``marketplace serve``: :func:`marketplace.serve` (or, with ``--init``, the keys and kits
    alone), served until SIGTERM or Ctrl-C."""
    from marketplace.api import load
    from marketplace.scenario import ScenarioError
    from marketplace.service.api import serve
    from marketplace.service.keys import check_consumer_name

    _logging(args.log_level)
    try:
        market = load(args.scenario, sets=args.overrides)
        consumers = tuple(check_consumer_name(c.strip()) for c in args.consumers.split(",") if c.strip())
    except (ScenarioError, ValueError) as err:
        print(f"marketplace serve: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.init:
        return _init(args, market, consumers)
    from marketplace.service.options import ServeOptionsError

    try:
        served = serve(
            market,
            args.state,
            endpoint=args.endpoint,
            consumers=consumers,
            start_owners=not args.no_owners,
            owners_per_process=args.owners_per_process,
            owner_data=args.owner_data,
            max_sessions=args.max_sessions,
            ramp=args.ramp,
            rule=args.rule,
            unlock_steps=args.unlock_steps,
            # SIGTERM or Ctrl-C, even while the marketplace still starts, and however many: the handlers
            # only record them; the server's thread stops (marketplace.service.stop_signals)
            stop_on_signals=True,
        )
    except ServeOptionsError as err:
        print(f"marketplace serve: {err}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as err:  # noqa: BLE001 - a bind that fails, a key that cannot be read
        print(f"marketplace serve: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    try:
        return served.wait()
    except Exception as err:  # noqa: BLE001 - the server failed while serving
        print(f"marketplace serve: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        ignore_stop_signals()


def ignore_stop_signals() -> None:
    """Ignore SIGTERM and SIGINT from here on: the process has stopped and only exits. (The interpreter
    puts back the default action of a signal it handled when it shuts down, so a late signal of a burst
    would kill it with a status that says it was killed; an ignored signal stays ignored.)"""
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


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


def agent_command(args: argparse.Namespace) -> int:
    from marketplace.data.own_files import parse_data_files
    from marketplace.parties import parse_owner_ids
    from marketplace.service.agent import serve_agent

    _logging(args.log_level)
    try:
        owners = parse_owner_ids(args.ids, 1_000_000)
    except ValueError as err:
        print(f"marketplace agent: --ids: {err}", file=sys.stderr)
        return EXIT_USAGE
    keys = Path(args.keys)
    schema = Path(args.schema) if args.schema else keys / "market.yaml" if (keys / "market.yaml").is_file() else None
    try:
        terms = _agent_terms(args)
        files = parse_data_files(args.data, owners) if args.data else None
        if files and schema is None:
            raise ValueError(
                "--data needs the marketplace's file to check the rows against: --schema MARKET.yaml "
                "(or market.yaml in the kit)"
            )
        status = serve_agent(
            args.market,
            keys,
            owners,
            work=Path(args.work) if args.work else keys / "sessions",
            ledgers=Path(args.ledgers) if args.ledgers else None,
            data=files,
            exit_with=args.exit_with,
            market_file=schema,
            limits=ReadLimits.from_args(args),
            terms=terms,
        )
    except ValueError as err:
        print(f"marketplace agent: {err}", file=sys.stderr)
        return EXIT_USAGE
    ignore_stop_signals()
    return status


def _agent_terms(args: argparse.Namespace) -> dict[str, Any]:
    """The fields of the hosted owners' sale terms given by ``--price``, ``--points`` and
    ``--points-per-consumer``: each replaces that field of the marketplace's terms, the others stay the
    marketplace's (:func:`marketplace.service.agent.own_terms`, which refuses a bad value naming it)."""
    given = {"price": args.price, "points": args.points, "points_per_consumer": args.points_per_consumer}
    return {k: v for k, v in given.items() if v is not None}


def request_command(args: argparse.Namespace) -> int:
    """``marketplace request``: :func:`marketplace.request`, its report shown (and its files given
    to the owner of ``--chown-like``). ``--out`` must be new or empty, as for ``marketplace run``."""
    from marketplace.api import load
    from marketplace.data.own_files import OwnDataError
    from marketplace.runner.run import RunFolderError, default_run_folder
    from marketplace.scenario import ScenarioError
    from marketplace.service.api import request, resume
    from marketplace.service.client import RequestFailed, RequestRefused

    if (args.scenario is None) == (args.resume is None):
        print(
            "marketplace request: expected a scenario file (a new request) or --resume SESSION (an earlier "
            f"session's outputs), got {'both' if args.scenario else 'neither'}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.resume is not None and args.overrides:
        print("marketplace request: --set changes a new request; --resume fetches a session as it ran", file=sys.stderr)
        return EXIT_USAGE
    if args.test and not args.data:
        print("marketplace request: --test needs --data (your target D_v) too", file=sys.stderr)
        return EXIT_USAGE
    say = (lambda text: None) if args.quiet else (lambda text: print(f"marketplace request: {text}", file=sys.stderr))
    limits = ReadLimits.from_args(args) if args.data else None
    try:
        if args.resume is not None:
            out = Path(args.out) if args.out else default_run_folder(args.resume, "resume")
            result = resume(
                args.resume,
                market=args.market,
                keys=args.keys,
                out=out,
                wait_s=args.wait,
                check=False,
                on_event=say,
                data=args.data,
                test=args.test,
                limits=limits,
            )
        else:
            try:
                scenario = load(args.scenario, sets=args.overrides)
            except ScenarioError as err:
                print(f"marketplace request: bad scenario: {err}", file=sys.stderr)
                return EXIT_USAGE
            out = Path(args.out) if args.out else default_run_folder(scenario.config.name, "request")
            result = request(
                scenario,
                market=args.market,
                keys=args.keys,
                out=out,
                wait_s=args.wait,
                check=False,
                on_event=say,
                data=args.data,
                test=args.test,
                schema=args.schema,
                limits=limits,
            )
    except RunFolderError as err:
        print(f"marketplace request: --out: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (RequestRefused, OwnDataError) as err:
        print(f"marketplace request: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (RequestFailed, OSError, ValueError) as err:
        print(f"marketplace request: {err}", file=sys.stderr)
        return EXIT_RUN_FAILED
    report = result.raw
    if args.chown_like:
        from marketplace.provision import chown_like

        chown_like(out, Path(args.chown_like))
    if not args.quiet and "messages" in report:
        from rich.console import Console

        from marketplace.runner.display import print_summary

        print_summary(Console(), report, str(out))
    else:
        print(f"{out}/{'report' if 'protocol' in report else 'failure'}.json: {report.get('status')}")
    for failure in report.get("failures") or []:
        print(f"marketplace request: run failed: {failure}", file=sys.stderr)
    return EXIT_OK if report.get("status") == "completed" else EXIT_RUN_FAILED
