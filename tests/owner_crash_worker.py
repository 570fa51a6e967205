"""A real `sketch` owner serving one request after another, for the lifetime crash test (a script).

``python owner_crash_worker.py LEDGERS WIRE``: loop over requests req-0, req-1, ...: build owner-1's
party for the request exactly as a run does (:func:`marketplace.parties.build_role`, then
:func:`marketplace.roles.lifetime.admit_party`, which charges its lifetime ledger first, or
declines), hand it the curator's real ``sketch_request`` frame, append every frame of the protocol
it sends to WIRE (one ``<request id> <kind> <bytes>`` line, fsynced: that is what *left* the
owner), then settle its ledger as the end of a run does. Restarted after a kill, it carries on from
the first request its ledger does not hold. Prints ``ready`` once the scenario is loaded, and
``declined <id>`` for a request its ledger refused.
"""

from __future__ import annotations

import os
import sys

import marketplace
from marketplace import plugins
from marketplace.messages import PROTOCOL_VERSION, Envelope, encode
from marketplace.parties import build_role, make_world, share_of
from marketplace.privacy.lifetime import LifetimeLedger, ledger_file
from marketplace.roles.identity import RUNTIME_KINDS
from marketplace.roles.lifetime import admit_party, settle
from marketplace.roles.party import Party
from marketplace.transport.node import Node

SCENARIO = os.path.join(os.path.dirname(__file__), "..", "scenarios", "sketch-quickstart.yaml")
OWNER = "owner-1"
EPSILON = 0.01
BUDGET = 1000.0


def main(ledgers: str, wire: str) -> int:
    base = marketplace.load(
        SCENARIO,
        {
            "lifetime.ledgers": ledgers,
            "lifetime.budget": {"epsilon": BUDGET},
            "parties.owners": 2,
            "sketch.epsilon": EPSILON,
        },
    )
    exchange = plugins.exchange("sketch")
    share = share_of(make_world(base.config, exchange), OWNER)
    from marketplace.protocols.sketch.exchange import public_map
    from marketplace.protocols.sketch.messages import SketchRequest

    fmap = public_map(base.config)

    request = SketchRequest(map_fingerprint=fmap.fingerprint, n_features=fmap.n_features)
    path = ledger_file(ledgers, OWNER)
    start = 0
    if path.exists():  # carry on: retry a request a kill interrupted, else the first one not yet asked
        with LifetimeLedger.read(path) as ledger:
            history = ledger.history()
        unsettled = [int(r.request_id[4:]) for r in history if r.state == "reserved"]
        start = min(unsettled) if unsettled else len(history)
    warm = build_role(base.with_overrides({"lifetime.ledgers": None}).config, OWNER, world=share, exchange=exchange)
    Node(warm, run_id="warm-up", max_message_bytes=1 << 26).receive(  # imports what a release needs, charges nothing
        encode(Envelope(PROTOCOL_VERSION, "warm-up", 1, "curator", OWNER, "sketch_request", None, request)), "curator"
    )
    print("ready", flush=True)
    fd = os.open(wire, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    for i in range(start, start + 100_000):
        request_id = f"req-{i}"
        config = base.with_overrides({"lifetime.request_id": request_id}).config
        role = build_role(config, OWNER, world=share, exchange=exchange)
        party = admit_party(config, Party(role), exchange)  # charges the ledger, or declines
        node = Node(party, run_id=request_id, max_message_bytes=1 << 26)
        out = list(node.start())
        frame = encode(Envelope(PROTOCOL_VERSION, request_id, 1, "curator", OWNER, "sketch_request", None, request))
        out += node.receive(frame, "curator").outgoing
        for sent in out:
            if sent.kind not in RUNTIME_KINDS:
                os.write(fd, f"{request_id} {sent.kind} {len(sent.frame)}\n".encode())
                os.fsync(fd)
        if party.admission is not None and party.admission.state == "declined":
            print(f"declined {request_id}", flush=True)
        settle(party)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
