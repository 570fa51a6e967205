"""``marketplace agent``: host data owners for a marketplace that stays up, through
:func:`marketplace.service.api.run_agent`. The flags of :class:`~marketplace.service.options.AgentOptions`
are added by :func:`add_agent_options` and read back into one by :func:`agent_options`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from marketplace.cli import console
from marketplace.cli.common import EXIT_USAGE, add_read_limits, ignore_stop_signals, log_at, read_limits
from marketplace.cli.console import add_console_flags
from marketplace.service.options import AgentOptions


def add_agent_parser(sub: argparse._SubParsersAction) -> None:
    """``marketplace agent --market ... --keys ... --ids ...``."""
    agent = sub.add_parser(
        "agent",
        help="host data owners for a marketplace that stays up: join its sessions until it stops",
        description="Connect each owner in --ids to the marketplace at --market under its own key (--keys holds "
        "<owner>.key_secret for each and the server's server.key), and take part in every session the "
        "server invites them to; each owner charges its lifetime ledger (in --ledgers) before it releases "
        "anything.",
    )
    add_agent_options(agent)
    agent.add_argument("--log-level", default="INFO")
    add_console_flags(agent, "the hosted owners' ledgers (spent, sales, earnings, declines, with plots)")
    agent.set_defaults(func=agent_command)


def add_agent_options(agent: argparse.ArgumentParser) -> None:
    """The flags of :class:`~marketplace.service.options.AgentOptions`, read back by :func:`agent_options`."""
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
    agent.add_argument(
        "--price-per-eps",
        type=float,
        metavar="P",
        help="the hosted owners' price per unit eps of privacy loss (under their ledgers' neighbouring relation), "
        "paid by every release (sketch, stc, pfds, summarize), instead of the marketplace's",
    )
    add_read_limits(agent)


def agent_options(args: argparse.Namespace) -> AgentOptions:
    """The :class:`~marketplace.service.options.AgentOptions` of the flags :func:`add_agent_options`
    added; ValueError names a bad ``--ids`` or ``--data``."""
    from marketplace.data.own_files import parse_data_files
    from marketplace.parties import parse_owner_ids

    try:
        owners = parse_owner_ids(args.ids, 1_000_000)
    except ValueError as err:
        raise ValueError(f"--ids: {err}") from None
    keys = Path(args.keys)
    return AgentOptions(
        market=args.market,
        keys=keys,
        owners=owners,
        work=Path(args.work) if args.work else None,
        ledgers=Path(args.ledgers) if args.ledgers else None,
        data=parse_data_files(args.data, owners) if args.data else None,
        exit_with=args.exit_with,
        schema=Path(args.schema) if args.schema else None,
        limits=read_limits(args),
        price=args.price,
        points=args.points,
        points_per_consumer=args.points_per_consumer,
        price_per_eps=args.price_per_eps,
    )


def agent_command(args: argparse.Namespace) -> int:
    """``marketplace agent``: :func:`marketplace.service.api.run_agent` until the marketplace stops it,
    SIGTERM or Ctrl-C."""
    from marketplace.service.api import run_agent

    log_at(args.log_level)
    shown = None
    try:
        options = agent_options(args)
        ledgers = options.ledgers if options.ledgers is not None else options.keys
        shown = console.start(args, console.owner_app(ledgers, list(options.owners)), "agent")
        status = run_agent(options)
    except ValueError as err:
        print(f"marketplace agent: {err}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        if shown is not None:
            shown.stop()
    ignore_stop_signals()
    return status
