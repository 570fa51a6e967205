"""A hostile owner as its own process: the honest owner of the scenario, changed by one behaviour of
``hostile_roles``, served over ZeroMQ exactly as ``marketplace owner`` serves an honest one.

    python tests/hostile_party.py BEHAVIOUR --scenario S.yaml --endpoint tcp://... --id owner-2 \
        [--keys DIR | --insecure] --report FILE --run-id ID
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from marketplace import plugins

sys.path.insert(0, str(Path(__file__).resolve().parent))

from hostile_roles import BEHAVIOURS, data_with_huge_values, make_hostile  # noqa: E402

from marketplace.parties import build_role, make_world, party_ids, share_of  # noqa: E402
from marketplace.runtime.json_files import write_json  # noqa: E402
from marketplace.runtime.links import link_settings  # noqa: E402
from marketplace.runtime.party_reports import party_report  # noqa: E402
from marketplace.scenario import load_scenario  # noqa: E402
from marketplace.transport.node import Node  # noqa: E402
from marketplace.transport.zmq_driver import serve_party  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("behaviour", choices=(*BEHAVIOURS, "nan_bids"))
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--keys")
    parser.add_argument("--insecure", action="store_true")
    parser.add_argument("--report", required=True)
    parser.add_argument("--run-id", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {args.id} %(levelname)s %(message)s")
    overrides = ["transport.security=none"] if args.insecure else [f"transport.curve_keys={Path(args.keys).resolve()}"]
    scenario = load_scenario(args.scenario, overrides)
    config = scenario.config
    role = build_role(
        config,
        args.id,
        world=share_of(make_world(config, plugins.exchange(config.protocol)), args.id),
        exchange=plugins.exchange(config.protocol),
    )
    role = data_with_huge_values(role) if args.behaviour == "nan_bids" else make_hostile(role, args.behaviour)
    node = Node(
        role,
        run_id=args.run_id,
        max_message_bytes=config.transport.max_message_bytes,
        parties=frozenset(party_ids(config)),
    )
    stats = serve_party(node, args.endpoint, link_settings(scenario))
    write_json(
        args.report, party_report(node, role_name="owner", wall_s=0.0, driver=stats.to_dict(), scenario=scenario)
    )
    return 3 if role.failure else 0


if __name__ == "__main__":
    sys.exit(main())
