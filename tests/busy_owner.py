"""A test-only owner process whose role computes in a Python busy loop when a given round opens.

    python tests/busy_owner.py --scenario S.yaml --endpoint tcp://127.0.0.1:PORT --id owner-2 --busy-from 5
    [--busy-for S]

It is the real owner (built from the scenario like ``marketplace owner``, served by the real ZeroMQ
driver), except that ``handle`` spins once round ``--busy-from`` opens: for ``--busy-for`` seconds
and then answers as usual, or forever without it. Its loop sends nothing meanwhile, but ZeroMQ's I/O
thread keeps answering the connection's ZMTP heartbeats, so the curator must never see it as lost:
a bounded computation costs nothing, an endless one is dropped by the progress deadline
(``transport.progress_timeout_s``), not by liveness.
It logs "busy from round N" (with a timestamp) just before it starts spinning, and "busy for S s
done" when a bounded spin ends.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

from marketplace import plugins
from marketplace.messages import Envelope
from marketplace.parties import build_role, make_world, share_of
from marketplace.protocols.summarize.owner import SummarizeOwner
from marketplace.runtime.links import link_settings
from marketplace.runtime.nodes import default_run_id
from marketplace.scenario import load_scenario
from marketplace.transport.node import Node
from marketplace.transport.zmq_driver import serve_party

log = logging.getLogger("busy_owner")


class BusyOwner(SummarizeOwner):
    """An honest owner until round ``busy_from`` opens; then its handler spins forever."""

    busy_from: int
    busy_for: float | None = None
    spun = False

    def handle(self, message: Envelope):
        if message.kind == "round_open" and message.body.round >= self.busy_from and not self.spun:
            self.spun = True
            log.warning("busy from round %d", message.body.round)
            for handler in logging.getLogger().handlers:
                handler.flush()
            end = float("inf") if self.busy_for is None else time.monotonic() + self.busy_for
            while time.monotonic() < end:  # pure-Python work: no I/O, no sleep, the GIL mostly held
                pass
            log.warning("busy for %g s done", self.busy_for)
        return super().handle(message)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", required=True)
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--id", required=True)
    parser.add_argument("--busy-from", type=int, required=True)
    parser.add_argument("--busy-for", type=float, default=None, help="seconds to spin (default: forever)")
    args = parser.parse_args()
    logging.basicConfig(
        level=logging.INFO, format=f"%(asctime)s {args.id} %(levelname)s %(message)s", stream=sys.stderr
    )
    scenario = load_scenario(args.scenario)
    role = build_role(
        scenario.config,
        args.id,
        world=share_of(make_world(scenario.config, plugins.exchange(scenario.config.protocol)), args.id),
        exchange=plugins.exchange(scenario.config.protocol),
    )
    role.__class__ = BusyOwner  # the same state, the hanging handler
    role.busy_from = args.busy_from
    role.busy_for = args.busy_for
    node = Node(role, run_id=default_run_id(scenario), max_message_bytes=scenario.config.transport.max_message_bytes)
    log.info("%s (pid %d) starting: %s", args.id, os.getpid(), args.endpoint)
    serve_party(node, args.endpoint, link_settings(scenario))
    return 3 if role.failure else 0


if __name__ == "__main__":
    sys.exit(main())
