"""The small commands: ``shares`` (a simulation's parties as files), ``protocols`` (what is
registered), ``probe`` (a container healthcheck) and ``keys`` (CURVE certificates for a run; its
``consumer`` action, a served marketplace's new consumer, is :mod:`.serve`'s)."""

from __future__ import annotations

import argparse
import sys

from marketplace.cli.common import EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, add_set


def add_shares_parser(sub: argparse._SubParsersAction) -> None:
    shares = sub.add_parser(
        "shares",
        help="write a simulated scenario's parties as files of their own, and a market "
        "file describing them by a public schema",
        description="Write each owner's rows of SCENARIO's simulated world to OUT/owner-<i>.csv, the "
        "consumer's target and test set to OUT/target.csv and OUT/test.csv, and "
        "OUT/market.yaml: the scenario described by the public schema of those files "
        "(data.schema), for `marketplace serve OUT/market.yaml --owner-data OUT`, "
        "`marketplace agent --data` and `marketplace request --data`.",
    )
    shares.add_argument("scenario", help="a simulated scenario (data.source)")
    shares.add_argument("--out", required=True, metavar="OUT", help="a new or empty folder")
    add_set(shares)
    shares.set_defaults(func=shares_command)


def add_protocols_parser(sub: argparse._SubParsersAction) -> None:
    protocols = sub.add_parser(
        "protocols",
        help="list the registered protocols (entry-point group marketplace.protocols)",
        description="List every protocol a scenario can name: the four shipped ones and any "
        "installed package's (docs/extending.md).",
    )
    protocols.add_argument("--json", action="store_true", help="print JSON instead of text")
    protocols.add_argument(
        "--check",
        metavar="NAME",
        help="run protocol NAME's conformance checks (marketplace.testing): "
        "its Exchange contract, bad settings, declared costs, a run under each driver, the report "
        "schema, sweep rows and history; exit 0 if all pass, 3 if one fails",
    )
    protocols.add_argument(
        "--privacy",
        metavar="NAME",
        help="print protocol NAME's declarations for --scenario (default: its section at its defaults): "
        "each release of owner-1's and the consumer's data (to whom, mechanism, sensitivity, cost, ledger) "
        "and what each other party receives of an owner's data (public, a release or a disclosure)",
    )
    protocols.add_argument(
        "--scenario",
        metavar="FILE",
        help="with --check or --privacy: the scenario (default: the protocol's section at its defaults, 3 owners)",
    )
    add_set(protocols, help="with --check or --privacy: override a key of --scenario")
    protocols.set_defaults(func=protocols_command)


def add_probe_parser(sub: argparse._SubParsersAction) -> None:
    probe = sub.add_parser("probe", help="exit 0 if a TCP endpoint accepts connections (a container healthcheck)")
    probe.add_argument("endpoint", help="tcp://HOST:PORT")
    probe.add_argument("--timeout", type=float, default=2.0)
    probe.set_defaults(func=probe_command)


def add_keys_parser(sub: argparse._SubParsersAction) -> None:
    keys = sub.add_parser(
        "keys",
        help="CURVE certificates for the parties of a run, or a new consumer of a marketplace that stays up",
        description="generate: write one CURVE certificate pair per party (curator, owner-1..K, consumer) into "
        "DIR; the curator admits only these keys and binds each party id to its key. consumer: make a consumer's "
        "key pair and kit in a served marketplace's state folder (`marketplace serve --state`).",
    )
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    generate = keys_sub.add_parser(
        "generate",
        help="write DIR/<party>.key, DIR/<party>.key_secret and DIR/<party>.noise_key "
        "(the party's secret noise key) for every party",
    )
    generate.add_argument("directory", metavar="DIR")
    generate.add_argument("--owners", type=int, required=True, help="K, the number of owners")
    generate.add_argument("--force", action="store_true", help="overwrite existing keys")
    keys.set_defaults(func=lambda args: keys.parse_args(["--help"]))  # `marketplace keys` alone: its help
    generate.set_defaults(func=keys_generate_command)
    from marketplace.cli.serve import add_keys_consumer_parser

    add_keys_consumer_parser(keys_sub)


def shares_command(args: argparse.Namespace) -> int:
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


def protocols_command(args: argparse.Namespace) -> int:
    """``marketplace protocols``: each registered protocol's name, one-line summary and where it comes from,
    and each installed plug-in that cannot be loaded with why (exit 0 while one protocol loads)."""
    import json

    from marketplace import plugins

    try:
        specs = plugins.protocols()
    except plugins.PluginError as err:
        print(f"marketplace protocols: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.check is not None and args.privacy is not None:
        print("marketplace protocols: give --check NAME or --privacy NAME, not both", file=sys.stderr)
        return EXIT_USAGE
    if args.check is not None:
        return check_command(args, specs)
    if args.privacy is not None:
        return privacy_command(args, specs)
    if args.scenario is not None or args.overrides:
        print("marketplace protocols: --scenario and --set go with --check NAME or --privacy NAME", file=sys.stderr)
        return EXIT_USAGE
    rows = [{"name": name, "summary": spec.summary, "exchange": spec.exchange} for name, spec in specs.items()]
    rows += [{"name": name, "broken": reason} for name, reason in plugins.broken().items()]
    rows.sort(key=lambda row: row["name"])
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        width = max(len(row["name"]) for row in rows)
        for row in rows:
            if "broken" in row:
                print(f"{row['name']:<{width}}  BROKEN: {row['broken']}")
            else:
                print(f"{row['name']:<{width}}  {row['summary'] or '-'}  ({row['exchange']})")
    return EXIT_OK


def privacy_command(args: argparse.Namespace, specs: dict) -> int:
    """``marketplace protocols --privacy NAME``: protocol NAME's release plan and declared view, as Markdown."""
    from marketplace.api import load
    from marketplace.reporting.declared import declared_markdown
    from marketplace.scenario import ScenarioError

    name = args.privacy
    if name not in specs:
        print(
            f"marketplace protocols: --privacy: no protocol {name!r} (registered: {', '.join(specs)})", file=sys.stderr
        )
        return EXIT_USAGE
    given = args.scenario if args.scenario is not None else {"name": f"{name}-privacy", "protocol": name}
    try:
        scenario = load(given, sets=args.overrides)
    except ScenarioError as err:
        print(f"marketplace protocols: --privacy: {err}", file=sys.stderr)
        return EXIT_USAGE
    if scenario.config.protocol != name:
        print(
            f"marketplace protocols: --privacy: the scenario is of protocol {scenario.config.protocol!r}, not {name!r}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    print(declared_markdown(name, scenario.config), end="")
    return EXIT_OK


def check_command(args: argparse.Namespace, specs: dict) -> int:
    """``marketplace protocols --check NAME``: each conformance check of protocol NAME, a line each as it
    finishes (``ok`` or ``FAIL`` and why); exit 0 when all pass, 3 when one fails, 2 for a protocol or
    scenario that cannot be checked."""
    from marketplace import plugins
    from marketplace.api import load
    from marketplace.scenario import ScenarioError
    from marketplace.testing import protocol_checks

    if args.check not in specs:
        try:
            plugins.spec(args.check)
        except plugins.PluginError as err:  # installed but cannot be loaded: say why
            problem = str(err)
        except ValueError:
            problem = f"expected one of {list(specs)}, got {args.check!r}"
        print(f"marketplace protocols: --check: {problem}", file=sys.stderr)
        return EXIT_USAGE
    scenario = None
    if args.scenario is not None or args.overrides:
        try:
            scenario = load(
                args.scenario
                or {"name": f"{args.check}-conformance", "protocol": args.check, "parties": {"owners": 3}},
                sets=args.overrides,
            )
        except ScenarioError as err:
            print(f"marketplace protocols: --scenario: {err}", file=sys.stderr)
            return EXIT_USAGE
    failed = 0
    for check in protocol_checks(args.check, scenario):
        try:
            check()
        except AssertionError as err:
            failed += 1
            print(f"FAIL  {check.name}: {err}", flush=True)
        else:
            print(f"ok    {check.name}", flush=True)
    print(f"{args.check}: {'every check passed' if not failed else f'{failed} check(s) failed'}")
    return EXIT_RUN_FAILED if failed else EXIT_OK


def probe_command(args: argparse.Namespace) -> int:
    import socket

    host, _, port = args.endpoint.removeprefix("tcp://").rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=args.timeout):
            return EXIT_OK
    except (OSError, ValueError) as err:
        print(f"marketplace probe: {args.endpoint}: {err}", file=sys.stderr)
        return EXIT_RUN_FAILED


def keys_generate_command(args: argparse.Namespace) -> int:
    from marketplace.transport.curve import CurveError, generate_keys

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
    print(
        f"wrote {len(written) // 2} certificate pairs and noise keys to {args.directory} "
        "(secret files are readable by you only)"
    )
    return EXIT_OK
