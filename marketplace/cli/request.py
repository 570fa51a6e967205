"""``marketplace request``: send a request to a marketplace that stays up (or fetch an earlier
session's outputs again, ``--resume``), through :func:`marketplace.service.api.request` and
:func:`marketplace.service.api.resume`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from marketplace.cli.common import EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, add_read_limits, positive_int, read_limits
from marketplace.cli.serve import SERVE_EXAMPLES
from marketplace.cli.shop import max_price, refusal


def add_request_parser(sub: argparse._SubParsersAction) -> None:
    """``marketplace request SCENARIO --market ... --keys ...``."""
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
    req.add_argument(
        "--references",
        action="store_true",
        help="ask for the central references of a simulated marketplace in the report (baselines, central "
        "replays, computed by the server on everyone's rows); without it they are absent, each named in "
        "references_absent",
    )
    req.add_argument(
        "--repeat",
        type=positive_int,
        default=None,
        metavar="N",
        help="send the same request N times, one after another on one connection (one handshake, one start): "
        "report i goes to OUT/i (OUT/1, OUT/2, ...); one line per request with its latency, then p50/p95 "
        "latency and requests per minute; the exit status is 0 only if every request completed",
    )
    req.add_argument(
        "--max-price",
        type=max_price,
        metavar="X",
        help="quote the request first (marketplace quote) and refuse to send it when its quoted money is above X; "
        "nothing is then reserved or charged",
    )
    add_read_limits(req)
    req.add_argument("--quiet", action="store_true", help="print only the report's path and status")
    req.add_argument(
        "--chown-like",
        metavar="PATH",
        help="give the output folder and its files to the owner of PATH (a container writing into a host folder)",
    )
    req.set_defaults(func=request_command)


def request_command(args: argparse.Namespace) -> int:
    """``marketplace request``: :func:`marketplace.request`, its report shown (and its files given
    to the owner of ``--chown-like``), then ``rounds.png`` drawn: report.json, the summary and the
    exit status do not wait for matplotlib. ``--out`` must be new or empty, as for ``marketplace run``."""
    from marketplace.data.own_files import OwnDataError
    from marketplace.runtime import RunFolderError, default_run_folder
    from marketplace.scenario import ScenarioError
    from marketplace.service.api import load_request, request, resume
    from marketplace.service.client import RequestFailed, RequestRefused

    if (args.scenario is None) == (args.resume is None):
        print(
            "marketplace request: expected a scenario file (a new request) or --resume SESSION (an earlier "
            f"session's outputs), got {'both' if args.scenario else 'neither'}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    conflict = _resume_conflict(args)
    if conflict is not None:
        print(f"marketplace request: {conflict}", file=sys.stderr)
        return EXIT_USAGE
    if args.test and not args.data:
        print("marketplace request: --test needs --data (your target D_v) too", file=sys.stderr)
        return EXIT_USAGE
    say = (lambda text: None) if args.quiet else (lambda text: print(f"marketplace request: {text}", file=sys.stderr))
    limits = read_limits(args) if args.data else None
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
                plots=False,
            )
        else:
            try:
                scenario = load_request(args.scenario, sets=args.overrides, keys=args.keys, schema=args.schema)
            except ScenarioError as err:
                print(f"marketplace request: bad scenario: {err}", file=sys.stderr)
                return EXIT_USAGE
            out = Path(args.out) if args.out else default_run_folder(scenario.config.name, "request")
            if args.repeat is not None:
                from marketplace.cli.request_repeat import repeat_request

                return repeat_request(args, scenario, out, say)
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
                references=args.references,
                plots=False,
                max_price=args.max_price,
            )
    except RunFolderError as err:
        print(f"marketplace request: --out: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (RequestRefused, OwnDataError) as err:
        print(f"marketplace request: {refusal(err)}", file=sys.stderr)
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
    from marketplace.cli.request_repeat import draw_after

    draw_after(report, out, args.chown_like)
    return EXIT_OK if report.get("status") == "completed" else EXIT_RUN_FAILED


def _resume_conflict(args: argparse.Namespace) -> str | None:
    """Why the flags given do not go with ``--resume`` (they shape a new request), or None."""
    if args.resume is None:
        return None
    if args.overrides:
        return "--set changes a new request; --resume fetches a session as it ran"
    if args.repeat is not None:
        return "--repeat sends a new request N times; --resume fetches one session"
    if args.max_price is not None:
        return "--max-price limits what a new request may cost; --resume fetches a session (nothing is charged)"
    return None
