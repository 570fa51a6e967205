"""The floor of the wire: a summarize round's frames over our topology, with nothing but pyzmq.

    python benchmarks/bench_wire.py                                # K = 1,000, 100 rounds, CURVE, 3 repeats
    python benchmarks/bench_wire.py --owners 16 256 1000 --json wire.json
    python benchmarks/bench_wire.py --owners 1000 --no-curve
    python benchmarks/bench_wire.py --smoke

One curator process binds a ROUTER (CURVE server, ZAP allowlist of the run's keys, the driver's
socket options, ``ROUTER_MANDATORY``, listen backlog and I/O threads); ``--hosts`` owner-host
processes each connect one DEALER per owner (its own key and TCP connection, one context per host)
and read all their sockets through epoll over ``ZMQ_FD``. Each round the curator sends every owner
a frame the size of a real ``round_open`` and waits for one frame the size of a real ``bid`` from
each: no role, no codec, no Node, so what a round costs here is what moving its frames costs.
The round is timed at the curator; CPU is the whole tree's (curator and hosts, every thread), read
from ``/proc/<pid>/task/*/schedstat`` around the measured rounds. Each repeat starts fresh
processes (so each measures its own connect time: until every owner's hello is in).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import os
import select
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zmq  # noqa: E402

from marketplace.runner.processes import owner_hosts  # noqa: E402
from marketplace.transport.context import new_context  # noqa: E402
from marketplace.transport.curve import CurveKeys, PartyAuthenticator, generate_keys, party_names  # noqa: E402
from marketplace.transport.link_settings import LinkSettings  # noqa: E402
from marketplace.transport.sockets import (  # noqa: E402
    EVENTS,
    NOBLOCK,
    NOBLOCK_MORE,
    POLLIN,
    configure_socket,
    plaintext_identity,
)
from marketplace.transport.tuning import (  # noqa: E402  # noqa: E402
    io_threads,
    listen_backlog,
    raise_open_files_limit,
    scaled_heartbeats,
    spread_order,
)

ROUND_OPEN_BYTES, BID_BYTES, HELLO_BYTES = 1277, 132, 261
"""Frame sizes of the quickstart scenario (140 features, 16 owners), from its report's
``messages.by_kind``: bytes / count (a ``round_open`` carries the summary's mean, 140 float64)."""
SEND = getattr(zmq.backend, "Socket", zmq.Socket).send
"""pyzmq's send under its Python wrapper, as the driver calls it (a floor should not pay more)."""
STOP = b""
"""The curator's last frame to each owner, answered the same way: the owner is done."""
WARMUP_ROUNDS = 5
STEP_TIMEOUT_S = 60.0
"""The longest wait for any one step (a bind, all hellos, one round's bids); past it the run fails."""


def settings_for(owners: int) -> LinkSettings:
    """The driver's default link settings for a run of ``owners`` owners (heartbeats scaled for K + 2 parties)."""
    base = LinkSettings()
    interval, timeout = scaled_heartbeats(base.heartbeat_interval_s, base.heartbeat_timeout_s, owners + 2)
    return dataclasses.replace(base, heartbeat_interval_s=interval, heartbeat_timeout_s=timeout)


def tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds so far of every thread of the processes ``pids`` (scheduler run time, in ns)."""
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                pass  # a thread that has just exited
    return total / 1e9


def curator(conn: Connection, keys: Path | None, owners: int, rounds: int, warmup: int, round_open_bytes: int) -> None:
    """The curator process: bind, report the endpoint, learn each owner's route from its hello, run
    the rounds, stop the owners, send the figures back through ``conn``."""
    settings = settings_for(owners)
    raise_open_files_limit(2 * (owners + 2) + 256)
    ctx = new_context(io_threads(owners + 2))
    sock = ctx.socket(zmq.ROUTER)
    configure_socket(sock, settings)
    sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
    sock.setsockopt(zmq.BACKLOG, listen_backlog(owners + 2))
    auth = None
    if keys is not None:
        server = CurveKeys(keys, "curator")
        auth = PartyAuthenticator(ctx, server.allowlist())
        auth.start()
        server.configure_server(sock)
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    try:
        conn.send(f"tcp://127.0.0.1:{sock.bind_to_random_port('tcp://127.0.0.1')}")
        if not conn.poll(STEP_TIMEOUT_S):
            raise RuntimeError("no host pids from the benchmark")
        started, host_pids = conn.recv()  # when the first host was started (the clock is the machine's)
        pids = [os.getpid(), *host_pids]
        routes = {}
        for route, party in _replies(sock, poller, owners, want_user_id=keys is not None):
            routes[party if keys is not None else route] = route  # CURVE: its key's party; else its claim
        connect_s = time.monotonic() - started
        order = [routes[name.encode()] for name in _owner_names(owners)]
        order = [order[i] for i in spread_order(owners)]  # as the driver sends a broadcast
        out, times = bytearray(round_open_bytes), []
        for n in range(warmup + rounds):
            if n == warmup:
                cpu0, w0 = tree_cpu_s(pids), time.perf_counter()
            t = time.perf_counter()
            struct.pack_into("<I", out, 0, n)
            for route in order:
                SEND(sock, route, NOBLOCK_MORE)
                SEND(sock, out, NOBLOCK)
            for _, frame in _replies(sock, poller, owners):
                if frame[:4] != out[:4]:
                    raise RuntimeError(f"round {n}: a bid for round {struct.unpack_from('<I', frame)[0]} came back")
            times.append(time.perf_counter() - t)
        wall, cpu = time.perf_counter() - w0, tree_cpu_s(pids) - cpu0
        for route in order:
            sock.send_multipart([route, STOP], NOBLOCK)
        list(_replies(sock, poller, owners))
        conn.send(
            {
                "connect_s": connect_s,
                "ms_per_round": 1e3 * wall / rounds,
                "cpu_s_per_round": cpu / rounds,
                "round_ms_median": 1e3 * statistics.median(times[warmup:]),
            }
        )
    finally:
        sock.close(linger=0)
        if auth is not None:
            auth.stop()
        ctx.term()


def _replies(
    sock: zmq.Socket, poller: zmq.Poller, count: int, *, want_user_id: bool = False
) -> Iterator[tuple[bytes, bytes]]:
    """Yield (route, frame) until ``count`` frames came, or (route, party) with ``want_user_id``: the
    party the frame's CURVE key belongs to (its User-Id). Each wait is bounded by :data:`STEP_TIMEOUT_S`."""
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while count:
        try:
            route = sock.recv(NOBLOCK)
            frame = sock.recv(NOBLOCK, copy=not want_user_id)
        except zmq.Again:
            if not poller.poll(max(0, 1e3 * (deadline - time.monotonic()))) and time.monotonic() > deadline:
                raise RuntimeError(f"{count} replies still missing after {STEP_TIMEOUT_S:g} s") from None
            continue
        count -= 1
        yield route, (frame.get("User-Id").encode() if want_user_id else frame)


def _owner_names(owners: int) -> list[str]:
    return party_names(owners)[1:-1]


def host(
    names: list[str], endpoint: str, keys: Path | None, owners: int, hello_bytes: int, bid_bytes: int, deadline_s: float
) -> None:
    """An owner-host process: one DEALER per owner in ``names``, all read in one thread through
    epoll over their ``ZMQ_FD``; each round frame is answered at once with a bid of the same round."""
    settings = settings_for(owners)
    raise_open_files_limit(4 * len(names) + 64)
    ctx = new_context(io_threads(len(names)))
    ctx.set(zmq.MAX_SOCKETS, max(ctx.get(zmq.MAX_SOCKETS), len(names) + 16))
    epoll, by_fd, hello = select.epoll(), {}, bytes(hello_bytes)
    try:
        for name in names:
            sock = ctx.socket(zmq.DEALER)
            configure_socket(sock, settings)
            if keys is not None:
                CurveKeys(keys, name).configure_client(sock)
            else:
                plaintext_identity(sock, name)  # plaintext: its routing id is its claim, as in the driver
            sock.connect(endpoint)
            sock.send(hello)
            by_fd[sock.get(zmq.FD)] = sock
            epoll.register(sock.get(zmq.FD), select.EPOLLIN)
        bid, live = bytearray(bid_bytes), set(by_fd.values())
        pending, deadline = set(live), time.monotonic() + deadline_s
        while live:
            for sock in pending:
                while sock.get(EVENTS) & POLLIN:  # re-asked after every send: a send can take the read signal
                    frame = sock.recv(NOBLOCK)
                    if frame == STOP:
                        SEND(sock, STOP, NOBLOCK)
                        live.discard(sock)
                    else:
                        bid[:4] = frame[:4]
                        SEND(sock, bid, NOBLOCK)
            if time.monotonic() > deadline:
                raise RuntimeError(f"host of {names[0]}..: {len(live)} owners not stopped in {deadline_s:g} s")
            pending = {by_fd[fd] for fd, _ in epoll.poll(1.0)} if live else set()
    finally:
        epoll.close()
        ctx.destroy(linger=1000)  # the last STOP replies leave; bounded


def run_once(owners: int, rounds: int, hosts: int, keys: Path | None, warmup: int = WARMUP_ROUNDS) -> dict[str, float]:
    """Fresh curator and host processes for one repeat at ``owners`` owners; the curator's figures.
    Every wait is bounded, and whatever is still running when this returns or fails is killed."""
    ctx = mp.get_context("fork")  # no ZeroMQ context exists in this process to be forked
    parent, child = ctx.Pipe()
    run_s = STEP_TIMEOUT_S * (rounds + warmup + 3)  # each step of the curator is bounded by STEP_TIMEOUT_S
    procs = [ctx.Process(target=curator, args=(child, keys, owners, rounds, warmup, ROUND_OPEN_BYTES), name="curator")]
    try:
        procs[0].start()
        child.close()  # the curator's end is the curator's: its exit is then seen here as EOF
        endpoint = _receive(parent, procs[0], STEP_TIMEOUT_S, "its endpoint")
        started = time.monotonic()
        for group in owner_hosts(_owner_names(owners), "auto", cores=hosts):
            procs.append(
                ctx.Process(
                    target=host,
                    args=(group, endpoint, keys, owners, HELLO_BYTES, BID_BYTES, run_s),
                    name=f"host of {len(group)} owners",
                )
            )
            procs[-1].start()
        parent.send((started, [p.pid for p in procs[1:]]))
        figures = _receive(parent, procs[0], run_s, "its figures")
        deadline = time.monotonic() + STEP_TIMEOUT_S
        for proc in procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        bad = [f"{p.name} (pid {p.pid}): exit {p.exitcode}" for p in procs if p.exitcode != 0]
        if bad:
            raise RuntimeError("; ".join(bad))
        return figures
    finally:
        parent.close()
        for proc in procs:
            if proc.is_alive():
                proc.kill()
                proc.join(5)


def _receive(conn: Connection, proc: mp.Process, timeout_s: float, what: str) -> Any:
    """The next object from ``proc`` through ``conn``, within ``timeout_s``; fails at once if it exits."""
    if not conn.poll(timeout_s):
        raise RuntimeError(f"the curator sent no {what} in {timeout_s:g} s")
    try:
        return conn.recv()
    except EOFError:
        proc.join(5)
        raise RuntimeError(f"the curator exited ({proc.exitcode}) before sending {what}") from None


def measure(owners: int, rounds: int, hosts: int, curve: bool, repeats: int) -> dict[str, object]:
    """``repeats`` runs at ``owners`` owners; medians (and min-max of the round time) over them."""
    with tempfile.TemporaryDirectory(prefix="bench-wire-") as tmp:
        keys = None
        if curve:
            keys = Path(tmp)
            generate_keys(keys, owners=owners)
        runs = [run_once(owners, rounds, hosts, keys) for _ in range(repeats)]
    ms = [r["ms_per_round"] for r in runs]
    cpu = statistics.median(r["cpu_s_per_round"] for r in runs)
    return {
        "owners": owners,
        "ms_per_round": statistics.median(ms),
        "ms_per_round_min": min(ms),
        "ms_per_round_max": max(ms),
        "connect_s": statistics.median(r["connect_s"] for r in runs),
        "cpu_s_per_round": cpu,
        "cpu_us_per_owner_round": 1e6 * cpu / owners,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--owners", type=int, nargs="+", default=[1000], metavar="K")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--hosts", type=int, default=2, help="owner-host processes (default 2, as on a 2-core machine)")
    parser.add_argument("--curve", action=argparse.BooleanOptionalAction, default=True, help="CURVE links (default on)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    parser.add_argument("--smoke", action="store_true", help="K = 16, 5 rounds, 1 repeat (seconds)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.owners, args.rounds, args.repeats = [16], 5, 1
    for name in ("rounds", "hosts", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}: expected an integer >= 1, got {getattr(args, name)}")
    if min(args.owners) < 1:
        parser.error(f"--owners: expected integers >= 1, got {args.owners}")
    load = os.getloadavg()
    print(
        f"wire floor: round_open {ROUND_OPEN_BYTES:,} B to each owner, bid {BID_BYTES:,} B back; "
        f"CURVE {'on' if args.curve else 'off'}; {args.hosts} owner hosts; {args.rounds} rounds "
        f"(+{WARMUP_ROUNDS} warm-up); {args.repeats} repeat(s); load average {load[0]:.2f} at start"
    )
    print(
        f"{'K':>6} {'ms/round':>9} {'[min-max]':>17} {'connect s':>10} {'CPU s/round':>12} {'us CPU/owner-round':>19}"
    )
    results = []
    for owners in args.owners:
        row = measure(owners, args.rounds, args.hosts, args.curve, args.repeats)
        results.append(row)
        spread = f"{row['ms_per_round_min']:.2f}-{row['ms_per_round_max']:.2f}"
        print(
            f"{owners:>6} {row['ms_per_round']:>9.2f} {spread:>17} "
            f"{row['connect_s']:>10.2f} {row['cpu_s_per_round']:>12.4f} {row['cpu_us_per_owner_round']:>19.1f}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "frame_bytes": {"round_open": ROUND_OPEN_BYTES, "bid": BID_BYTES, "hello": HELLO_BYTES},
                    "curve": args.curve,
                    "hosts": args.hosts,
                    "rounds": args.rounds,
                    "warmup_rounds": WARMUP_ROUNDS,
                    "repeats": args.repeats,
                    "load_average_at_start": load,
                    "results": results,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
