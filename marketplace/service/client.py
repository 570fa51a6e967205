"""``marketplace request``: a consumer's request to a marketplace that stays open.

The consumer connects to the server's control endpoint with its own CURVE key (its kit: its
``<name>.key_secret`` and the server's ``server.key``), sends its request (a scenario) and waits in
the queue. When its session starts it runs the consumer of the session's run locally (``marketplace
consumer``, with its own key: the session's curator admits no other consumer), sends its own party
report back, and receives the session's run report, which it writes to its output folder as
``report.json``. A key the marketplace does not know is refused at the handshake, and the request
ends at once saying so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from marketplace.data.own_files import ReadLimits
from marketplace.runner.command_line import party_command
from marketplace.service import control
from marketplace.service.keys import SERVER, find_own_key, load_pair, load_public, write_public

POLL_MS = 200
FAILED_HANDSHAKE = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
    zmq.EVENT_HANDSHAKE_FAILED_AUTH,
)


class RequestRefused(RuntimeError):
    """The marketplace refused the request (or the consumer's key); nothing ran, nothing was charged."""


class RequestFailed(RuntimeError):
    """The request could not be completed (the marketplace vanished, a deadline passed)."""


@dataclass
class RequestResult:
    """A finished request: its session id, the run report (a dict) and where it was written."""

    session: str
    report: dict[str, Any]
    folder: Path


@dataclass(frozen=True)
class OwnTarget:
    """The consumer's own rows for a marketplace described by its public schema: its target D_v
    (``data``) and optionally its test set (``test``), files that stay with the consumer's process
    (only what the protocol itself sends leaves it)."""

    data: Path
    test: Path | None = None
    limits: ReadLimits = ReadLimits()

    def arguments(self) -> list[str]:
        """The consumer command's options that hand it these files."""
        return [
            "--data",
            str(self.data),
            *(["--test", str(self.test)] if self.test is not None else []),
            *self.limits.arguments(),
        ]

    def check(self, market_file: Path) -> int:
        """Read the files and check them against the marketplace's schema (``market_file``) before
        anything is sent; returns the target's row count. ValueError names the file, line and column."""
        from marketplace.parties import own_rows
        from marketplace.scenario import ScenarioError
        from marketplace.scenario.load import load_scenario

        try:
            config = load_scenario(market_file).config
        except ScenarioError as err:
            raise ValueError(f"the marketplace's file: {err}") from None
        return len(own_rows(config, "consumer", data=self.data, test=self.test, limits=self.limits)["validation"])


def request(
    scenario_text: str,
    *,
    market: str,
    keys: Path,
    out: Path,
    wait_s: float = 3600.0,
    on_event: Callable[[str], None] | None = None,
    own: OwnTarget | None = None,
    market_file: Path | None = None,
) -> RequestResult:
    """Send one request and see it through (module docstring). ``on_event`` is told each step
    ("queued: 1 ahead", "session s0003-...: running the consumer", ...). ``own`` is the consumer's
    own target (and test set) for a marketplace described by its public schema; with
    ``market_file`` (the marketplace's file, default ``market.yaml`` in the kit when there) the files
    are checked against the schema before the request is sent."""
    say = on_event or (lambda text: None)
    keys = Path(keys)
    if own is not None:
        own = OwnTarget(Path(own.data).resolve(), Path(own.test).resolve() if own.test else None, own.limits)
        market_file = market_file or (keys / "market.yaml" if (keys / "market.yaml").is_file() else None)
        if market_file is not None:
            rows = own.check(Path(market_file))
            say(f"own target: {rows} rows in {own.data}, checked against the marketplace's schema")
    name, secret_path = find_own_key(keys)
    public, secret = load_pair(secret_path)
    server = load_public(keys / f"{SERVER}.key")
    out = Path(out).resolve()  # the consumer runs in it: every path handed to it must not depend on the cwd
    out.mkdir(parents=True, exist_ok=True)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 2000)
    sock.setsockopt(zmq.MAXMSGSIZE, control.MAX_FRAME)
    sock.curve_secretkey, sock.curve_publickey, sock.curve_serverkey = secret, public, server
    monitor = sock.get_monitor_socket(
        zmq.EVENT_HANDSHAKE_SUCCEEDED
        | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
        | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
        | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    )
    try:
        sock.connect(market)
        sock.send(control.encode(control.SessionOpen(scenario=scenario_text)))
        deadline = time.monotonic() + wait_s
        session = ""
        while True:
            message = _next(sock, monitor, deadline, market, name)
            if isinstance(message, control.SessionRefused):
                raise RequestRefused(f"the marketplace refused the request: {message.reason}")
            if isinstance(message, control.SessionQueued):
                session = message.session
                say(f"queued as session {session}" + (f" ({message.position} ahead)" if message.position else ""))
            elif isinstance(message, control.SessionReady):
                session = message.session
                say(f"session {session}: running the consumer against {message.endpoint}")
                consumer_report = _run_consumer(message, secret_path, out, own)
                if consumer_report is not None:
                    sock.send(
                        control.encode(control.PartyReport(session=session, party="consumer", report=consumer_report))
                    )
                say(f"session {session}: waiting for the run report")
            elif isinstance(message, control.SessionReport) and message.session == session:
                report = json.loads(message.report)
                _write_run_files(report, out)
                return RequestResult(session, report, out)
    finally:
        sock.disable_monitor()
        monitor.close(linger=0)
        sock.close(linger=0)
        ctx.term()


def _write_run_files(report: dict[str, Any], out: Path) -> None:
    """``report.json`` (as the runner writes it), and for a full report ``messages.csv`` and the
    history files, as in any run folder."""
    from marketplace.runner.json_files import write_json

    if "protocol" not in report:  # not a run report: the session ended before one could be assembled
        write_json(out / "failure.json", report)
        return
    write_json(out / "report.json", report)
    if "messages" in report and "history" in report:
        from marketplace.reporting.history import write_history_files
        from marketplace.runner.report import write_messages_csv

        write_messages_csv(report, out / "messages.csv")
        write_history_files(report, out)


def _next(sock: zmq.Socket, monitor: zmq.Socket, deadline: float, market: str, name: str) -> Any:
    """The next control message; raises when the key is refused or the deadline passes."""
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    poller.register(monitor, zmq.POLLIN)
    failed = 0
    while time.monotonic() < deadline:
        ready = dict(poller.poll(POLL_MS))
        if monitor in ready:
            event = recv_monitor_message(monitor)
            if event["event"] in FAILED_HANDSHAKE:
                failed += 1
                # the server's ZAP handler said no (AUTH), or twice we could not agree on keys: retrying cannot help
                if event["event"] == zmq.EVENT_HANDSHAKE_FAILED_AUTH or failed >= 2:
                    raise RequestRefused(
                        f"the marketplace at {market} refused the key of {name!r}: is it an allowed "
                        f"consumer (its public key in the server's keys/consumers/)?"
                    )
            elif event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                failed = 0
        if sock in ready:
            try:
                return control.decode(sock.recv())
            except control.ControlError as err:
                raise RequestFailed(f"the marketplace sent a frame we could not read: {err}") from None
    raise RequestFailed(f"no answer from the marketplace at {market} in time (is it running? is the endpoint right?)")


def _run_consumer(ready: control.SessionReady, secret_path: Path, out: Path, own: OwnTarget | None) -> bytes | None:
    """Run this session's consumer with our own key (and our own target, ``own``); return its party
    report (JSON bytes)."""
    keys = out / "session-keys"
    keys.mkdir(exist_ok=True, mode=0o700)
    shutil.copyfile(secret_path, keys / "consumer.key_secret")
    (keys / "consumer.key_secret").chmod(0o600)
    write_public(keys / "curator.key", ready.curator_key)
    (out / "scenario.yaml").write_text(ready.scenario)
    report = out / "parties" / "consumer.json"
    with open(out / "consumer.log", "w") as log_file:
        command = party_command(
            "consumer",
            scenario=out / "scenario.yaml",
            endpoint=ready.endpoint,
            keys=keys,
            run_id=ready.session,
            report=report,
            extra=own.arguments() if own is not None else (),
        )
        subprocess.run(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=out, check=False)
    shutil.rmtree(keys, ignore_errors=True)  # a copy of our secret key: not left behind
    return report.read_bytes() if report.exists() else None
