"""``marketplace agent``: a long-lived host of data owners that joins a marketplace's sessions.

Each served owner has its own control connection to the server, under its own CURVE key (from
``--keys``: ``<owner>.key_secret`` and the server's ``server.key``), and pings every few seconds so
the server knows it is present. When the server invites its owners to a session, the agent writes
the session's scenario and a key folder (each owner's own secret key, the session curator's public
key) and starts ``marketplace owners`` for the invited owners. Those owners read their own files
(``--data``; checked against the marketplace's schema when the agent starts), or in a simulated
marketplace build their share from the scenario, charge their lifetime ledgers (kept in ``--ledgers``, by default the
keys folder, one
``<owner>.ledger.sqlite`` each) before anything leaves, take part, and write their reports; the
agent sends each owner's report back on that owner's own connection, and waits for the next
session. It leaves when the server says it stops (after the session it is in), or on SIGTERM.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import zmq

from marketplace.data.own_files import ReadLimits
from marketplace.parties import owner_number
from marketplace.runner.command_line import party_command
from marketplace.runner.party_reports import read_reports
from marketplace.service import control
from marketplace.service.keys import SERVER, load_pair, load_public, write_public

log = logging.getLogger("marketplace.agent")

PING_S = 2.0
POLL_MS = 200
SESSION_LIMIT_S = 4 * 3600.0
"""The longest one session's owners may run before the agent stops them."""


class OwnerAgent:
    """The agent (module docstring): ``run()`` serves until the server stops or :meth:`stop`.

    ``data`` maps each hosted owner to its own file (:func:`marketplace.data.own_files.parse_data_files`).
    With ``market`` (the marketplace's file, public: its data schema) every file is read and checked
    against the schema here, before anything connects: bad data refuses the agent, and nothing is sent.
    """

    def __init__(
        self,
        market: str,
        keys: Path,
        owners: list[str],
        *,
        work: Path,
        ledgers: Path | None = None,
        data: dict[str, Path] | None = None,
        exit_with: int | None = None,
        market_file: Path | None = None,
        limits: ReadLimits | None = None,
    ) -> None:
        # absolute: the owners' processes run in their session's folder, and read these paths from there
        self.market, self.keys, self.owners = market, Path(keys).resolve(), owners
        given = {owner: Path(path) for owner, path in (data or {}).items()}
        self.limits = limits or ReadLimits()
        for owner, path in given.items():
            if not path.is_file():
                raise ValueError(f"--data: {owner}: {path}: no such file")
        if given and market_file is not None:
            check_own_files(market_file, given, self.limits)
        self.data = {owner: path.resolve() for owner, path in given.items()}
        self.work = Path(work).resolve()
        self.exit_with = exit_with
        self.ledgers = Path(ledgers).resolve() if ledgers is not None else self.keys
        self._stop = threading.Event()
        self.sessions_done = 0

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        server = load_public(self.keys / f"{SERVER}.key")
        ctx = zmq.Context()
        socks: dict[str, zmq.Socket] = {}
        poller = zmq.Poller()
        for owner in self.owners:
            public, secret = load_pair(self.keys / f"{owner}.key_secret")
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.LINGER, 2000)
            sock.setsockopt(zmq.MAXMSGSIZE, control.MAX_FRAME)
            sock.curve_secretkey, sock.curve_publickey, sock.curve_serverkey = secret, public, server
            sock.connect(self.market)
            sock.send(control.encode(control.OwnerJoin(party=owner)))
            socks[owner] = sock
            poller.register(sock, zmq.POLLIN)
        self.work.mkdir(parents=True, exist_ok=True, mode=0o700)
        log.info("agent of %d owners connected to %s", len(self.owners), self.market)
        child: tuple[str, subprocess.Popen, list[str], float] | None = None
        invites: dict[str, control.SessionInvite] = {}
        invited_at = 0.0
        stopping = False
        last_ping = 0.0
        try:
            while True:
                now = time.monotonic()
                if now - last_ping >= PING_S:
                    for sock in socks.values():
                        sock.send(control.encode(control.Ping()), zmq.NOBLOCK)
                    last_ping = now
                for sock, _ in poller.poll(POLL_MS):
                    owner = next(o for o, s in socks.items() if s is sock)
                    while True:
                        try:
                            frame = sock.recv(zmq.NOBLOCK)
                        except zmq.Again:
                            break
                        try:
                            message = control.decode(frame)
                        except control.ControlError as err:
                            log.warning("%s: %s", owner, err)
                            continue
                        if isinstance(message, control.SessionInvite):
                            if not invites:
                                invited_at = time.monotonic()
                            invites[owner] = message
                        elif isinstance(message, control.Stop):
                            stopping = True
                if (
                    child is None
                    and invites
                    and (len(invites) == len(self.owners) or time.monotonic() - invited_at > 1.0)
                ):
                    child = self._start(invites)
                    invites = {}
                if child is not None:
                    session, proc, ids, started = child
                    if proc.poll() is None and time.monotonic() - started > SESSION_LIMIT_S:
                        proc.kill()
                    if proc.poll() is not None:
                        self._send_reports(session, ids, socks)
                        self.sessions_done += 1
                        child = None
                if child is None and (stopping or self._stop.is_set() or not self._parent_alive()):
                    return 0
        finally:
            if child is not None and child[1].poll() is None:
                child[1].terminate()
                try:
                    child[1].wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child[1].kill()
            for sock in socks.values():
                sock.close()
            ctx.term()

    def _parent_alive(self) -> bool:
        """False once the process this agent was told to exit with (the ``serve`` that started it) is gone."""
        if self.exit_with is None:
            return True
        try:
            os.kill(self.exit_with, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _start(self, invites: dict[str, control.SessionInvite]) -> tuple[str, subprocess.Popen, list[str], float]:
        first = next(iter(invites.values()))
        session = first.session
        ids = sorted((o for o, m in invites.items() if m.session == session), key=lambda o: int(o.rsplit("-", 1)[1]))
        folder = self.work / "sessions" / session
        keys = folder / "keys"
        keys.mkdir(parents=True, exist_ok=True, mode=0o700)
        (folder / "scenario.yaml").write_text(first.scenario)
        for owner in ids:
            shutil.copyfile(self.keys / f"{owner}.key_secret", keys / f"{owner}.key_secret")
            (keys / f"{owner}.key_secret").chmod(0o600)
        write_public(keys / "curator.key", first.curator_key)
        self.ledgers.mkdir(parents=True, exist_ok=True, mode=0o700)
        log_file = open(folder / "owners.log", "w")  # noqa: SIM115 - the child writes it
        own = {owner: self.data[owner] for owner in ids if owner in self.data}
        # each owner's own rows, read by the owners themselves within the same limits
        command = party_command(
            "owners",
            scenario=folder / "scenario.yaml",
            endpoint=first.endpoint,
            keys=keys,
            run_id=session,
            sets=[f"lifetime.ledgers={self.ledgers.resolve()}"],
            ids=",".join(ids),
            report_dir=folder / "parties",
            data=",".join(f"{owner}={path}" for owner, path in own.items()) if own else None,
            extra=self.limits.arguments() if own else (),
        )
        proc = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, cwd=folder)
        log_file.close()
        log.info("session %s: %d owners joining", session, len(ids))
        return session, proc, ids, time.monotonic()

    def _send_reports(self, session: str, ids: list[str], socks: dict[str, zmq.Socket]) -> None:
        import json

        found: dict[str, dict] = {}
        for path in sorted((self.work / "sessions" / session / "parties").glob("*.json")):
            try:
                for report in read_reports(path):
                    found[str(report.get("id"))] = report
            except (OSError, ValueError) as err:
                log.warning("session %s: %s: %s", session, path, err)
        for owner in ids:
            report = found.get(owner)
            if report is not None:
                socks[owner].send(
                    control.encode(
                        control.PartyReport(session=session, party=owner, report=json.dumps(report).encode())
                    )
                )


def check_own_files(market_file: Path, files: dict[str, Path], limits: ReadLimits) -> None:
    """Read each owner's file and check it against the marketplace's data schema (``market_file``);
    ValueError naming the owner, the file, the line and the column of the first problem."""
    from marketplace.parties import own_rows
    from marketplace.scenario import ScenarioError
    from marketplace.scenario.load import load_scenario

    try:
        config = load_scenario(market_file).config
    except ScenarioError as err:
        raise ValueError(f"the marketplace's file: {err}") from None
    for owner, path in files.items():
        if owner_number(owner, config.parties.owners) is None:
            raise ValueError(
                f"--data: {owner} is not an owner of this marketplace (owner-1 ... owner-{config.parties.owners})"
            )
        rows = own_rows(config, owner, data=path, limits=limits)["owner"]
        log.info("%s: %d rows of its own in %s, checked against the marketplace's schema", owner, len(rows), path)


def serve_agent(
    market: str,
    keys: Path,
    owners: list[str],
    *,
    work: Path,
    ledgers: Path | None = None,
    data: dict[str, Path] | None = None,
    exit_with: int | None = None,
    market_file: Path | None = None,
    limits: ReadLimits | None = None,
) -> int:
    """Run an agent in this process until the server stops it, SIGTERM/SIGINT arrives, or the
    process ``exit_with`` is gone."""
    agent = OwnerAgent(
        market,
        keys,
        owners,
        work=work,
        ledgers=ledgers,
        data=data,
        exit_with=exit_with,
        market_file=market_file,
        limits=limits,
    )
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop())
    return agent.run()
