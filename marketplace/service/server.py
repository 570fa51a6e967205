"""``marketplace serve``: a marketplace that stays up, serving one consumer request after another.

The server binds one CURVE-authenticated ROUTER, the **control endpoint**. Its ZAP handler admits
only the keys of the marketplace's owners and allowed consumers (:mod:`.keys`) and names each
connection after its key, so who is speaking comes from the key, never from a message.

* **Owners** connect through owner agents (:mod:`.agent`), which ping every few seconds; an owner
  is *present* while its pings arrive.
* **A consumer** sends :class:`~.control.SessionOpen` with its request. The request is checked at
  once (a request that cannot run on this marketplace is refused, naming the key) and queued; a
  consumer may have :data:`MAX_QUEUED_PER_CONSUMER` requests waiting, and the next session goes to
  the consumer served least so far (earliest first among equals), so one consumer cannot crowd out
  the others.
* **One session at a time.** For the next request the server makes a session folder, a fresh
  CURVE key pair for the session's curator, and a key folder that admits exactly the marketplace's
  owners and *this* consumer's key; it starts ``marketplace curator`` on the session port, invites
  every present owner and tells the consumer where to connect. The run is a run like any other:
  each owner charges its lifetime ledger first, or declines.
* When the curator exits, the server gathers the parties' own reports (owners' through their
  agents, the consumer's from the consumer), assembles the run report and sends it to the consumer
  that asked, and to nobody else. A consumer that vanishes ends only its own session: its curator
  sees it lost, the run fails, and the next request starts.
* **SIGTERM** (or :meth:`MarketServer.stop`) stops the server cleanly: no new request is accepted,
  queued ones are refused with that reason (nothing of theirs ran, nothing was charged), the
  running session finishes, agents are told to stop, and the server exits 0.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
import zmq.auth

from marketplace.messages.errors import cut
from marketplace.runner.command_line import party_command
from marketplace.runner.processes import last_line
from marketplace.runner.run import prepare_world
from marketplace.scenario import Scenario, ScenarioError
from marketplace.service import control
from marketplace.service.keys import SERVER, AllowlistReloader, allowlist, init_keys, load_pair
from marketplace.service.sessions import new_session_id, session_folder, session_scenario
from marketplace.transport.curve import PartyAuthenticator

log = logging.getLogger("marketplace.serve")

MAX_QUEUED_PER_CONSUMER = 8
"""Requests one consumer may have waiting; more are refused, so one consumer cannot fill the queue."""
MAX_QUEUED = 1024
OWNER_ABSENT_S = 10.0
"""An owner whose agent sent nothing for this long is not invited to the next session."""
POLL_MS = 200


class ServeOptionsError(ValueError):
    """Options that cannot serve this marketplace (the owners' data, say): nothing was started."""


@dataclass
class ServeOptions:
    """Where the server keeps its state and listens."""

    state: Path
    endpoint: str = "tcp://127.0.0.1:7700"
    """The control endpoint (``tcp://0.0.0.0:7700`` in a container)."""
    session_port: int | None = None
    """The port each session's curator listens on (sessions run one at a time); default: the
    control port + 1."""
    advertise: str | None = None
    """The host name owners and consumers reach the session curator at; default: the control
    endpoint's host (``127.0.0.1`` for ``0.0.0.0``)."""
    consumers: tuple[str, ...] = ()
    """Consumers to make keys and kits for (``STATE/consumers/<name>/``), when missing."""
    start_owners: bool = True
    """Start owner agents for every owner of the marketplace (else owners connect on their own)."""
    owners_per_process: int | None = None
    collect_s: float = 60.0
    """After a session's curator ends, how long to wait for the parties' reports."""
    owner_data: Path | None = None
    """A folder of ``<owner>.csv`` (or ``.npz``) files, one per owner: the agents ``serve`` starts
    give each owner its own file (a marketplace described by its public schema, on one machine)."""

    def control_host_port(self) -> tuple[str, int]:
        rest = self.endpoint.split("://", 1)[-1]
        host, _, port = rest.rpartition(":")
        return host, int(port)


@dataclass
class Session:
    id: str
    consumer: str
    routing: bytes
    scenario: Scenario
    folder: Path
    curator: subprocess.Popen | None = None
    curator_key: str = ""
    endpoint: str = ""
    state: str = "queued"
    invited: set[str] = field(default_factory=set)
    reports: dict[str, bytes] = field(default_factory=dict)
    deadline: float = 0.0
    started: float = 0.0
    status: str = ""
    text: str = ""
    """The session's scenario as YAML: written to its folder and sent to every party."""


class MarketServer:
    """The server (module docstring). ``run()`` serves until :meth:`stop`; ``endpoint`` is set once bound."""

    def __init__(self, market: Scenario, options: ServeOptions) -> None:
        self.market = market
        self.options = options
        self.state = Path(options.state).resolve()
        self.owners = [f"owner-{i + 1}" for i in range(market.config.parties.owners)]
        self._stop = threading.Event()
        self.ready = threading.Event()
        self.queue: deque[Session] = deque()
        self.current: Session | None = None
        self.present: dict[str, tuple[bytes, float]] = {}
        self.finished: list[dict[str, Any]] = []
        self.agents: list[subprocess.Popen] = []
        self.number = 0
        self.endpoint = ""
        self.failure: str | None = None
        data = market.config.data
        if options.owner_data is not None:
            if not data.schema_only:
                raise ServeOptionsError(
                    "--owner-data gives owners their own files, for a marketplace described by its public "
                    "schema (data.schema); this one simulates its owners' rows from data.source"
                )
            if not Path(options.owner_data).is_dir():
                raise ServeOptionsError(f"--owner-data {options.owner_data}: expected a folder of <owner>.csv files")
        elif data.schema_only and options.start_owners:
            raise ServeOptionsError(
                "this marketplace is described by its public schema (data.schema): its owners bring their "
                "own rows. Give the agents serve starts a folder of <owner>.csv files (--owner-data DIR), "
                "or start none (--no-owners) and run `marketplace agent --data` on each owner's machine"
            )

    # --- life cycle

    def stop(self) -> None:
        """Stop: refuse what is queued, finish the running session, stop the agents (module docstring)."""
        self._stop.set()

    def run(self) -> int:
        """Serve until stopped; returns the exit status (0: stopped cleanly)."""
        init_keys(
            self.state,
            owners=len(self.owners),
            consumers=list(self.options.consumers),
            market_text=self.market.dump_yaml(),
        )
        (self.state / "sessions").mkdir(parents=True, exist_ok=True, mode=0o700)
        ctx = zmq.Context()
        auth = PartyAuthenticator(
            ctx, allowlist(self.state), name="marketplace serve", reload=AllowlistReloader(self.state)
        )  # keys added to (or removed from) STATE/keys/ while serving are admitted (refused) without a restart
        auth.start()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        sock.setsockopt(zmq.MAXMSGSIZE, control.MAX_FRAME)
        public, secret = load_pair(self.state / "keys" / f"{SERVER}.key_secret")
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = secret, public, True
        try:
            sock.bind(self.options.endpoint)
            self.endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
            self._write_status()
            if self.options.start_owners:
                self._start_agents()
            self.ready.set()
            log.info("marketplace serving at %s (state %s)", self.endpoint, self.state)
            log.info("%s", data_banner(self.market))
            self._loop(sock)
        finally:
            for agent in self.agents:
                _end(agent, 30.0)
            sock.close(linger=0)
            auth.stop()
            ctx.term()
            self.ready.set()
            log.info("marketplace stopped after %d sessions", len(self.finished))
        return 0 if self.failure is None else 1

    def _loop(self, sock: zmq.Socket) -> None:
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        told_stop = False
        while True:
            if self._stop.is_set():
                while self.queue:
                    queued = self.queue.popleft()
                    self._send(
                        sock,
                        queued.routing,
                        control.SessionRefused(
                            session=queued.id,
                            reason="the marketplace is stopping: this request was not started, and "
                            "nothing was charged for it",
                        ),
                    )
                if self.current is None:
                    if not told_stop:
                        for routing, _ in self.present.values():
                            self._send(sock, routing, control.Stop(reason="the marketplace is stopping"))
                        told_stop = True
                        stop_by = time.monotonic() + 10.0
                    if not any(a.poll() is None for a in self.agents) or time.monotonic() > stop_by:
                        return
            for _socket, _ in poller.poll(POLL_MS):
                for _ in range(256):
                    try:
                        parts = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    try:
                        self._on_frame(sock, parts)
                    except Exception:  # noqa: BLE001 - one bad frame never stops the marketplace
                        log.exception("a control frame could not be handled; serving on")
            try:
                self._progress(sock)
            except Exception as err:  # noqa: BLE001 - a session that breaks ends as failed; the next one runs
                log.exception("session %s broke", self.current.id if self.current else "-")
                if self.current is not None:
                    self._finish(
                        sock, self.current, failure=f"the session broke on the server: {type(err).__name__}: {err}"
                    )

    # --- messages

    def _on_frame(self, sock: zmq.Socket, parts: list[zmq.Frame]) -> None:
        if len(parts) != 2:
            return
        routing, frame = parts[0].bytes, parts[1]
        who = frame.get("User-Id") or ""
        try:
            message = control.decode(frame.bytes)
        except control.ControlError as err:
            log.warning("%s: %s", who or "?", err)
            if who.startswith("consumer:"):
                self._send(sock, routing, control.SessionRefused(reason=cut(f"refused a control frame: {err}", 1900)))
            return
        if who.startswith("owner-"):
            if who not in self.present:
                log.info("owner %s present", who)
            self.present[who] = (routing, time.monotonic())
            if isinstance(message, control.PartyReport):
                self._on_report(who, message)
            return
        if not who.startswith("consumer:"):
            return
        consumer = who.split(":", 1)[1]
        if isinstance(message, control.SessionOpen):
            self._on_open(sock, routing, consumer, message)
        elif isinstance(message, control.PartyReport):
            self._on_report("consumer", message, consumer=consumer)

    def _on_open(self, sock: zmq.Socket, routing: bytes, consumer: str, message: control.SessionOpen) -> None:
        if self._stop.is_set():
            self._send(sock, routing, control.SessionRefused(reason="the marketplace is stopping; nothing was charged"))
            return
        waiting = sum(1 for q in self.queue if q.consumer == consumer)
        if waiting >= MAX_QUEUED_PER_CONSUMER or len(self.queue) >= MAX_QUEUED:
            self._send(
                sock,
                routing,
                control.SessionRefused(
                    reason=(
                        f"{consumer} already has {waiting} requests waiting (at most {MAX_QUEUED_PER_CONSUMER})"
                        if waiting >= MAX_QUEUED_PER_CONSUMER
                        else f"the queue is full ({MAX_QUEUED} requests)"
                    )
                    + "; nothing was charged: try again later"
                ),
            )
            return
        self.number += 1
        session = new_session_id(self.number)
        try:
            scenario = session_scenario(
                self.market, message.scenario, session=session, consumer=consumer, source=f"{consumer}'s request"
            )
            prepare_world(scenario)  # what needs the data (sizes, shapes) is refused now, not mid-session
        except ScenarioError as err:
            self._send(sock, routing, control.SessionRefused(session=session, reason=cut(str(err), 1900)))
            return
        except (ValueError, OSError) as err:  # the data could not be built for it, say
            self._send(
                sock, routing, control.SessionRefused(session=session, reason=cut(f"{consumer}'s request: {err}", 1900))
            )
            return
        self.queue.append(Session(session, consumer, routing, scenario, self.state / "sessions" / session))
        position = len(self.queue) + (self.current is not None) - 1
        log.info("request of %s queued as %s (%d ahead)", consumer, session, position)
        self._send(sock, routing, control.SessionQueued(session=session, position=position))

    def _on_report(self, party: str, message: control.PartyReport, *, consumer: str | None = None) -> None:
        s = self.current
        if s is None or message.session != s.id or s.state not in ("running", "collecting"):
            return
        if consumer is not None and (consumer != s.consumer or message.party != "consumer"):
            log.warning("%s sent a report for session %s, which is %s's: ignored", consumer, s.id, s.consumer)
            return
        if consumer is None and (message.party != party or party not in s.invited):
            log.warning("%s sent a report as %s for session %s: ignored", party, message.party, s.id)
            return
        try:
            report = json.loads(message.report)
        except ValueError:
            return
        if not isinstance(report, dict) or report.get("id") != message.party or report.get("run_id") != s.id:
            log.warning("%s: a report that is not its own for session %s: ignored", party, s.id)
            return
        s.reports[message.party] = message.report

    # --- sessions

    def _progress(self, sock: zmq.Socket) -> None:
        s = self.current
        if s is None:
            if self.queue:
                self._start(sock, self._next_in_queue())
            return
        if s.state == "starting":
            bound = s.folder / "endpoint"
            if bound.exists() and bound.read_text().strip():
                self._invite(sock, s)
            elif s.curator.poll() is not None:
                self._finish(
                    sock,
                    s,
                    failure=f"the session's curator exited ({s.curator.returncode}) before listening: "
                    f"{last_line(s.folder / 'curator.log', 500) or '(no log, or an empty one)'}",
                )
            return
        if s.state == "running" and s.curator.poll() is not None:
            s.state, s.deadline = "collecting", time.monotonic() + self.options.collect_s
        if s.state == "collecting":
            wanted = {*s.invited} | (set() if _consumer_lost(s) else {"consumer"})
            if wanted <= set(s.reports) or time.monotonic() > s.deadline:
                self._finish(sock, s)

    def _next_in_queue(self) -> Session:
        """The next request to run: the earliest of the consumer with the fewest sessions served so
        far, so a consumer that queues many requests takes turns with the others instead of ahead."""
        served: dict[str, int] = {}
        for done in self.finished:
            served[done["consumer"]] = served.get(done["consumer"], 0) + 1
        chosen = min(range(len(self.queue)), key=lambda i: (served.get(self.queue[i].consumer, 0), i))
        session = self.queue[chosen]
        del self.queue[chosen]
        return session

    def _start(self, sock: zmq.Socket, s: Session) -> None:
        self.current = s
        session_folder(self.state, s.id)
        s.text = s.scenario.dump_yaml()
        (s.folder / "scenario.yaml").write_text(s.text)
        keys = s.folder / "curator-keys"
        keys.mkdir(mode=0o700)
        zmq.auth.create_certificates(str(keys), "curator")
        s.curator_key = zmq.auth.load_certificate(str(keys / "curator.key"))[0].decode()
        for path in (self.state / "keys" / "owners").glob("*.key"):
            shutil.copyfile(path, keys / path.name)
        shutil.copyfile(self.state / "keys" / "consumers" / f"{s.consumer}.key", keys / "consumer.key")
        host, port = self._session_bind()
        (s.folder / "parties").mkdir(mode=0o700)
        log_file = open(s.folder / "curator.log", "w")  # noqa: SIM115 - the child writes it
        s.curator = subprocess.Popen(
            party_command(
                "curator",
                scenario=s.folder / "scenario.yaml",
                endpoint=f"tcp://{host}:{port}",
                endpoint_file=s.folder / "endpoint",
                keys=keys,
                run_id=s.id,
                report=s.folder / "parties" / "curator.json",
            ),
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=s.folder,
        )
        log_file.close()
        s.state, s.started = "starting", time.monotonic()
        log.info("session %s for %s: %s (%s)", s.id, s.consumer, s.scenario.config.name, s.scenario.config.protocol)

    def _session_bind(self) -> tuple[str, int]:
        host, port = self.options.control_host_port()
        return host, self.options.session_port or port + 1

    def _advertised(self) -> str:
        host, _ = self.options.control_host_port()
        host = self.options.advertise or ("127.0.0.1" if host in ("0.0.0.0", "*") else host)
        return f"tcp://{host}:{self._session_bind()[1]}"

    def _invite(self, sock: zmq.Socket, s: Session) -> None:
        s.endpoint = self._advertised()
        text = s.text
        now = time.monotonic()
        for owner, (routing, seen) in sorted(self.present.items()):
            if now - seen <= OWNER_ABSENT_S and self._send(
                sock,
                routing,
                control.SessionInvite(session=s.id, endpoint=s.endpoint, curator_key=s.curator_key, scenario=text),
            ):
                s.invited.add(owner)
        s.state = "running"
        if not self._send(
            sock,
            s.routing,
            control.SessionReady(session=s.id, endpoint=s.endpoint, curator_key=s.curator_key, scenario=text),
        ):
            log.warning("session %s: %s left before its session started", s.id, s.consumer)
        log.info("session %s: %d of %d owners invited", s.id, len(s.invited), len(self.owners))

    def _finish(self, sock: zmq.Socket, s: Session, failure: str | None = None) -> None:
        from marketplace.runner.assemble import assemble_from_party_reports

        if s.curator is not None and s.curator.poll() is None:
            _end(s.curator, 10.0)
        for party, data in s.reports.items():
            (s.folder / "parties" / f"{party}.json").write_bytes(data)
        try:
            report = assemble_from_party_reports(s.scenario, s.folder / "parties", s.folder / "run", driver="market")
            if failure:
                report["status"], report["failures"] = "failed", [failure, *report["failures"]]
            body = json.dumps(report).encode()
        except Exception as err:  # noqa: BLE001 - the consumer is told why; it writes no report.json of this
            report = {"status": "failed", "failures": [failure or f"the report could not be assembled: {err}"]}
            body = json.dumps(report).encode()
        s.status = report["status"]
        self._send(sock, s.routing, control.SessionReport(session=s.id, status=s.status, report=body))
        self.finished.append(
            {
                "session": s.id,
                "consumer": s.consumer,
                "protocol": s.scenario.config.protocol,
                "status": s.status,
                "wall_s": round(time.monotonic() - s.started, 3),
                "owners_invited": len(s.invited),
            }
        )
        log.info("session %s for %s: %s", s.id, s.consumer, s.status)
        self.current = None
        self._write_status()

    # --- helpers

    def _send(self, sock: zmq.Socket, routing: bytes, message: Any) -> bool:
        try:
            sock.send_multipart([routing, control.encode(message)], zmq.NOBLOCK)
            return True
        except zmq.ZMQError:  # the peer is gone (ROUTER_MANDATORY), or not reading
            return False

    def _start_agents(self) -> None:
        per = self.options.owners_per_process or max(1, -(-len(self.owners) // max(1, min(2, os.cpu_count() or 1))))
        for first in range(0, len(self.owners), per):
            ids = self.owners[first : first + per]
            label = f"{ids[0]}..{ids[-1]}" if len(ids) > 1 else ids[0]
            work = self.state / "agents" / label
            work.mkdir(parents=True, exist_ok=True, mode=0o700)
            log_file = open(work / "agent.log", "a")  # noqa: SIM115 - the child writes it
            own = self.options.owner_data is not None
            self.agents.append(
                subprocess.Popen(
                    party_command(
                        "agent",
                        market=self._control_for_agents(),
                        keys=self.state / "owners",
                        ids=",".join(ids),
                        work=work,
                        exit_with=os.getpid(),
                        data=self.options.owner_data,
                        schema=self.state / "market.yaml" if own else None,
                    ),
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                )
            )
            log_file.close()

    def _control_for_agents(self) -> str:
        host, port = self.endpoint.split("://", 1)[1].rsplit(":", 1)
        return f"tcp://{'127.0.0.1' if host in ('0.0.0.0', '*') else host}:{port}"

    def _write_status(self) -> None:
        status = {
            "endpoint": self.endpoint,
            "pid": os.getpid(),
            "owners": len(self.owners),
            "session_endpoint": self._advertised(),
            "sessions": self.finished,
        }
        tmp = self.state / "server.json.tmp"
        tmp.write_text(json.dumps(status, indent=1))
        os.replace(tmp, self.state / "server.json")


def data_banner(market: Scenario) -> str:
    """What ``serve`` says about whose rows its owners hold."""
    data = market.config.data
    if data.schema_only:
        return (
            f"parties bring their own data: the public schema of {data.schema.dim} features and "
            f"{len(data.schema.label.classes)} classes; this server holds no party's rows"
        )
    return (
        f"a simulation: every owner's rows are built from one dataset ({data.source.kind}) and the seed, and "
        f"the server builds them too to check requests and evaluate sessions; describe the data by its public "
        f"schema (data.schema) for owners and consumers that bring their own"
    )


def _consumer_lost(s: Session) -> bool:
    """Whether the session's curator lost its consumer (then no consumer report will come)."""
    try:
        report = json.loads((s.folder / "parties" / "curator.json").read_text())
    except (OSError, ValueError):
        return False
    return "consumer" in str(report.get("failure") or "") and "lost" in str(report.get("failure") or "")


def _end(proc: subprocess.Popen, grace_s: float) -> None:
    """Let a child end within ``grace_s``; then terminate it, then kill it."""
    try:
        proc.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.terminate()
    try:
        proc.wait(timeout=5.0)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
