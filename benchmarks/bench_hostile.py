"""Floods: one peer sends as fast as it can for 25 seconds or more while a run goes on.

Run (about two minutes on a 2-core machine):

    python benchmarks/bench_hostile.py --json hostile.json

Four floods, each from one socket on loopback, each against a run started by hand (curator, three
owners, consumer) with short heartbeats (0.2 s, timeout 2 s):

* ``refused``: frames that are not msgpack, from a stranger (plaintext);
* ``curve_wrong_identity``: under CURVE, a holder of owner-3's key sending hello frames that claim
  to be owner-2 (all refused);
* ``stranger_heartbeats``: valid heartbeat frames from a party that is not in the run (plaintext);
* ``unread_errors``: refused frames from a stranger that never reads the error replies (small
  high-water marks, so the curator's queue to it fills at once).

The flood starts with the curator and the owners; the consumer joins ``--delay`` seconds (25) later (the
curator waits for it, while heartbeating the owners under the flood), and the flood goes on until
the run ends. Reported per flood: frames sent, the flood's length, whether every party completed,
whether the selection equals the clean run's, the run's wall time against the clean run's, and what
the curator dropped unread (quarantine) or did not queue (replies).

``--smoke`` runs one flood against two owners, with a quarter-second delay and 10 rounds (seconds),
for the test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from conftest import tiny_raw  # noqa: E402
from hostile import Attacker, LocalRun, hostile_scenario  # noqa: E402

from marketplace.messages import PROTOCOL_VERSION, Envelope, encode  # noqa: E402
from marketplace.messages.kinds import Heartbeat, Hello  # noqa: E402
from marketplace.transport.curve import CurveKeys  # noqa: E402

FLOODS = ("refused", "curve_wrong_identity", "stranger_heartbeats", "unread_errors")


def frame(sender: str, body, msg_id: int, run_id: str) -> bytes:
    return encode(Envelope(PROTOCOL_VERSION, run_id, msg_id, sender, "curator", type(body).KIND, None, body))


def attacker_for(kind: str, run: LocalRun, seconds: float) -> Attacker:
    if kind == "refused":
        return Attacker(run.endpoint, identity=b"mallory").flood(lambda i: b"\x00not msgpack at all", seconds)
    if kind == "curve_wrong_identity":
        impostor = frame("owner-2", Hello(role="owner", protocol="summarize", scenario="tiny"), 1, run.run_id)
        return Attacker(run.endpoint, keys=CurveKeys(run.keys, "owner-3")).flood(lambda i: impostor, seconds)
    if kind == "stranger_heartbeats":
        beat = frame("mallory", Heartbeat(), 1, run.run_id)
        return Attacker(run.endpoint, identity=b"mallory").flood(lambda i: beat, seconds)
    if kind == "unread_errors":
        return Attacker(run.endpoint, identity=b"mallory", read=False).flood(lambda i: b"\xc1", seconds)
    raise ValueError(f"unknown flood {kind!r}: expected one of {', '.join(FLOODS)}")


def scenario(rounds: int, kind: str | None, owners: int = 3) -> dict:
    raw = hostile_scenario(tiny_raw(), rounds=rounds, owners=owners)
    if kind == "unread_errors":
        raw["transport"].update(high_water_mark=20, refusal_budget=100_000)
    return raw


def one_run(folder: Path, rounds: int, kind: str | None, delay_s: float, owners: int = 3) -> dict:
    curve = kind == "curve_wrong_identity"
    run = LocalRun(folder, scenario(rounds, kind, owners), curve=curve)
    run.curator()
    attack = attacker_for(kind, run, seconds=600) if kind else None
    flood_started = time.monotonic()
    try:
        run.everyone(skip=("consumer",))
        time.sleep(delay_s)
        run.party("consumer")
        codes = run.wait(timeout_s=300)
    finally:
        flood_s = time.monotonic() - flood_started
        if attack is not None:
            attack.close()
    report = run.assemble()
    curator = run.curator_report()
    return {
        "flood": kind or "none",
        "frames_sent": attack.sent if attack else 0,
        "flood_s": round(flood_s, 1),
        "exit_codes": codes,
        "status": report["status"],
        "dropouts": sorted(report.get("dropouts") or {}),
        "selection": report["selection"],
        "wall_s": round(run.wall_s, 2),
        "quarantined": sum((curator.get("driver") or {}).get("quarantined", {}).values()),
        "replies_dropped": (curator.get("driver") or {}).get("replies_dropped", 0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--floods", nargs="+", default=list(FLOODS), choices=FLOODS)
    parser.add_argument("--delay", type=float, default=25.0, help="seconds between the owners and the consumer joining")
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument(
        "--owners", type=int, default=3, help="owners of every run (curve_wrong_identity needs owner-3: at least 3)"
    )
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--smoke", action="store_true", help="one flood, two owners, quarter-second delay, 10 rounds")
    args = parser.parse_args(argv)
    if args.smoke:
        args.floods, args.delay, args.rounds, args.owners = ["refused"], 0.25, 10, 2
    least = 3 if "curve_wrong_identity" in args.floods else 1  # that flood holds owner-3's key
    if args.owners < least:
        parser.error(
            f"--owners: expected an integer >= {least} with the floods {' '.join(args.floods)}, got {args.owners}"
        )
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-hostile-") as tmp:
        clean = one_run(Path(tmp) / "clean", args.rounds, None, args.delay, args.owners)
        print(json.dumps({k: v for k, v in clean.items() if k != "selection"}), flush=True)
        for kind in args.floods:
            row = one_run(Path(tmp) / kind, args.rounds, kind, args.delay, args.owners)
            row["same_selection"] = row.pop("selection") == clean["selection"]
            row["wall_over_clean_s"] = round(row["wall_s"] - clean["wall_s"], 2)
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    ok = all(r["status"] == "completed" and r["same_selection"] and not r["dropouts"] for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
