"""The `marketplace` command line."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from marketplace import __version__

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE, EXIT_RUN_FAILED = 0, 1, 2, 3

DESCRIPTION = """\
A privacy-preserving AI data marketplace. A curator, K data owners and a consumer run as separate
processes that talk msgpack over ZeroMQ; a scenario file (YAML) says what to run.

Start here:
  marketplace run scenarios/quickstart.yaml            run every party as its own process
  marketplace run scenarios/quickstart.yaml --driver inprocess --set parties.owners=8
  marketplace run scenarios/quickstart-private.yaml --driver inprocess --sweep summarize.rounds=20,40 --repeats 3
  marketplace validate scenarios/quickstart.yaml       check a scenario without running it
  marketplace run scenarios/market.yaml --driver inprocess   a market: a stream of requests, owners with lifetime budgets
  marketplace data fetch adult                         download a public dataset (checked) for the scenarios that use it
  marketplace privacy compose --epsilon 0.01 --count 1656 --delta 0.01 --theorem advanced
  marketplace ledger show kits/owner-1                 an owner's lifetime privacy ledger: spent, remaining, history
  marketplace sketch query RUN/sketches/merged.npz --scenario RUN/scenario.resolved.yaml --moments 2

One party at a time (what each container runs; each writes its report to parties/<party>.json):
  marketplace provision S.yaml --out kits --endpoint tcp://HOST:5555   one kit per party: its key, the keys it needs, start.sh
  marketplace curator  --scenario S.yaml --endpoint tcp://0.0.0.0:5555 --keys kits/curator
  marketplace owner    --scenario S.yaml --endpoint tcp://HOST:5555 --keys kits/owner-1 --id owner-1
  marketplace owners   --scenario S.yaml --endpoint tcp://HOST:5555 --keys KEYS --ids owner-1..owner-250   many owners, one process
  marketplace consumer --scenario S.yaml --endpoint tcp://HOST:5555 --keys kits/consumer
  marketplace assemble parties --scenario S.yaml --out run          the run report from the parties' reports

A marketplace that stays up (docs/serve.md), and market workloads (docs/market.md):
  marketplace serve scenarios/market-serve.yaml --state market --consumers alice,bob,carol
  marketplace request scenarios/sketch-quickstart.yaml --market tcp://127.0.0.1:7700 --keys market/consumers/alice

Exit status: 0 completed, 2 bad scenario or arguments (nothing started), 3 the run failed, 1 internal error.
"""


RUNTIME_COMMANDS = frozenset({"run", "validate", "assemble", "probe", "protocols", "keys", "curator", "owner", "consumer", "owners",
                              "privacy", "provision", "ledger"})
"""The commands of the runtime itself; every other command (``data``, a protocol's own) runs its ``func``."""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="marketplace", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"marketplace {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run a scenario end to end and write its report",
                         description="Validate SCENARIO, start every party, wait for the run, print a summary and write "
                                     "DIR/report.json, DIR/messages.csv, DIR/scenario.resolved.yaml and DIR/logs/.")
    run.add_argument("scenario", help="scenario file (YAML), or a market file (a top-level `market:`; docs/market.md)")
    run.add_argument("--out", metavar="DIR", help="output folder, new or empty (default: runs/<scenario>-<timestamp>)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                     help="override one scenario value, e.g. --set summarize.rounds=20 (repeatable)")
    run.add_argument("--driver", choices=("processes", "inprocess"), default="processes",
                     help="processes: every party its own OS process over ZeroMQ (default); inprocess: one process, a deterministic queue")
    run.add_argument("--launch", choices=("forkserver", "exec"), default="forkserver",
                     help="how the processes driver starts parties: forked from a preloaded server and handed their own data "
                          "share (default, fast), or as `python -m marketplace <role>` exactly like a container (exec)")
    run.add_argument("--quiet", action="store_true", help="no progress and no table; just the report path")
    run.add_argument("--insecure", action="store_true",
                     help="plaintext links (development only); by default every link uses CURVE with fresh keys for the run")
    run.add_argument("--sweep", dest="sweeps", action="append", default=[], metavar="KEY.PATH=V1,V2,...",
                     help="run the scenario once per value (repeatable: every combination); writes runs.csv, "
                          "summary.csv and sweep.png (also from the scenario's sweep: section)")
    run.add_argument("--repeats", type=_positive_int, metavar="N",
                     help="runs per sweep point, with seeds seed, seed+1, ... (default: sweep.repeats, 1)")
    run.add_argument("--seed", type=int, metavar="N", help="the run seed (replaces the scenario's seed:; a sweep's first seed)")

    val = sub.add_parser("validate", help="check a scenario (and its data) without running it; print it resolved",
                         description="Check SCENARIO as `run` would before starting anything: the file, every value, "
                                     "the privacy plan, and the data (the dataset is in the cache, the world builds and "
                                     "splits among the parties). Print the protocol's own sections, every default "
                                     "filled in.")
    val.add_argument("scenario")
    val.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    val.add_argument("--seed", type=int, metavar="N", help="the run seed (replaces the scenario's seed:)")

    from marketplace.privacy import compose_cli, ledger_cli

    compose_cli.add_parser(sub)
    ledger_cli.add_parser(sub)
    from marketplace.service import cli as service_cli

    service_cli.add_parsers(sub)

    assemble = sub.add_parser("assemble", help="build the run report from the reports of parties that ran on their own (by hand, compose, Kubernetes)",
                              description="Read DIR/<party>.json written by each party (--report), rebuild the world from the "
                                          "scenario for the evaluation, and write OUT/report.json and OUT/messages.csv.")
    assemble.add_argument("parties", metavar="DIR", help="folder holding the parties' reports: curator.json, consumer.json, owner-N.json, and "
                                                        "owner hosts' files (owner-1..owner-250.json)")
    assemble.add_argument("--scenario", default=os.environ.get("MARKETPLACE_SCENARIO"), help="scenario file (default: $MARKETPLACE_SCENARIO)")
    assemble.add_argument("--out", required=True, metavar="OUT")
    assemble.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    assemble.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                          help="wait up to SECONDS for every party's report to appear (a report step started with the parties)")
    assemble.add_argument("--chown-like", metavar="PATH",
                          help="give OUT, its parent folder and the files written to the owner of PATH (for a container "
                               "that writes into a host folder, e.g. the owner of ./scenarios)")

    from marketplace import provision_cli

    provision_cli.add_parser(sub)
    shares = sub.add_parser("shares", help="write a simulated scenario's parties as files of their own, and a market "
                                           "file describing them by a public schema",
                            description="Write each owner's rows of SCENARIO's simulated world to OUT/owner-<i>.csv, the "
                                        "consumer's target and test set to OUT/target.csv and OUT/test.csv, and "
                                        "OUT/market.yaml: the scenario described by the public schema of those files "
                                        "(data.schema), for `marketplace serve OUT/market.yaml --owner-data OUT`, "
                                        "`marketplace agent --data` and `marketplace request --data`.")
    shares.add_argument("scenario", help="a simulated scenario (data.source)")
    shares.add_argument("--out", required=True, metavar="OUT", help="a new or empty folder")
    shares.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    shares.set_defaults(func=_shares)
    protocols = sub.add_parser("protocols", help="list the registered protocols (entry-point group marketplace.protocols)",
                               description="List every protocol a scenario can name: the four shipped ones and any "
                                           "installed package's (docs/extending.md).")
    protocols.add_argument("--json", action="store_true", help="print JSON instead of text")

    probe = sub.add_parser("probe", help="exit 0 if a TCP endpoint accepts connections (a container healthcheck)")
    probe.add_argument("endpoint", help="tcp://HOST:PORT")
    probe.add_argument("--timeout", type=float, default=2.0)

    keys = sub.add_parser("keys", help="CURVE certificates for the parties of a run",
                          description="Write one CURVE certificate pair per party (curator, owner-1..K, consumer) into DIR. "
                                      "The curator admits only these keys and binds each party id to its key.")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    generate = keys_sub.add_parser("generate", help="write DIR/<party>.key, DIR/<party>.key_secret and DIR/<party>.noise_key "
                                                    "(the party's secret noise key) for every party")
    generate.add_argument("directory", metavar="DIR")
    generate.add_argument("--owners", type=int, required=True, help="K, the number of owners")
    generate.add_argument("--force", action="store_true", help="overwrite existing keys")
    from marketplace import plugins
    from marketplace.data.own_files import ReadLimits
    from marketplace.datasets import cli as data_cli

    plugins.add_commands(sub)
    data_cli.add_parser(sub)

    for role, text in (("curator", "run the curator (binds a ROUTER at --endpoint)"),
                       ("owner", "run one data owner (connects to the curator)"),
                       ("consumer", "run the consumer (connects to the curator)")):
        p = sub.add_parser(role, help=text, description=text + ". The party builds its own data share from the scenario and seed.")
        p.add_argument("--scenario", default=os.environ.get("MARKETPLACE_SCENARIO"),
                       help="scenario file (YAML); the same file for every party (default: $MARKETPLACE_SCENARIO)")
        p.add_argument("--endpoint", default=os.environ.get("MARKETPLACE_ENDPOINT"),
                       help="ZeroMQ endpoint, e.g. tcp://127.0.0.1:5555 (curator: port 0 picks one; default: $MARKETPLACE_ENDPOINT)")
        p.add_argument("--report", metavar="FILE",
                       help="write this party's part of the report here as JSON (default: parties/<party>.json); "
                            "`marketplace assemble` joins them")
        p.add_argument("--no-report", action="store_true", help="write no report")
        p.add_argument("--run-id", default=os.environ.get("MARKETPLACE_RUN_ID"),
                       help="run id shared by all parties (default: $MARKETPLACE_RUN_ID, else <scenario name>-seed<seed>)")
        p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
        p.add_argument("--log-level", default=os.environ.get("MARKETPLACE_LOG_LEVEL", "INFO"))
        p.add_argument("--keys", metavar="DIR", help="CURVE key folder made by `marketplace keys generate` (or transport.curve_keys)")
        p.add_argument("--insecure", action="store_true", help="plaintext link, for development only (no --keys needed)")
        if role == "owner":
            p.add_argument("--id", required=True, help="owner id: owner-1 ... owner-K")
            p.add_argument("--data", metavar="FILE", help="the owner's own rows: a CSV (or .npz) checked against the "
                                                          "marketplace's public schema (data.schema); in a simulated "
                                                          "scenario, an .npz (arrays X and y) instead of its generated share")
            ReadLimits.add_arguments(p)
        if role == "consumer":
            p.add_argument("--data", metavar="FILE", help="the consumer's own target D_v, a CSV (or .npz) checked against "
                                                          "the marketplace's public schema (data.schema)")
            p.add_argument("--test", metavar="FILE", help="the consumer's own test set (same format as --data)")
            ReadLimits.add_arguments(p)
        if role == "curator":
            p.add_argument("--endpoint-file", help="write the bound endpoint here once listening")
    hosts = sub.add_parser("owners", help="run many data owners in one process (an owner host)",
                           description="Run several data owners in this one process: each is still a party of its own "
                                       "(its own socket and connection to the curator, its own CURVE key, data share, "
                                       "counters and report), but they share the process, so they are not isolated from "
                                       "each other. The owners build their data shares from the scenario and seed.")
    hosts.add_argument("--ids", required=True, help="the owners to serve: owner-1..owner-250, or a comma list "
                                                     "(owner-1,owner-7,owner-10..owner-20)")
    hosts.add_argument("--scenario", default=os.environ.get("MARKETPLACE_SCENARIO"),
                       help="scenario file (YAML); the same file for every party (default: $MARKETPLACE_SCENARIO)")
    hosts.add_argument("--endpoint", default=os.environ.get("MARKETPLACE_ENDPOINT"),
                       help="the curator's ZeroMQ endpoint, e.g. tcp://127.0.0.1:5555 (default: $MARKETPLACE_ENDPOINT)")
    hosts.add_argument("--report-dir", metavar="DIR", default="parties",
                       help="write the owners' reports to DIR, in one file named after the host, e.g. "
                            "DIR/owner-1..owner-250.json (default: parties)")
    hosts.add_argument("--no-report", action="store_true", help="write no reports")
    hosts.add_argument("--run-id", default=os.environ.get("MARKETPLACE_RUN_ID"),
                       help="run id shared by all parties (default: $MARKETPLACE_RUN_ID, else <scenario name>-seed<seed>)")
    hosts.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE")
    hosts.add_argument("--log-level", default=os.environ.get("MARKETPLACE_LOG_LEVEL", "INFO"))
    hosts.add_argument("--keys", metavar="DIR", help="CURVE key folder holding every served owner's secret key and the "
                                                      "curator's public key (`marketplace keys generate` writes one)")
    hosts.add_argument("--insecure", action="store_true", help="plaintext link, for development only (no --keys needed)")
    hosts.add_argument("--data", metavar="SPEC", help="each owner's own rows, checked against the marketplace's public "
                                                      "schema: owner-1=a.csv,owner-2=b.csv, or a folder of <owner>.csv")
    ReadLimits.add_arguments(hosts)
    return parser


def _positive_int(text: str) -> int:
    """argparse type: a whole number >= 1 (``--repeats 0`` would run nothing and say it did)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


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
    if _runs_forked_parties(sys.argv[1:] if argv is None else argv):
        # the server imports the parties' libraries (half a second or more) while this process
        # builds its parser, reads the scenario and builds the world; run_scenario and run_sweep use
        # it, and every way out of `run` stops it (a parse error kills it: it dies with its parent)
        from marketplace.runner.forkserver import forkserver_context

        forkserver_context()
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    if args.command not in RUNTIME_COMMANDS:  # "data", or a protocol's own command (marketplace.plugins)
        return args.func(args)
    if args.command == "privacy":
        if not hasattr(args, "func"):
            parser.parse_args(["privacy", "--help"])
        return args.func(args)
    if args.command == "keys":
        return _keys(args, parser)
    if args.command == "probe":
        return _probe(args)
    if args.command == "protocols":
        return _protocols(args)
    if args.command in ("provision", "ledger"):
        return args.func(args)
    if getattr(args, "scenario", None) is None:
        print(f"marketplace {args.command}: no scenario: pass --scenario FILE or set MARKETPLACE_SCENARIO", file=sys.stderr)
        return EXIT_USAGE
    if args.command in ("run", "validate"):
        from marketplace.market.spec import is_market_file

        if is_market_file(args.scenario):
            from marketplace.market.cli import market_command

            return market_command(args)
    if args.command in ("curator", "owner", "owners", "consumer") and not args.endpoint:
        print(f"marketplace {args.command}: no endpoint: pass --endpoint tcp://HOST:PORT or set MARKETPLACE_ENDPOINT", file=sys.stderr)
        return EXIT_USAGE
    if getattr(args, "insecure", False):
        args.overrides.append("transport.security=none")
    if getattr(args, "keys", None):
        args.overrides.append(f"transport.curve_keys={Path(args.keys).resolve()}")
    from marketplace.api import load
    from marketplace.scenario import ScenarioError

    try:
        scenario = load(args.scenario, sets=args.overrides)
    except ScenarioError as err:
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        if args.command == "run":
            from marketplace.runner.forkserver import stop_forkserver

            stop_forkserver()
        return EXIT_USAGE
    if args.command == "validate":
        return _validate(args, scenario)
    if args.command == "assemble":
        return _assemble(args, scenario)
    if args.command == "run":
        if args.sweeps or scenario.config.sweep.vary or args.repeats:
            return _sweep(args, scenario)
        return _run(args, scenario)
    if args.command == "owners":
        return _owner_host(args, scenario)
    return _party(args, scenario)


def _shares(args: argparse.Namespace) -> int:
    from marketplace.api import load
    from marketplace.runner.shares import write_shares
    from marketplace.scenario import ScenarioError

    try:
        written = write_shares(load(args.scenario, sets=args.overrides), args.out)
    except (ScenarioError, ValueError, OSError) as err:
        print(f"marketplace shares: {err}", file=sys.stderr)
        return EXIT_USAGE
    owners = sum(1 for party in written if party.startswith("owner-"))
    print(f"{args.out}: {owners} owners' files, target.csv, test.csv and market.yaml")
    return EXIT_OK


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


def _validate(args: argparse.Namespace, scenario) -> int:
    """Build the world as `run` would (the data-dependent checks), then print the scenario's own
    sections resolved; a summary of the parties' shares goes to stderr."""
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


def _run_folder(args: argparse.Namespace, scenario, kind: str = "") -> Path | None:
    """The run's output folder: --out if it is new or empty, else a fresh default; None (after
    saying why) when --out names a file or an earlier run's folder."""
    from marketplace.api import output_folder
    from marketplace.runner.run import RunFolderError

    try:
        return output_folder(scenario, args.out or None, kind)
    except RunFolderError as err:
        print(f"marketplace {args.command}: --out: {err}", file=sys.stderr)
        return None


def _run(args: argparse.Namespace, scenario) -> int:
    from rich.console import Console

    from marketplace.api import RunFailed, run
    from marketplace.runner.display import print_summary, round_progress
    from marketplace.reporting.format import shorten
    from marketplace.scenario import ScenarioError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    out = _run_folder(args, scenario)
    if out is None:
        return EXIT_USAGE
    console = Console(stderr=False)
    try:
        if args.quiet:
            report = run(scenario, out, driver=args.driver, launch=args.launch, seed=args.seed)
        else:
            with round_progress(console, scenario.config.name) as progress:
                report = run(scenario, out, driver=args.driver, launch=args.launch, seed=args.seed, progress=progress)
    except RunFailed as err:
        report = err.report
    except ScenarioError as err:
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("marketplace: interrupted; every party process was stopped", file=sys.stderr)
        return 130
    finally:
        from marketplace.runner.forkserver import stop_forkserver

        stop_forkserver()
    if args.quiet:
        print(f"{out}/report.json")
    else:
        print_summary(console, report.raw, out)
    if not report.completed:
        for failure in report.failures:
            print(f"marketplace: run failed: {shorten(failure, 400)}", file=sys.stderr)
        return EXIT_RUN_FAILED
    return EXIT_OK


def _protocols(args: argparse.Namespace) -> int:
    """``marketplace protocols``: each registered protocol's name, one-line summary and where it comes from."""
    import json

    from marketplace import plugins

    try:
        specs = plugins.protocols()
    except plugins.PluginError as err:
        print(f"marketplace protocols: {err}", file=sys.stderr)
        return EXIT_USAGE
    rows = [{"name": name, "summary": spec.summary, "exchange": spec.exchange} for name, spec in specs.items()]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            print(f"{row['name']:<{width}}  {row['summary'] or '-'}  ({row['exchange']})")
    return 0


def _probe(args: argparse.Namespace) -> int:
    import socket

    host, _, port = args.endpoint.removeprefix("tcp://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=args.timeout):
            return EXIT_OK
    except (OSError, ValueError) as err:
        print(f"marketplace probe: {args.endpoint}: {err}", file=sys.stderr)
        return EXIT_RUN_FAILED


def _assemble(args: argparse.Namespace, scenario) -> int:
    from marketplace.runner.run import assemble_from_party_reports

    if not Path(args.parties).is_dir() and args.wait <= 0:
        print(f"marketplace assemble: {args.parties}: no such folder (it should hold the parties' reports, "
              f"curator.json, owner-1.json, ...)", file=sys.stderr)
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


def _keys(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from marketplace.transport.curve import CurveError, generate_keys

    if args.keys_command != "generate":
        parser.parse_args(["keys", "--help"])
    if args.owners < 1:
        print("marketplace keys: --owners must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    from marketplace.privacy import noise

    try:
        written = generate_keys(args.directory, owners=args.owners, overwrite=args.force)
        parties = ["curator", *(f"owner-{i}" for i in range(1, args.owners + 1)), "consumer"]
        noise.write_keys(args.directory, parties)
    except (CurveError, OSError) as err:
        print(f"marketplace keys: {err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {len(written) // 2} certificate pairs and noise keys to {args.directory} "
          "(secret files are readable by you only)")
    return EXIT_OK


def _sweep(args: argparse.Namespace, scenario) -> int:
    from rich.console import Console

    from marketplace.api import sweep
    from marketplace.plugins import exchange
    from marketplace.reporting.format import plural
    from marketplace.runner.sweep import parse_axis
    from marketplace.scenario import ScenarioError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console(stderr=False)
    if not console.is_terminal:
        console = Console(stderr=False, width=140)  # a file or pipe: keep the sweep table on one line per point
    out = None
    try:
        vary = dict(parse_axis(text) for text in args.sweeps)
        out = _run_folder(args, scenario, "sweep")
        if out is None:
            return EXIT_USAGE
        result = sweep(scenario, vary, repeats=args.repeats, out=out, driver=args.driver, launch=args.launch,
                       seed=args.seed, progress=not args.quiet)
    except ScenarioError as err:  # a bad sweep value, or a point whose world cannot be built (a size only its data can refuse)
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        if out is not None and (Path(out) / "runs.csv").exists():
            print(f"marketplace: the runs before it are in {out}/runs.csv", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"marketplace: interrupted; finished runs are in {out}/runs.csv", file=sys.stderr)
        return 130
    finally:
        from marketplace.runner.forkserver import stop_forkserver

        stop_forkserver()
    total = len(result.rows)
    if not args.quiet:
        console.print(exchange(scenario.config.protocol).sweep_table(result.summary, result.keys,
                                                                     f"{scenario.config.name}: {plural(total, 'run')} (mean ± sd over repeats)"))
    plot = " and sweep.png" if (Path(out) / "sweep.png").exists() else ""
    print(f"{out}/runs.csv, {out}/summary.csv{plot}")
    if result.failed:
        print(f"marketplace: {len(result.failed)} of {plural(total, 'run')} failed (see runs.csv)", file=sys.stderr)
        return EXIT_RUN_FAILED
    return EXIT_OK


def _party(args: argparse.Namespace, scenario) -> int:
    from marketplace.data.own_files import ReadLimits
    from marketplace.parties import party_ids
    from marketplace.runner.party_process import run_party

    party = {"curator": "curator", "consumer": "consumer"}.get(args.command) or args.id
    logging.basicConfig(level=args.log_level.upper(), format=f"%(asctime)s {party} %(levelname)s %(message)s", stream=sys.stderr)
    if party not in party_ids(scenario.config):
        print(f"marketplace: unknown party {party!r}: this scenario has {', '.join(party_ids(scenario.config))}", file=sys.stderr)
        return EXIT_USAGE
    report = None if args.no_report else (args.report or f"parties/{party}.json")
    try:
        return run_party(scenario, party=party, endpoint=args.endpoint, report_path=report, run_id=args.run_id,
                         endpoint_file=getattr(args, "endpoint_file", None), data_file=getattr(args, "data", None),
                         test_file=getattr(args, "test", None),
                         limits=ReadLimits.from_args(args) if hasattr(args, "max_bytes") else None)
    except (ValueError, OSError) as err:
        print(f"marketplace {party}: cannot start: {err}", file=sys.stderr)
        return EXIT_USAGE


def _owner_host(args: argparse.Namespace, scenario) -> int:
    from marketplace.data.own_files import ReadLimits, parse_data_files
    from marketplace.parties import host_label, parse_owner_ids
    from marketplace.runner.party_process import run_owner_host

    try:
        owners = parse_owner_ids(args.ids, scenario.config.parties.owners)
    except ValueError as err:
        print(f"marketplace owners: --ids: {err}", file=sys.stderr)
        return EXIT_USAGE
    label = host_label(owners)
    logging.basicConfig(level=args.log_level.upper(), format=f"%(asctime)s {label} %(levelname)s %(message)s", stream=sys.stderr)
    try:
        files = parse_data_files(args.data, owners) if args.data else None
        return run_owner_host(scenario, owners=owners, endpoint=args.endpoint, run_id=args.run_id,
                              report_dir=None if args.no_report else args.report_dir, data_files=files,
                              limits=ReadLimits.from_args(args))
    except (ValueError, OSError) as err:
        print(f"marketplace owners: cannot start: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
