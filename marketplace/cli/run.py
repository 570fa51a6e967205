"""``marketplace run`` and ``marketplace validate``: a scenario (or a sweep of it, or a market file)
run end to end, or checked without running it, through the Python API (:mod:`marketplace.api`)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from marketplace.cli.common import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_USAGE,
    add_set,
    positive_int,
    scenario_of,
)

if TYPE_CHECKING:
    from marketplace.scenario import Scenario


def add_run_parser(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser(
        "run",
        help="run a scenario end to end and write its report",
        description="Validate SCENARIO, start every party, wait for the run, print a summary and write "
        "DIR/report.json, DIR/messages.csv, DIR/scenario.resolved.yaml and DIR/logs/.",
    )
    run.add_argument("scenario", help="scenario file (YAML), or a market file (a top-level `market:`; docs/market.md)")
    run.add_argument("--out", metavar="DIR", help="output folder, new or empty (default: runs/<scenario>-<timestamp>)")
    add_set(run, help="override one scenario value, e.g. --set summarize.rounds=20 (repeatable)")
    run.add_argument(
        "--driver",
        choices=("processes", "inprocess"),
        default="processes",
        help=(
            "processes: every party its own OS process over ZeroMQ (default); inprocess: one process, a "
            "deterministic queue"
        ),
    )
    run.add_argument(
        "--launch",
        choices=("forkserver", "exec"),
        default="forkserver",
        help="how the processes driver starts parties: forked from a preloaded server and handed their own data "
        "share (default, fast), or as `python -m marketplace <role>` exactly like a container (exec)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress and no table; just the report path")
    run.add_argument(
        "--insecure",
        action="store_true",
        help="plaintext links (development only); by default every link uses CURVE with fresh keys for the run",
    )
    run.add_argument(
        "--sweep",
        dest="sweeps",
        action="append",
        default=[],
        metavar="KEY.PATH=V1,V2,...",
        help="run the scenario once per value (repeatable: every combination); writes runs.csv, "
        "summary.csv and sweep.png (also from the scenario's sweep: section)",
    )
    run.add_argument(
        "--repeats",
        type=positive_int,
        metavar="N",
        help="runs per sweep point, with seeds seed, seed+1, ... (default: sweep.repeats, 1); for a market file, "
        "plays of the whole stream under every rule, with seeds seed, seed+1, ... (replaces market.repeats)",
    )
    run.add_argument(
        "--seed", type=int, metavar="N", help="the run seed (replaces the scenario's seed:; a sweep's first seed)"
    )
    run.set_defaults(func=run_command)


def add_validate_parser(sub: argparse._SubParsersAction) -> None:
    val = sub.add_parser(
        "validate",
        help="check a scenario (and its data) without running it; print it resolved",
        description="Check SCENARIO as `run` would before starting anything: the file, every value, "
        "the privacy plan, and the data (the dataset is in the cache, the world builds and "
        "splits among the parties). Print the protocol's own sections, every default "
        "filled in.",
    )
    val.add_argument("scenario")
    add_set(val)
    val.add_argument("--seed", type=int, metavar="N", help="the run seed (replaces the scenario's seed:)")
    val.set_defaults(func=validate_command)


def _market_file(args: argparse.Namespace) -> bool:
    from marketplace.market.spec import is_market_file

    return is_market_file(args.scenario)


def run_command(args: argparse.Namespace) -> int:
    """``marketplace run``: a market file is played, a scenario with a sweep swept, any other run once."""
    if _market_file(args):
        from marketplace.cli.market import market_command

        return market_command(args)
    scenario = scenario_of(args)
    if scenario is None:
        return EXIT_USAGE
    if args.sweeps or scenario.config.sweep.vary or args.repeats:
        return _sweep(args, scenario)
    return _run(args, scenario)


def validate_command(args: argparse.Namespace) -> int:
    """Build the world as `run` would (the data-dependent checks), then print the scenario's own
    sections resolved; a summary of the parties' shares goes to stderr."""
    if _market_file(args):
        from marketplace.cli.market import market_command

        return market_command(args)
    scenario = scenario_of(args)
    if scenario is None:
        return EXIT_USAGE
    from marketplace.api import validate
    from marketplace.scenario import ScenarioError

    try:
        checked = validate(scenario, seed=args.seed)
    except ScenarioError as err:
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(checked.scenario.dump_yaml(protocol_only=True), end="")
    print(checked, file=sys.stderr)
    return EXIT_OK


def _out(args: argparse.Namespace, scenario: Scenario, kind: str = "") -> Path:
    """--out, or a fresh default folder ``runs/<name>[-kind]-<timestamp>`` (the API checks it)."""
    from marketplace.runtime import default_run_folder

    return Path(args.out) if args.out else default_run_folder(scenario.config.name, kind)


def _folder_refused(args: argparse.Namespace, err: Exception) -> int:
    print(f"marketplace {args.command}: --out: {err}", file=sys.stderr)
    return EXIT_USAGE


def _run(args: argparse.Namespace, scenario: Scenario) -> int:
    from rich.console import Console

    from marketplace.api import RunFailed, run
    from marketplace.reporting.format import shorten
    from marketplace.runner.display import print_summary, round_progress
    from marketplace.runtime import RunFolderError
    from marketplace.scenario import ScenarioError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out = _out(args, scenario)
    console = Console(stderr=False)
    try:
        if args.quiet:
            report = run(scenario, out, driver=args.driver, launch=args.launch, seed=args.seed)
        else:
            with round_progress(console, scenario.config.name) as progress:
                report = run(scenario, out, driver=args.driver, launch=args.launch, seed=args.seed, progress=progress)
    except RunFailed as err:
        if err.report is None:  # a run always has its report; only a served request's failure has none
            raise
        report = err.report
    except RunFolderError as err:
        return _folder_refused(args, err)
    except ScenarioError as err:
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("marketplace: interrupted; every party process was stopped", file=sys.stderr)
        return 130
    if args.quiet:
        print(f"{out}/report.json")
    else:
        print_summary(console, report.raw, out)
    if not report.completed:
        for failure in report.failures:
            print(f"marketplace: run failed: {shorten(failure, 400)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    return EXIT_OK


def _sweep(args: argparse.Namespace, scenario: Scenario) -> int:
    from rich.console import Console

    from marketplace.api import sweep
    from marketplace.plugins import exchange
    from marketplace.reporting.format import plural
    from marketplace.runner.sweep import parse_axis
    from marketplace.runtime import RunFolderError
    from marketplace.scenario import ScenarioError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console(stderr=False)
    if not console.is_terminal:
        console = Console(stderr=False, width=140)  # a file or pipe: keep the sweep table on one line per point
    out = None
    try:
        vary = dict(parse_axis(text) for text in args.sweeps)
        out = _out(args, scenario, "sweep")
        result = sweep(
            scenario,
            vary,
            repeats=args.repeats,
            out=out,
            driver=args.driver,
            launch=args.launch,
            seed=args.seed,
            progress=not args.quiet,
        )
    except RunFolderError as err:
        return _folder_refused(args, err)
    except (
        ScenarioError
    ) as err:  # a bad sweep value, or a point whose world cannot be built (a size only its data can refuse)
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        if out is not None and (Path(out) / "runs.csv").exists():
            print(f"marketplace: the runs before it are in {out}/runs.csv", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"marketplace: interrupted; finished runs are in {out}/runs.csv", file=sys.stderr)
        return 130
    total = len(result.rows)
    if not args.quiet:
        console.print(
            exchange(scenario.config.protocol).sweep_table(
                result.summary, result.keys, f"{scenario.config.name}: {plural(total, 'run')} (mean ± sd over repeats)"
            )
        )
    plot = " and sweep.png" if (Path(out) / "sweep.png").exists() else ""
    print(f"{out}/runs.csv, {out}/summary.csv{plot}")
    if result.failed:
        print(f"marketplace: {len(result.failed)} of {plural(total, 'run')} failed (see runs.csv)", file=sys.stderr)
        return EXIT_RUN_FAILED
    return EXIT_OK
