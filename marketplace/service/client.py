"""``marketplace request``: a consumer's request to a marketplace that stays open.

The consumer connects to the server's control endpoint with its own CURVE key (its kit: its
``<name>.key_secret`` and the server's ``server.key``), sends its request (a scenario) and waits in
the queue. When its session starts it runs the session's consumer in this process, over the same
connection (the session's frames travel inside control frames tagged with its id; the server passes
them only between this consumer and its session's curator), and sends the server what it needs of
its party report (:func:`~marketplace.runtime.publication.consumer_handover`: how its part ended, not
the figures it computed from its own rows). The server assembles and archives the run report from
that and sends it back with the parties' reports; the consumer assembles its own copy again with its
whole report (:func:`~marketplace.service.session_run.assemble_session`), and writes it and its whole
party report to its output folder (``report.json``, ``parties/consumer.json``). A key
the marketplace does not know is refused at the handshake, and the request ends at once saying so.

The connection runs ZeroMQ heartbeats, so a marketplace that crashes or stops is noticed within
seconds (:class:`RequestFailed`, saying whether the session had started: only then may owners have
been charged for it), and the server notices a consumer that has gone the same way: its waiting
requests are dropped before any owner is invited.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

from marketplace.api import RunFailed
from marketplace.data.own_files import ReadLimits
from marketplace.service import control
from marketplace.service.keys import SERVER, find_own_key, load_pair, load_public
from marketplace.service.worlds import WorldCache
from marketplace.transport.context import new_context

POLL_MS = 50
CONNECT_S = 30.0
"""A marketplace not reached within this long (no handshake) is not there: the request fails."""
_WORLDS = WorldCache(size=2)
"""Worlds of simulated marketplaces this process asked (a script that sends many requests builds each once)."""
FAILED_HANDSHAKE = (
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL,
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL,
    zmq.EVENT_HANDSHAKE_FAILED_AUTH,
)


class RequestRefused(RuntimeError):
    """The marketplace refused the request (or the consumer's key); nothing ran, nothing was charged."""


class RequestFailed(RunFailed):
    """The request could not be completed (the marketplace vanished, a deadline passed): a
    :class:`~marketplace.api.RunFailed` with no report (``report`` is None), so that ``except
    marketplace.RunFailed`` catches every request that did not complete. ``str(err)`` says why and
    whether the session had started (only then may owners have been charged)."""

    def __init__(self, message: str) -> None:
        self.report = None
        RuntimeError.__init__(self, message)


@dataclass
class RequestResult:
    """A finished request: its session id, the run report (a dict) and where it was written."""

    session: str
    report: dict[str, Any]
    folder: Path
    resumed: bool = False
    """Whether this is a session fetched again (``resume``), not one run for this call."""


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
    scenario_text: str | None,
    *,
    market: str,
    keys: Path,
    out: Path,
    wait_s: float = 3600.0,
    on_event: Callable[[str], None] | None = None,
    own: OwnTarget | None = None,
    market_file: Path | None = None,
    resume: str | None = None,
    references: bool = False,
    plots: bool = True,
) -> RequestResult:
    """Send one request and see it through (module docstring). ``on_event`` is told each step
    ("queued: 1 ahead", "session s0003-...: running the consumer", ...). ``own`` is the consumer's
    own target (and test set) for a marketplace described by its public schema; with
    ``market_file`` (the marketplace's file, default ``market.yaml`` in the kit when there) the files
    are checked against the schema before the request is sent.

    ``resume`` (a session id, with ``scenario_text`` None) asks instead for what an earlier session of
    this consumer released to it (:mod:`marketplace.service.kept`): after a lost connection or a close
    that timed out, the consumer runs its part again on the curator's frames the server kept, and
    assembles the session's report as the session itself would have let it. Nothing runs at the
    owners and nothing is charged. ``references``: ask for the central references of a simulated
    marketplace in the report (the server computes them on everyone's rows; a marketplace served with
    ``--references`` computes them for every request).

    ``plots=False`` leaves ``rounds.png`` out of the output folder, for a caller that shows the
    report first and draws it afterwards (:func:`~marketplace.reporting.history.write_round_plot`)."""
    if (scenario_text is None) == (resume is None):
        raise ValueError("request: give either a scenario to request, or the session to resume (resume=...)")
    own = checked_own(own, Path(keys), market_file, on_event or (lambda text: None))  # before connecting
    with Connection(market, keys) as connection:
        return connection.send(
            scenario_text,
            out=out,
            wait_s=wait_s,
            on_event=on_event,
            own=own,
            own_checked=True,
            market_file=market_file,
            resume=resume,
            references=references,
            plots=plots,
        )


class Connection:
    """A consumer's control connection to the marketplace at ``market`` (its kit ``keys``), kept open
    for any number of requests one after another: one socket, one CURVE handshake (``handshakes``
    counts those this connection made; ZeroMQ makes another only after the marketplace dropped it),
    the simulated worlds and imports of this process built once. :func:`request` opens one for a
    single request; a client that sends many keeps one (:func:`marketplace.service.api.connect`)."""

    def __init__(self, market: str, keys: Path) -> None:
        self.market, self.keys = market, Path(keys)
        self.name, secret_path = find_own_key(self.keys)
        self.ctx = new_context()
        self.sock = self.ctx.socket(zmq.DEALER)
        control.socket_options(self.sock)
        self.sock.setsockopt(zmq.LINGER, 2000)
        public, secret = load_pair(secret_path)
        self.sock.curve_secretkey, self.sock.curve_publickey = secret, public
        self.sock.curve_serverkey = load_public(self.keys / f"{SERVER}.key")
        self.monitor = self.sock.get_monitor_socket(
            zmq.EVENT_HANDSHAKE_SUCCEEDED
            | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
            | zmq.EVENT_HANDSHAKE_FAILED_AUTH
            | zmq.EVENT_DISCONNECTED
        )
        self.link = _Link(self.sock, self.monitor, market, self.name, 0.0)
        self.sent = 0
        """Requests (and resumes) sent on this connection."""
        self.closed = False
        try:
            self.sock.connect(market)
        except zmq.ZMQError:
            self.close()
            raise

    @property
    def handshakes(self) -> int:
        """CURVE handshakes this connection has made so far (1 for a connection that was never dropped)."""
        return self.link.handshakes

    def send(
        self,
        scenario_text: str | None,
        *,
        out: Path,
        wait_s: float = 3600.0,
        on_event: Callable[[str], None] | None = None,
        own: OwnTarget | None = None,
        own_checked: bool = False,
        market_file: Path | None = None,
        resume: str | None = None,
        references: bool = False,
        plots: bool = True,
    ) -> RequestResult:
        """One request (or ``resume``) on this connection, seen through as :func:`request` does
        (``own_checked``: ``own`` was already checked against the schema, :func:`request`)."""
        if self.closed:
            raise ValueError(f"the connection to {self.market} is closed: open another to send a request")
        if (scenario_text is None) == (resume is None):
            raise ValueError("request: give either a scenario to request, or the session to resume (resume=...)")
        say = on_event or (lambda text: None)
        if not own_checked:
            own = checked_own(own, self.keys, market_file, say)
        out = Path(out).resolve()  # the consumer runs in it: every path handed to it must not depend on the cwd
        out.mkdir(parents=True, exist_ok=True)
        self.link.begin(wait_s, resuming=resume is not None)
        first = control.SessionResume(session=resume) if resume is not None else None
        opening = first or control.SessionOpen(scenario=scenario_text or "", references=references)
        self.sock.send(control.encode(opening))
        self.sent += 1
        return _see_through(self.link, self.sock, out, own, say, resume, plots)

    def close(self) -> None:
        """Close the connection (a session still running for it loses its consumer)."""
        if self.closed:
            return
        self.closed = True
        self.sock.disable_monitor()
        self.monitor.close(linger=0)
        self.sock.close(linger=0)
        self.ctx.term()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def checked_own(
    own: OwnTarget | None, keys: Path, market_file: Path | None, say: Callable[[str], None]
) -> OwnTarget | None:
    """The consumer's own files with absolute paths, checked against the marketplace's schema (its
    file, or ``market.yaml`` in the kit) when there is one, before anything is sent: a caller that
    checks before it opens its :class:`Connection` refuses a bad target before the kit's key is read
    or anything connects."""
    if own is None:
        return None
    own = OwnTarget(Path(own.data).resolve(), Path(own.test).resolve() if own.test else None, own.limits)
    market_file = market_file or (keys / "market.yaml" if (keys / "market.yaml").is_file() else None)
    if market_file is not None:
        rows = own.check(Path(market_file))
        say(f"own target: {rows} rows in {own.data}, checked against the marketplace's schema")
    return own


def _see_through(
    link: _Link,
    sock: zmq.Socket,
    out: Path,
    own: OwnTarget | None,
    say: Callable[[str], None],
    resume: str | None,
    plots: bool,
) -> RequestResult:
    """Follow the request (or the resumed session) on the connection until its run report."""
    deadline = time.monotonic() + link.wait_s
    session = resume or ""
    consumer: _Consumer | None = None
    while True:
        message = link.next(deadline, session, consumer)
        if isinstance(message, control.SessionRefused):
            raise RequestRefused(f"the marketplace refused the request: {message.reason}")
        if isinstance(message, control.SessionQueued) and resume is not None:
            say(f"session {session} is still ending: its outputs come when it has ended")
        elif isinstance(message, control.SessionQueued):
            session = message.session
            say(f"queued as session {session}" + (f" ({message.position} ahead)" if message.position else ""))
        elif isinstance(message, control.SessionReady) and consumer is None and resume in (None, message.session):
            session = message.session
            say(f"session {session}: running the consumer" + (" again on what the session released" if resume else ""))
            consumer = _Consumer(message, sock, out, own)
            link.started = True
        elif isinstance(message, control.SessionFrame) and consumer is not None and message.session == session:
            consumer.put(message.frame)
        elif isinstance(message, control.SessionReport) and message.session == session:
            report = json.loads(message.report)
            if consumer is not None:
                consumer.conclude()
                report = consumer.own_copy(report, message.parties, say)
            _write_run_files(report, out, plots)
            return RequestResult(session, report, out, resumed=resume is not None)
        if consumer is not None and consumer.step() and resume is None:
            sock.send(control.encode(control.PartyReport(session=session, party="consumer", report=consumer.report)))
            say(f"session {session}: waiting for the run report")
            consumer.reported = True
            _warm_plotting()  # rounds.png is drawn next, here or by the caller (plots=False)


def _warm_plotting() -> None:
    """Import matplotlib on a background thread while the server assembles the run report (our
    consumer is done: nothing of it imports beside the thread), when runs draw ``rounds.png``."""
    from marketplace.reporting.history import round_plots_wanted
    from marketplace.warm_imports import load_in_background

    if round_plots_wanted():
        load_in_background(("matplotlib.pyplot",))


def _write_run_files(report: dict[str, Any], out: Path, plots: bool = True) -> None:
    """``report.json`` (as the runner writes it), and for a full report ``messages.csv`` and the
    history files (``rounds.png`` only with ``plots``), as in any run folder."""
    from marketplace.runtime import write_json

    if "protocol" not in report:  # not a run report: the session ended before one could be assembled
        write_json(out / "failure.json", report)
        return
    write_json(out / "report.json", report)
    if "messages" in report and "history" in report:
        from marketplace.reporting.history import write_history_files
        from marketplace.runtime import write_messages_csv

        write_messages_csv(report, out / "messages.csv")
        write_history_files(report, out, plot=plots)


class _Link:
    """The consumer's control connection: the next message, the handshake's refusal, the server's
    departure (the connection closed) and the request's own deadline."""

    def __init__(self, sock: zmq.Socket, monitor: zmq.Socket, market: str, name: str, wait_s: float) -> None:
        self.sock, self.monitor, self.market, self.name = sock, monitor, market, name
        self.wait_s = wait_s
        self.poller = zmq.Poller()
        self.poller.register(sock, zmq.POLLIN)
        self.poller.register(monitor, zmq.POLLIN)
        self.failed = 0
        self.connected = False
        self.opened = time.monotonic()
        self.started = False
        """Whether our session started (then owners may have been charged for it)."""
        self.resuming = False
        """Whether we ask again for an earlier session's outputs (nothing runs, nothing is charged)."""
        self.handshakes = 0
        """CURVE handshakes made on this connection so far."""

    def begin(self, wait_s: float, *, resuming: bool) -> None:
        """Ready for the next request on this connection: its wait, whether it resumes, nothing of it
        started yet. What the marketplace sent since the last request (its probes, a finished
        session's late frames) is dropped unread, and what the monitor told since is taken in (a
        connection dropped meanwhile is waited for again, as a new one)."""
        self.wait_s, self.resuming, self.started = wait_s, resuming, False
        while self.monitor.poll(0):
            self._event(recv_monitor_message(self.monitor)["event"], "", idle=True)
        while self.sock.poll(0):
            self.sock.recv()
        if not self.connected:
            self.opened = time.monotonic()

    def next(self, deadline: float, session: str, consumer: _Consumer | None) -> Any:
        """The next control message, or None when the consumer has work due; raises when the key is
        refused, the marketplace is gone or the deadline passes."""
        while time.monotonic() < deadline:
            if not self.connected and time.monotonic() - self.opened > CONNECT_S:
                raise RequestFailed(
                    f"could not reach the marketplace at {self.market} within {CONNECT_S:g} s (is it running? is "
                    "the endpoint right?): nothing was sent, nothing was charged"
                )
            wait = POLL_MS if consumer is None or consumer.reported else 5 if consumer.loop.backlog else 20
            ready = dict(self.poller.poll(wait))
            if self.monitor in ready:
                self._event(recv_monitor_message(self.monitor)["event"], session)
            if self.sock in ready:
                self.connected = True  # the server answered: whatever the monitor has still to tell
                try:
                    return control.decode(self.sock.recv())
                except control.ControlError as err:
                    raise RequestFailed(f"the marketplace sent a frame we could not read: {err}") from None
            if consumer is not None and not consumer.reported:
                return None
        if session:  # the marketplace answered: the request waited in its queue, or ran, for the whole wait
            if self.started:
                state, then = "started but did not finish", "the consumer leaves the session now"
            else:
                state, then = "was queued (the marketplace answered) but did not start", "it leaves the queue now"
            raise RequestFailed(
                f"session {session} {state} within the wait of {self.wait_s:g} s (--wait) at the marketplace at "
                f"{self.market}: {then} (a busy marketplace may need a longer --wait)" + self._charged(session)
            )
        raise RequestFailed(
            f"no answer from the marketplace at {self.market} within the wait of {self.wait_s:g} s (is it "
            "running? is the endpoint right?)" + self._charged(session)
        )

    def _event(self, kind: int, session: str, *, idle: bool = False) -> None:
        """A connection event of the monitor (``zmq.EVENT_*``); ``idle``: it came between requests,
        where a dropped connection only means the next request waits for ZeroMQ to connect again."""
        if kind == zmq.EVENT_DISCONNECTED and idle:
            self.connected = False
        elif kind in FAILED_HANDSHAKE:
            self.failed += 1
            # the server's ZAP handler said no (AUTH), or twice we could not agree on keys: retrying cannot help
            if kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH or self.failed >= 2:
                raise RequestRefused(
                    f"the marketplace at {self.market} refused the key of {self.name!r}: is it an allowed "
                    f"consumer (its public key in the server's keys/consumers/)?"
                )
        elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.failed, self.connected = 0, True
            self.handshakes += 1
        elif kind == zmq.EVENT_DISCONNECTED and self.connected and not session:
            raise RequestFailed(
                f"the marketplace at {self.market} closed the connection before it answered (it stopped or "
                "crashed): the request was not queued, nothing was charged"
            )
        elif kind == zmq.EVENT_DISCONNECTED and self.connected:
            raise RequestFailed(
                f"the marketplace at {self.market} closed the connection (it stopped or crashed)"
                + self._charged(session)
            )

    def _charged(self, session: str) -> str:
        if self.resuming:
            return f": asking again for what session {session} released runs nothing and charges nothing"
        if not session:
            return ": the request was not queued, nothing was charged"
        if not self.started:
            return f": session {session} had not started, no owner was invited, nothing was charged"
        return (
            f": session {session} had started, so its owners may have been charged for it (each owner's "
            f"ledger records the charge under request id {session}: `marketplace ledger show`)"
        )


class _Consumer:
    """This request's consumer: its node, built here from our own rows (or our share of a simulated
    marketplace's world), driven over our control connection."""

    def __init__(self, ready: control.SessionReady, sock: zmq.Socket, out: Path, own: OwnTarget | None) -> None:
        from marketplace import plugins
        from marketplace.roles import CONSUMER, CURATOR
        from marketplace.runtime import host_nodes, link_settings
        from marketplace.scenario import Scenario
        from marketplace.transport.shared_link import SharedLinkLoop
        from marketplace.warm_imports import load_in_background

        (out / "scenario.yaml").write_text(ready.scenario)
        self.scenario = Scenario.from_yaml(ready.scenario, source=f"session {ready.session}")
        self.session = ready.session
        self.started = time.monotonic()
        self.out = out
        own_schema = own is not None and self.scenario.config.data.schema_only
        exchange = plugins.exchange(self.scenario.config.protocol)  # the consumer's side of the session starts
        (node,) = host_nodes(
            self.scenario,
            [CONSUMER],
            run_id=ready.session,
            exchange=exchange,
            world=None if own_schema else _WORLDS.get(self.scenario, exchange),
            data_files={CONSUMER: own.data} if own is not None else None,
            test_file=own.test if own is not None else None,
            limits=own.limits if own is not None else None,
        )
        load_in_background(node.role.warm_imports)  # after the role is built (see marketplace.warm_imports)
        self.loop = SharedLinkLoop(
            node,
            link_settings(self.scenario),
            send=lambda route, frame: sock.send(
                control.encode(control.SessionFrame(session=ready.session, frame=frame)), zmq.NOBLOCK
            ),
            route_of=lambda party: b"",
            connected=[CURATOR],
        )
        self.loop.begin()
        self.report = b""
        """What this consumer hands the server of its report (what the server needs of it)."""
        self.whole: dict[str, Any] | None = None
        """Its whole report, which stays here."""
        self.reported = False

    def put(self, frame: bytes) -> None:
        from marketplace.roles import CURATOR

        self.loop.put(b"", CURATOR, frame)

    def step(self) -> bool:
        """Run the consumer's due work; True once it is done and its report is ready to send."""
        if self.reported or self.whole is not None:
            return False
        self.loop.pump()
        self.loop.tick(time.monotonic())
        if not self.loop.node.done:
            return False
        self._end()
        return True

    def conclude(self) -> None:
        """The run report came before this consumer was done (the server ended the session without
        it, or we fetch an ended session again): take every frame already here, end our part as the
        session ended for us (when the curator's frames stop short of its ``shutdown``, the curator
        counts as lost), and do our local work on what we received."""
        if self.whole is not None:
            return
        from marketplace.roles import CURATOR

        self.loop.pump()
        if not self.loop.node.done:
            self.loop.node.peer_lost(CURATOR, "the session ended before the curator closed our part of it")
        self._end()

    def _end(self) -> None:
        """Our local work and our report (kept whole here; what the server needs of it, to send).
        The local work runs on one BLAS thread, as every party of a run and every owner agent does
        (:func:`~marketplace.runtime.scheduling.single_threaded_blas`): the estimates are then those
        of the same run in process, whatever the machine's cores, and a consumer no longer spends
        most of its CPU in BLAS threads waiting on each other (a sketch fit's dot products over
        20,000 points took 10-20x the CPU on two OpenBLAS threads of a busy 2-core machine). The
        libraries the role loads in the background are in first, so that the limit holds for them."""
        from marketplace.runtime import consumer_handover, party_report, scenario_identity, write_json
        from marketplace.runtime.scheduling import single_threaded_blas
        from marketplace.warm_imports import wait_for_background_imports

        self.loop.close()
        wait_for_background_imports()
        with single_threaded_blas():
            self.loop.node.finish()
        report = party_report(
            self.loop.node,
            role_name="consumer",
            wall_s=time.monotonic() - self.started,
            driver=self.loop.stats.to_dict() | {"shared_links": True},
            identity=scenario_identity(self.scenario),
        )
        write_json(self.out / "parties" / "consumer.json", report)
        self.whole = report
        self.report = json.dumps(consumer_handover(report)).encode()  # what the server needs, no more

    def own_copy(self, report: dict[str, Any], parties: bytes, say: Callable[[str], None]) -> dict[str, Any]:
        """The run report with what this consumer kept to itself: assembled again, as the server
        assembled ``report``, from the parties' reports it sent back (``parties``) with our whole
        report in place of the one we handed over. ``report`` as it is when the server sent no
        parties' reports or assembled no run report (the session failed before), or when ours cannot be
        assembled (``say`` tells why)."""
        from marketplace.roles import CONSUMER
        from marketplace.service.session_run import assemble_session

        if not parties or "protocol" not in report or self.whole is None:
            return report
        try:
            given = json.loads(parties)
            reports = {**given["reports"], CONSUMER: self.whole}
            missing = {p: why for p, why in given["missing"].items() if p != CONSUMER}  # ours is here now
            mine = assemble_session(
                self.scenario,
                reports,
                missing,
                given["failure"],
                _WORLDS,
                references=bool(given.get("references", True)),  # a server that does not say computed them
            )
        except (ValueError, KeyError, TypeError) as err:
            mine = {"failures": [f"{type(err).__name__}: {err}"]}
        if "protocol" not in mine:  # assemble_session says why in the failures of a report it could not make
            say(
                f"session {self.session}: the run report as the server assembled it, without our own figures "
                f"(ours could not be assembled: {'; '.join(map(str, mine.get('failures') or []))})"
            )
            return report
        return mine
