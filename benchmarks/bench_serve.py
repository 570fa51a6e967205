"""A served marketplace as its clients see it: request latency, throughput and owners' CPU.

Starts ``marketplace serve`` (a real process, with its owner agents) on a scenario, waits until every
owner is connected, then for each concurrency level C runs C consumer processes, each sending
requests one after another with ``marketplace.request`` (its own key, its own connection), for a
fixed number of requests per consumer after one untimed warm-up request each (a new process imports
the package and builds its share of the world once). Measured:

* **latency** of each request, from the call to the report in hand (queueing included): p50, p95, p99
  (the consumer draws no ``rounds.png``: that is its own post-processing, not the marketplace's);
* **throughput**: requests completed per minute over the level's wall time;
* **CPU per request** of the owner agents and of the server (user + system, from /proc), over the
  level's requests, against their targets: the owners' at most 3x their compute for the same request
  run in-process (each owner's ``compute_s``, summed; measured once before the levels) plus 2 ms per
  owner, the server's at most 10 ms (printed as ratios: 1 or less meets the target).

Every request must complete: a level where one did not is reported as failed, and the script exits 1.

``--busy N`` runs the same levels beside N processes that each keep a core busy (other work on the
machine), started once a level's consumers are warm and stopped when its requests are done. After
the levels every owner's ledger is read: ``charged_undelivered`` counts the requests an owner's
ledger committed whose report no consumer received, and ``reserved_left`` the reservations still
open; both must be 0, or the script exits 1 (no charge without delivery).

    python benchmarks/bench_serve.py --json serve.json                     # sketch, 4 owners, 1/4/8/16 consumers
    python benchmarks/bench_serve.py --owners 16 --levels 1,4,16 --json serve16.json
    python benchmarks/bench_serve.py --smoke --json smoke.json             # seconds: 2 owners, 2 consumers x 1
    python benchmarks/bench_serve.py --levels 8 --requests 1 --busy 4 --json busy.json  # 8 at once, 4 busy loops
    python benchmarks/bench_serve.py --protocol summarize --owners 16 --levels 1,4 --json points.json
    python benchmarks/bench_serve.py --owners 1000 --owners-per-agent 250 --levels 1 --requests 5   # 4 agents of 250
    python benchmarks/bench_serve.py --owners 1000 --owners-per-agent 250 --levels 1 --requests 3 --protocol summarize

``--plot PNG`` draws the p50 latency and the owners' and the server's CPU per request, per owner,
against the number of owners (``scale_plot.py``, shared with ``bench_scale.py``); one run serves one
number of owners, so ``--from-json`` draws from earlier ``--json`` files instead of running (a
``bench_scale.py --json`` file among them adds its one-shot rounds):

    python benchmarks/bench_serve.py --from-json serve-4.json serve-64.json serve-256.json --plot served.png

Past 64 owners the market's rows are dealt evenly (``partition: even``), at least 40 to each owner.

``--protocol summarize`` serves private ``summarize`` requests (``scenarios/summarize-buy.yaml``): the
owners keep their ledgers under the auction's relation (replace-one-distinct) and sell their points at
1 per point, so each request also reserves and settles a sale on every owner's ledger.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from proctree import CLOCK_TICK, cpu_ticks, stop_group, tree  # noqa: E402
from scale_plot import draw, read_rows  # noqa: E402

MARKET = ROOT / "scenarios" / "market-serve.yaml"
REQUESTS = {
    "sketch": ROOT / "scenarios" / "sketch-quickstart.yaml",
    "summarize": ROOT / "scenarios" / "summarize-buy.yaml",
}
LIFETIME = {
    "sketch": {"budget": {"epsilon": 1e6}, "relation": "add/remove-one", "filter": "basic"},
    "summarize": {
        "budget": {"epsilon": 1e6, "delta": 0.5},
        "relation": "replace-one-distinct",
        "filter": "basic",
        "terms": {"price": 1.0},
    },
}
"""Each protocol's lifetime section for the benchmark's marketplace: budgets no request exhausts."""
REQUEST = REQUESTS["sketch"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by linear interpolation, as numpy's default."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    pos = q * (len(ordered) - 1)
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def consumer_worker(args: tuple[str, str, str, int, str, dict], ready: Any, go: Any, results: Any) -> None:
    """One consumer process: one untimed warm-up request (the process imports the package and
    builds its share of the world once), then, once every consumer of the level is warm (``ready``)
    and the parent has read the CPU counters (``go``), ``count`` requests one after another. Puts
    (seconds, status) per timed request, the timed span (start, end) and the run ids of the requests
    whose reports it received (the warm-up's too) on ``results``."""
    endpoint, keys, request, count, out, overrides = args
    os.environ["MARKETPLACE_ROUND_PLOTS"] = "off"  # drawing rounds.png is the consumer's own post-processing
    import marketplace

    delivered: list[str] = []

    def once(i: int | str) -> tuple[float, str]:
        t0 = time.perf_counter()
        try:
            report = marketplace.request(
                request, market=endpoint, keys=keys, out=f"{out}/{i}", overrides=overrides, check=False, wait_s=600
            )
            status = report.status
            delivered.append(str(report.raw.get("run_id")))
        except Exception as err:  # noqa: BLE001 - counted as a failed request, named
            status = f"error: {type(err).__name__}: {err}"
        return time.perf_counter() - t0, status

    once("warm-up")
    ready.wait()
    go.wait()
    start = time.time()
    rows = [once(i) for i in range(count)]
    results.put((rows, start, time.time(), delivered))


LARGE = 64
"""From this many owners on, the market's rows are dealt evenly (``by_group`` leaves some owners none)."""
ROWS_PER_OWNER = 40
"""With more than :data:`LARGE` owners, the rows each owner holds at least."""


def market_for(owners: int, protocol: str) -> dict[str, Any]:
    """The benchmark's market: ``scenarios/market-serve.yaml`` with ``owners`` owners and budgets no
    request exhausts; past :data:`LARGE` owners its rows are dealt evenly, enough for every owner to
    hold :data:`ROWS_PER_OWNER` (a skewed deal of the file's 12,000 rows leaves some of 1,000 owners none)."""
    market = yaml.safe_load(MARKET.read_text())
    market["parties"] = {"owners": owners}
    market["lifetime"] = LIFETIME[protocol]
    if owners > LARGE:
        shift = market["data"]["source"]["covariate_shift"]
        needed = -(-owners * ROWS_PER_OWNER // shift["components"])  # rounded up
        shift["rows_per_component"] = max(shift["rows_per_component"], needed)
        market["data"]["partition"] = {"scheme": "even"}
    return market


def start_market(
    state: Path,
    owners: int,
    consumers: int,
    max_sessions: int,
    protocol: str = "sketch",
    owners_per_agent: int | None = None,
) -> tuple[subprocess.Popen, str]:
    market_file = state.parent / "market.yaml"
    market_file.write_text(yaml.safe_dump(market_for(owners, protocol)))
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    names = ",".join(f"c{i}" for i in range(consumers))
    per_agent = [] if owners_per_agent is None else ["--owners-per-process", str(owners_per_agent)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "marketplace", "serve", str(market_file), "--state", str(state), "--endpoint", endpoint]
        + ["--consumers", names, "--max-sessions", str(max_sessions), "--log-level", "WARNING", *per_agent],
        stdout=subprocess.DEVNULL,
        stderr=open(state.parent / "serve.log", "w"),  # noqa: SIM115 - the child writes it
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while True:
        status = state / "server.json"
        if status.exists():
            try:
                if json.loads(status.read_text()).get("owners_present") == owners:
                    break
            except ValueError:
                pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the marketplace did not come up with {owners} owners: see {state.parent / 'serve.log'}")
        time.sleep(0.2)
    return proc, endpoint


def agents_of(server: int) -> list[int]:
    return [pid for pid in tree(server) if pid != server]


def ticks(pids: list[int]) -> int:
    return sum(cpu_ticks(pid) or 0 for pid in pids)


def run_level(
    endpoint: str,
    state: Path,
    server: int,
    level: int,
    count: int,
    overrides: dict,
    request: Path = REQUEST,
    busy: int = 0,
) -> dict:
    """``level`` consumer processes at once, each warmed up by one untimed request in the same
    process that then sends the ``count`` timed ones (so no timed request pays a process's start),
    beside ``busy`` busy loops from the end of the warm-ups to the end of the timed requests."""
    ctx = multiprocessing.get_context("spawn")
    ready, go, results = ctx.Barrier(level + 1), ctx.Barrier(level + 1), ctx.Queue()
    procs = [
        ctx.Process(
            target=consumer_worker,
            args=(
                (
                    endpoint,
                    str(state / "consumers" / f"c{i}"),
                    str(request),
                    count,
                    str(state.parent / f"out-{level}-{i}"),
                    overrides,
                ),
                ready,
                go,
                results,
            ),
        )
        for i in range(level)
    ]
    for proc in procs:
        proc.start()
    ready.wait(timeout=1200)  # every consumer warm
    loops = busy_loops(busy)
    try:
        agents = agents_of(server)
        before_agents, before_server = ticks(agents), cpu_ticks(server) or 0
        go.wait(timeout=60)
        collected = [results.get(timeout=3600) for _ in procs]
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    for proc in procs:
        proc.join(timeout=60)
    agent_s = (ticks(agents) - before_agents) / CLOCK_TICK
    server_s = ((cpu_ticks(server) or 0) - before_server) / CLOCK_TICK
    wall = max(c[2] for c in collected) - min(c[1] for c in collected)
    latencies = [s for c in collected for s, _ in c[0]]
    statuses = [st for c in collected for _, st in c[0]]
    done = len(statuses)
    failed = [st for st in statuses if st != "completed"]
    return {
        "consumers": level,
        "requests": done,
        "completed": done - len(failed),
        "failed_examples": sorted(set(failed))[:3],
        "p50_s": round(percentile(latencies, 0.50), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "p99_s": round(percentile(latencies, 0.99), 3),
        "mean_s": round(statistics.fmean(latencies), 3) if latencies else None,
        "max_s": round(max(latencies), 3) if latencies else None,
        "requests_per_min": round(60 * done / wall, 1) if wall > 0 else None,
        "wall_s": round(wall, 2),
        "owner_cpu_s_per_request": round(agent_s / done, 4) if done else None,
        "server_cpu_s_per_request": round(server_s / done, 4) if done else None,
        "latencies_s": [round(x, 4) for x in latencies],
        "note": "each consumer process sent one untimed warm-up request first, whose CPU is not counted",
        "delivered": sorted(run for c in collected for run in c[3]),
    }


OWNER_FACTOR, OWNER_EXTRA_S, SERVER_TARGET_S = 3.0, 0.002, 0.010
"""The targets a served request is held to: the owners' CPU at most 3x their compute in-process plus
2 ms per owner, the server's at most 10 ms per session."""


def inprocess_owner_compute(market_file: Path, request: Path, overrides: dict, tmp: Path, repeats: int = 3) -> float:
    """The owners' compute (seconds, summed over the owners: each party's ``compute_s``) for one request
    run in-process on the session's own scenario (the marketplace's owners and data, the request's
    protocol, with the consumers' ``overrides``; ledgers in ``tmp``): the protocol's own work, the floor
    a served request is measured against. The least of ``repeats`` runs after a first, untimed one
    (imports, the world)."""
    os.environ["MARKETPLACE_ROUND_PLOTS"] = "off"
    import marketplace
    from marketplace.scenario import Scenario
    from marketplace.service.sessions import session_scenario

    market = Scenario.from_file(market_file)
    text = Scenario.from_file(request, overrides).dump_yaml() if overrides else request.read_text()
    sums = []
    for i in range(repeats + 1):
        scenario = session_scenario(market, text, session=f"inprocess-{i}", consumer="c0")
        scenario = scenario.with_overrides({"lifetime.ledgers": str(tmp / "inprocess-ledgers")})
        report = marketplace.run(scenario, out=tmp / f"inprocess-{i}", driver="inprocess", check=False)
        by_party = report.raw.get("timing", {}).get("by_party", {})
        sums.append(sum(t.get("compute_s", 0.0) for p, t in by_party.items() if p.startswith("owner")))
    return min(sums[1:])


def targets_line(row: dict, owners: int, compute_s: float) -> str:
    """The level's CPU per request against its targets (``OWNER_FACTOR`` x the owners' in-process compute
    + ``OWNER_EXTRA_S`` per owner; ``SERVER_TARGET_S``), as ratios (<= 1: met)."""
    owner_target = OWNER_FACTOR * compute_s + OWNER_EXTRA_S * owners
    row["owner_cpu_target_s"], row["server_cpu_target_s"] = round(owner_target, 4), SERVER_TARGET_S
    row["inprocess_owner_compute_s"] = round(compute_s, 4)
    row["owner_cpu_vs_target"] = round(row["owner_cpu_s_per_request"] / owner_target, 2)
    row["server_cpu_vs_target"] = round(row["server_cpu_s_per_request"] / SERVER_TARGET_S, 2)
    return (
        f"    owners' CPU {row['owner_cpu_s_per_request'] * 1000:.1f} ms vs target {owner_target * 1000:.1f} ms "
        f"({OWNER_FACTOR:g} x in-process compute {compute_s * 1000:.1f} ms + {OWNER_EXTRA_S * 1000:g} ms x {owners} "
        f"owners): {row['owner_cpu_vs_target']:.2f}x;  server CPU {row['server_cpu_s_per_request'] * 1000:.1f} ms vs "
        f"target {SERVER_TARGET_S * 1000:g} ms: {row['server_cpu_vs_target']:.2f}x"
    )


def busy_loops(n: int) -> list[subprocess.Popen]:
    """``n`` processes that each keep a core busy until killed."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def ledger_audit(state: Path, owners: int, delivered: set[str]) -> dict:
    """Every owner's ledger against the requests whose reports consumers received: committed charges
    no consumer received, and reservations still open."""
    from marketplace.privacy.lifetime import LifetimeLedger, ledger_file

    undelivered, reserved = set(), set()
    for i in range(owners):
        path = ledger_file(state / "owners", f"owner-{i + 1}")
        if not path.exists():
            continue
        with LifetimeLedger.read(path) as ledger:
            for entry in ledger.history():
                if entry.state == "committed" and entry.request_id not in delivered:
                    undelivered.add(entry.request_id)
                elif entry.state == "reserved":
                    reserved.add(entry.request_id)
    return {"charged_undelivered": sorted(undelivered), "reserved_left": sorted(reserved)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", type=int, default=4)
    parser.add_argument(
        "--owners-per-agent",
        type=int,
        metavar="N",
        help="owners each agent process hosts (marketplace serve --owners-per-process; default: two agents)",
    )
    parser.add_argument("--levels", default="1,4,8,16", help="concurrent consumers, comma-separated")
    parser.add_argument("--requests", type=int, default=8, help="timed requests per consumer (after a warm-up one)")
    parser.add_argument("--max-sessions", type=int, default=16)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--protocol", choices=sorted(REQUESTS), default="sketch", help="what every request asks for")
    parser.add_argument("--smoke", action="store_true", help="2 owners, 2 consumers, 1 timed request each: seconds")
    parser.add_argument("--busy", type=int, default=0, metavar="N", help="run beside N busy loops (a loaded machine)")
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--plot", metavar="PNG", help="draw latency and CPU per owner against owners here")
    parser.add_argument(
        "--from-json",
        nargs="+",
        default=[],
        metavar="JSON",
        help="run nothing: draw --plot from the rows of earlier --json files (several numbers of owners)",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        if not args.plot:
            parser.error("--from-json draws a figure: give --plot PNG")
        draw(read_rows(args.from_json), Path(args.plot))
        print(f"scale figure drawn: {args.plot}")
        return 0
    levels = [int(x) for x in args.levels.split(",")]
    if args.smoke:
        levels, args.requests, args.owners = [2], 1, 2
    overrides = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in args.sets)}
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        state = Path(tmp) / "state"
        proc, endpoint = start_market(
            state, args.owners, max(levels), args.max_sessions, args.protocol, args.owners_per_agent
        )
        compute_s = inprocess_owner_compute(
            state.parent / "market.yaml", REQUESTS[args.protocol], overrides, Path(tmp), repeats=1 if args.smoke else 3
        )
        try:
            for level in levels:
                request = REQUESTS[args.protocol]
                row = run_level(endpoint, state, proc.pid, level, args.requests, overrides, request, args.busy) | {
                    "owners": args.owners,
                    "protocol": args.protocol,
                    "cpus": os.cpu_count(),
                    "busy": args.busy,
                }
                rows.append(row)
                print(
                    f"{level:>3} consumers x {args.requests} requests ({args.owners} owners): "
                    f"p50 {row['p50_s']:.3f} s  p95 {row['p95_s']:.3f} s  p99 {row['p99_s']:.3f} s  "
                    f"{row['requests_per_min']:.1f} req/min  "
                    f"owners' CPU {row['owner_cpu_s_per_request']:.3f} s/request  "
                    f"server CPU {row['server_cpu_s_per_request']:.3f} s/request  "
                    f"completed {row['completed']}/{row['requests']}",
                    flush=True,
                )
                print(targets_line(row, args.owners, compute_s), flush=True)
        finally:
            stop_group(proc)
        audit = ledger_audit(state, args.owners, {run for row in rows for run in row["delivered"]})
    for row in rows:
        row.update(audit)
    print(
        f"ledgers: {len(audit['charged_undelivered'])} requests charged without a delivered report, "
        f"{len(audit['reserved_left'])} reservations left open",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    if args.plot:
        draw(rows, Path(args.plot))
        print(f"scale figure drawn: {args.plot}", flush=True)
    delivered_all = all(r["completed"] == r["requests"] for r in rows)
    return 0 if delivered_all and not audit["charged_undelivered"] and not audit["reserved_left"] else 1


if __name__ == "__main__":
    sys.exit(main())
