"""``marketplace assemble``: the run report of parties that ran on their own (by hand, compose,
Kubernetes), from the reports each of them wrote."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from marketplace.cli.common import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_USAGE,
    add_set,
    scenario_of,
)


def add_assemble_parser(sub: argparse._SubParsersAction) -> None:
    assemble = sub.add_parser(
        "assemble",
        help="build the run report from the reports of parties that ran on their own (by hand, compose, Kubernetes)",
        description="Read DIR/<party>.json written by each party (--report), rebuild the world from the "
        "scenario for the evaluation, and write OUT/report.json and OUT/messages.csv.",
    )
    assemble.add_argument(
        "parties",
        metavar="DIR",
        help="folder holding the parties' reports: curator.json, consumer.json, owner-N.json, and "
        "owner hosts' files (owner-1..owner-250.json)",
    )
    assemble.add_argument(
        "--scenario",
        default=os.environ.get("MARKETPLACE_SCENARIO"),
        help="scenario file (default: $MARKETPLACE_SCENARIO)",
    )
    assemble.add_argument("--out", required=True, metavar="OUT")
    add_set(assemble)
    assemble.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for every party's report to appear (a report step started with the parties)",
    )
    assemble.add_argument(
        "--chown-like",
        metavar="PATH",
        help="give OUT, its parent folder and the files written to the owner of PATH (for a container "
        "that writes into a host folder, e.g. the owner of ./scenarios)",
    )
    assemble.set_defaults(func=assemble_command)


def assemble_command(args: argparse.Namespace) -> int:
    scenario = scenario_of(args)
    if scenario is None:
        return EXIT_USAGE
    from marketplace.runtime import assemble_from_party_reports

    if not Path(args.parties).is_dir() and args.wait <= 0:
        print(
            f"marketplace assemble: {args.parties}: no such folder (it should hold the parties' reports, "
            f"curator.json, owner-1.json, ...)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        report = assemble_from_party_reports(scenario, Path(args.parties), Path(args.out), wait_s=args.wait)
        if args.chown_like:
            from marketplace.provision import chown_like

            chown_like(Path(args.out), Path(args.chown_like))
    except (OSError, ValueError) as err:
        print(f"marketplace assemble: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{args.out}/report.json: {report['status']}")
    for failure in report["failures"]:
        print(f"marketplace assemble: run failed: {failure}", file=sys.stderr)
    return EXIT_OK if report["status"] == "completed" else EXIT_RUN_FAILED
