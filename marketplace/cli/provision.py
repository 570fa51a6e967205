"""`marketplace provision`: one credential kit per party (see :mod:`marketplace.provision`)."""

from __future__ import annotations

import argparse
import sys

EXIT_OK, EXIT_USAGE = 0, 2


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "provision",
        help="write one credential kit per party (its secret key, the public keys it needs, the scenario, start.sh)",
        description="Make fresh CURVE certificates for every party of SCENARIO and write OUT/<party>/: the party's own "
        "certificate, the public keys it must know (the curator's kit: every other party's; the others: the "
        "curator's), the scenario, start.sh and kit.json. No kit holds another party's secret key: hand each "
        "folder to its party alone.",
        epilog="example: marketplace provision scenarios/quickstart.yaml --out kits --endpoint tcp://10.0.0.5:5555\n"
        "         sh kits/owner-1/start.sh      (on owner-1's machine)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("scenario", help="scenario file (YAML)")
    p.add_argument("--out", required=True, metavar="DIR", help="folder for the kits (one subfolder per party)")
    p.add_argument(
        "--endpoint",
        default="tcp://curator:5555",
        metavar="tcp://HOST:PORT",
        help="where owners and the consumer reach the curator (default: tcp://curator:5555, the compose service)",
    )
    p.add_argument(
        "--bind",
        metavar="tcp://ADDR:PORT",
        help="where the curator listens (default: tcp://0.0.0.0:<the endpoint's port>)",
    )
    p.add_argument("--run-id", help="the run id every kit uses (default: <scenario name>-seed<seed>-<random>)")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override one scenario value in every kit (repeatable)",
    )
    p.add_argument("--force", action="store_true", help="replace existing kits (their old keys are removed)")
    p.add_argument(
        "--shared-noise",
        action="store_true",
        help="write no noise keys: every party's noise then derives from the run seed alone, so ANY party can "
        "recompute and strip ANY other party's noise (for reproducing a simulation; kit.json and every "
        "report say so). Default: a secret noise key in each kit",
    )
    p.add_argument(
        "--chown",
        metavar="UID[:GID]",
        help="give every kit file to this user, e.g. 1000 for the containers' user (needs root)",
    )
    p.add_argument(
        "--reports",
        metavar="DIR",
        help="also make DIR ready for the parties' reports: created, cleared of an earlier run's, given to --chown",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from marketplace.provision import ProvisionError, parse_owner, prepare_reports, provision
    from marketplace.scenario import ScenarioError, load_scenario

    try:
        scenario = load_scenario(args.scenario, args.overrides)
        owner = parse_owner(args.chown) if args.chown else None
        kits = provision(
            scenario,
            args.out,
            endpoint=args.endpoint,
            bind=args.bind,
            run_id=args.run_id,
            overwrite=args.force,
            chown=owner,
            shared_noise=args.shared_noise,
        )
        if args.reports:
            prepare_reports(args.reports, scenario, owner)
    except ScenarioError as err:
        print(f"marketplace: bad scenario: {err}", file=sys.stderr)
        return EXIT_USAGE
    except (ProvisionError, OSError) as err:
        print(f"marketplace provision: {err}", file=sys.stderr)
        return EXIT_USAGE
    run_id = kits[0].command[kits[0].command.index("--run-id") + 1]
    print(f"wrote {len(kits)} kits to {args.out} (run id {run_id}):")
    for kit in kits:
        secret = f"{kit.party}.key_secret" + ("" if args.shared_noise else f" and {kit.party}.noise_key are")
        secret += " is" if args.shared_noise else ""
        print(
            f"  {kit.folder}/  {secret} secret: give this folder to {kit.party} only; start: sh {kit.folder}/start.sh"
        )
    if args.shared_noise:
        print(
            "warning: --shared-noise: the kits hold no noise keys; any party can recompute and strip any other "
            "party's noise from the run seed",
            file=sys.stderr,
        )
    return EXIT_OK
