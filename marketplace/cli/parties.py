"""``marketplace curator|owner|consumer|owners``: one party, or an owner host of many owners, in
this process (what each container runs), through :func:`marketplace.runtime.party_process.run_host`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import TYPE_CHECKING

from marketplace.cli.common import EXIT_USAGE, add_read_limits, add_set, read_limits, scenario_of

if TYPE_CHECKING:
    from marketplace.scenario import Scenario

ROLES = (
    ("curator", "run the curator (binds a ROUTER at --endpoint)"),
    ("owner", "run one data owner (connects to the curator)"),
    ("consumer", "run the consumer (connects to the curator)"),
)


def _add_scenario(parser: argparse.ArgumentParser) -> None:
    """``--scenario``: what a party or an owner host runs."""
    parser.add_argument(
        "--scenario",
        default=os.environ.get("MARKETPLACE_SCENARIO"),
        help="scenario file (YAML); the same file for every party (default: $MARKETPLACE_SCENARIO)",
    )


def _add_run_id_and_logging(parser: argparse.ArgumentParser) -> None:
    """``--run-id``, ``--set`` and ``--log-level``, the same for a party and an owner host."""
    parser.add_argument(
        "--run-id",
        default=os.environ.get("MARKETPLACE_RUN_ID"),
        help="run id shared by all parties (default: $MARKETPLACE_RUN_ID, else <scenario name>-seed<seed>)",
    )
    add_set(parser)
    parser.add_argument("--log-level", default=os.environ.get("MARKETPLACE_LOG_LEVEL", "INFO"))


def add_party_parsers(sub: argparse._SubParsersAction) -> None:
    """``curator``, ``owner`` and ``consumer``."""
    for role, text in ROLES:
        p = sub.add_parser(
            role, help=text, description=text + ". The party builds its own data share from the scenario and seed."
        )
        _add_scenario(p)
        p.add_argument(
            "--endpoint",
            default=os.environ.get("MARKETPLACE_ENDPOINT"),
            help=(
                "ZeroMQ endpoint, e.g. tcp://127.0.0.1:5555 (curator: port 0 picks one; default: $MARKETPLACE_ENDPOINT)"
            ),
        )
        p.add_argument(
            "--report",
            metavar="FILE",
            help="write this party's part of the report here as JSON (default: parties/<party>.json); "
            "`marketplace assemble` joins them. It holds only what the party may publish: an owner's "
            "row count and timings stay out of it",
        )
        p.add_argument("--no-report", action="store_true", help="write no report")
        p.add_argument(
            "--own-report",
            metavar="FILE",
            help="also write this party's own report here: its report plus what it keeps to itself "
            "(under 'own': an owner's row count, the rows it handed over, its timings); for the party "
            "alone: keep it out of the folder `marketplace assemble` reads",
        )
        _add_run_id_and_logging(p)
        p.add_argument(
            "--keys",
            metavar="DIR",
            help="CURVE key folder made by `marketplace keys generate` (or transport.curve_keys)",
        )
        p.add_argument(
            "--insecure", action="store_true", help="plaintext link, for development only (no --keys needed)"
        )
        if role == "owner":
            p.add_argument("--id", required=True, help="owner id: owner-1 ... owner-K")
            p.add_argument(
                "--data",
                metavar="FILE",
                help="the owner's own rows: a CSV (or .npz) checked against the "
                "marketplace's public schema (data.schema); in a simulated "
                "scenario, an .npz (arrays X and y) instead of its generated share",
            )
            add_read_limits(p)
        if role == "consumer":
            p.add_argument(
                "--data",
                metavar="FILE",
                help="the consumer's own target D_v, a CSV (or .npz) checked against "
                "the marketplace's public schema (data.schema)",
            )
            p.add_argument("--test", metavar="FILE", help="the consumer's own test set (same format as --data)")
            add_read_limits(p)
        if role == "curator":
            p.add_argument("--endpoint-file", help="write the bound endpoint here once listening")
        p.set_defaults(func=party_command)


def add_owners_parser(sub: argparse._SubParsersAction) -> None:
    hosts = sub.add_parser(
        "owners",
        help="run many data owners in one process (an owner host)",
        description="Run several data owners in this one process: each is still a party of its own "
        "(its own socket and connection to the curator, its own CURVE key, data share, "
        "counters and report), but they share the process, so they are not isolated from "
        "each other. The owners build their data shares from the scenario and seed.",
    )
    hosts.add_argument(
        "--ids",
        required=True,
        help="the owners to serve: owner-1..owner-250, or a comma list (owner-1,owner-7,owner-10..owner-20)",
    )
    _add_scenario(hosts)
    hosts.add_argument(
        "--endpoint",
        default=os.environ.get("MARKETPLACE_ENDPOINT"),
        help="the curator's ZeroMQ endpoint, e.g. tcp://127.0.0.1:5555 (default: $MARKETPLACE_ENDPOINT)",
    )
    hosts.add_argument(
        "--report-dir",
        metavar="DIR",
        default="parties",
        help="write the owners' reports to DIR, in one file named after the host, e.g. "
        "DIR/owner-1..owner-250.json (default: parties)",
    )
    hosts.add_argument("--no-report", action="store_true", help="write no reports")
    hosts.add_argument(
        "--own-report-dir",
        metavar="DIR",
        help="also write the owners' own reports (their reports plus what each keeps to itself: its row "
        "count, its timings) to one file in DIR named after the host; keep DIR out of what "
        "`marketplace assemble` reads",
    )
    _add_run_id_and_logging(hosts)
    hosts.add_argument(
        "--keys",
        metavar="DIR",
        help="CURVE key folder holding every served owner's secret key and the "
        "curator's public key (`marketplace keys generate` writes one)",
    )
    hosts.add_argument(
        "--insecure", action="store_true", help="plaintext link, for development only (no --keys needed)"
    )
    hosts.add_argument(
        "--data",
        metavar="SPEC",
        help="each owner's own rows, checked against the marketplace's public "
        "schema: owner-1=a.csv,owner-2=b.csv, or a folder of <owner>.csv",
    )
    add_read_limits(hosts)
    hosts.set_defaults(func=owners_command)


def _scenario_and_endpoint(args: argparse.Namespace) -> Scenario | None:
    """The scenario, after checking that both it and the curator's endpoint were given; None after saying why."""
    if args.scenario is not None and not args.endpoint:
        print(
            f"marketplace {args.command}: no endpoint: pass --endpoint tcp://HOST:PORT or set MARKETPLACE_ENDPOINT",
            file=sys.stderr,
        )
        return None
    return scenario_of(args)


def party_command(args: argparse.Namespace) -> int:
    """``marketplace curator|owner|consumer``: one party, a host of one node."""
    scenario = _scenario_and_endpoint(args)
    if scenario is None:
        return EXIT_USAGE
    from marketplace.parties import party_ids
    from marketplace.runtime import run_host

    party = {"curator": "curator", "consumer": "consumer"}.get(args.command) or args.id
    logging.basicConfig(
        level=args.log_level.upper(), format=f"%(asctime)s {party} %(levelname)s %(message)s", stream=sys.stderr
    )
    if party not in party_ids(scenario.config):
        print(
            f"marketplace: unknown party {party!r}: this scenario has {', '.join(party_ids(scenario.config))}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    report = None if args.no_report else (args.report or f"parties/{party}.json")
    data = getattr(args, "data", None)
    try:
        return run_host(
            scenario,
            [party],
            endpoint=args.endpoint,
            report_to=report,
            own_report_to=args.own_report,
            run_id=args.run_id,
            endpoint_file=getattr(args, "endpoint_file", None),
            data_files={party: data} if data else None,
            test_file=getattr(args, "test", None),
            limits=read_limits(args) if hasattr(args, "max_bytes") else None,
        )
    except (ValueError, OSError) as err:
        print(f"marketplace {party}: cannot start: {err}", file=sys.stderr)
        return EXIT_USAGE


def owners_command(args: argparse.Namespace) -> int:
    """``marketplace owners``: an owner host, serving every owner of ``--ids`` from this process."""
    scenario = _scenario_and_endpoint(args)
    if scenario is None:
        return EXIT_USAGE
    from marketplace.data.own_files import parse_data_files
    from marketplace.parties import host_label, parse_owner_ids
    from marketplace.runtime import run_host

    try:
        owners = parse_owner_ids(args.ids, scenario.config.parties.owners)
    except ValueError as err:
        print(f"marketplace owners: --ids: {err}", file=sys.stderr)
        return EXIT_USAGE
    label = host_label(owners)
    logging.basicConfig(
        level=args.log_level.upper(), format=f"%(asctime)s {label} %(levelname)s %(message)s", stream=sys.stderr
    )
    try:
        files = parse_data_files(args.data, owners) if args.data else None
        return run_host(
            scenario,
            owners,
            endpoint=args.endpoint,
            run_id=args.run_id,
            hosted=True,
            report_to=None if args.no_report else args.report_dir,
            own_report_to=args.own_report_dir,
            data_files=files,
            limits=read_limits(args),
        )
    except (ValueError, OSError) as err:
        print(f"marketplace owners: cannot start: {err}", file=sys.stderr)
        return EXIT_USAGE
