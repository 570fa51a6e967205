"""``marketplace serve``: a marketplace that stays up, serving many consumers' requests at once.

The server binds one CURVE-authenticated ROUTER, the **control endpoint**. Its ZAP handler admits
only the keys of the marketplace's owners and allowed consumers (:mod:`.keys`) and names each
connection after its key, so who is speaking comes from the key, never from a message.

* **Live links.** Owners connect once, through owner agents (:mod:`.agent`), and stay connected;
  consumers connect with their request. Every session runs over these connections: a session is a
  context (:mod:`.session_run`), not a process. Its curator is a node in this process, the owners'
  nodes live in their agents and the consumer's in its client, and the session's frames travel on
  the shared connections tagged with its id. The server passes a session's frames only between that
  session's curator and its parties, by the key of the connection they came on.
* **Decisions** (:mod:`.market_policy`). This module is the ZeroMQ loop around a sans-I/O policy
  that makes every decision with the time passed in: which request is refused at once and which
  starts when, when a session's reports are in, when to probe, how a stop ends. What is not the
  loop has its own module: sending on the control socket (:mod:`.outbox`), the sessions' records and
  what an ended session leaves (:mod:`.session_book`), ``server.json`` (:mod:`.status`), and the
  options refused before serving (:mod:`.preflight`).
* **Admission by capacity** (:mod:`.admission`, :mod:`.market_policy`). A request is checked at once
  (a request that cannot run on this marketplace is refused, naming the key) and queued; up to
  ``max_sessions`` sessions run at once, admitted in the order of the marketplace's scheduling rule
  (``fcfs`` or ``dpf``), and only while the sessions already running keep up with their deadlines. Each
  session has its own run id, its own noise keys (every party draws a fresh one), its own request id
  on every owner's ledger and its own report, sent to the consumer that asked and to nobody else.
* **Liveness both ways.** Every control connection runs ZeroMQ's heartbeats, so a party whose
  process stops or dies loses its connection within seconds. The server probes the connections it
  serves every second: an owner whose connection is gone is lost in every session it was in (the run
  goes on without it); a consumer whose connection is gone has its waiting requests dropped before
  any owner is invited (nothing was charged for them) and its running session lost. The probe of an
  owner's connection names the sessions the server still holds that owner in: once the owner is lost
  in one (a blip or a pause of either process longer than the heartbeat timeout), its agent, back on
  a new connection, ends its part of it and settles the owner's reservation (:mod:`.held`).
* **Its own faults.** The state folder is locked (a second ``serve`` on it is refused, naming the
  first one's pid); a request whose files cannot be written (a full disk) is refused before any
  owner is invited; an agent ``serve`` started that dies is started again.
* **SIGTERM** (or :meth:`MarketServer.stop`) stops the server cleanly: no new request is accepted,
  queued ones are refused with that reason (nothing of theirs ran, nothing was charged), the running
  sessions finish, agents are told to stop, and the server exits 0.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import zmq

from marketplace.messages.errors import cut
from marketplace.roles import CONSUMER
from marketplace.runtime.scheduling import single_threaded_blas
from marketplace.scenario import Scenario
from marketplace.service import control
from marketplace.service.admission import Admission, budgets_of
from marketplace.service.answers import answer
from marketplace.service.catalogue import MarketView, posted_terms
from marketplace.service.kept import kept_for
from marketplace.service.keys import SERVER, AllowlistReloader, allowlist, init_keys, load_pair
from marketplace.service.market_policy import MarketPolicy
from marketplace.service.options import ServeOptions, ServeOptionsError, data_banner
from marketplace.service.outbox import Outbox
from marketplace.service.preflight import refuse_unservable
from marketplace.service.session_book import SessionBook, as_collecting, as_running, conclude, held_by_owner
from marketplace.service.session_run import (
    Session,
    curator_report,
    ended_early,
    start_curator,
    take_report,
    write_session_files,
)
from marketplace.service.sessions import prepare_request
from marketplace.service.state_lock import StateLock
from marketplace.service.status import KEPT_SESSIONS, StatusFile
from marketplace.service.stop_signals import StopSignals
from marketplace.service.supervisor import AgentSupervisor
from marketplace.service.worlds import ScenarioTexts, SessionScenarios, WorldCache
from marketplace.transport.context import new_context
from marketplace.transport.curve import PartyAuthenticator

log = logging.getLogger("marketplace.serve")

POLL_MS = 100


class MarketServer:
    """The server (module docstring). ``run()`` serves until :meth:`stop`; ``endpoint`` is set once bound."""

    def __init__(self, market: Scenario, options: ServeOptions, *, signals: StopSignals | None = None) -> None:
        self.market = market
        self.signals = signals
        """SIGTERM and SIGINT as they arrive (the command line's): the server stops when one came."""
        self.options = options
        self.state = Path(options.state).resolve()
        self.owners = [f"owner-{i + 1}" for i in range(market.config.parties.owners)]
        self._stop = threading.Event()
        self.ready = threading.Event()
        self.sessions: dict[str, Session] = {}
        """Running and collecting sessions, by id."""
        self.admission = Admission(
            rule=options.rule,
            max_sessions=options.max_sessions,
            budgets=budgets_of(market, self.owners),
            unlock_steps=options.unlock_steps,
        )
        self.policy = MarketPolicy(
            admission=self.admission,
            owners=len(self.owners),
            start_grace_s=market.config.transport.start_timeout_s,
            started_at=time.monotonic(),
            ramp=options.ramp,
        )
        """Every decision of the loop (:mod:`.market_policy`): admission by capacity, reports, probes, stopping."""
        self.present: dict[str, bytes] = {}
        """Owner -> the routing id of its live control connection."""
        self.posted: dict[str, dict[str, Any]] = {}
        """Owner -> the fields of its sale terms its agent posted (:mod:`.catalogue`)."""
        self.book = SessionBook()
        """The sessions numbered, the most that ran at once, and every ended one (:mod:`.session_book`)."""
        self.agents = AgentSupervisor(self.state, owner_data=options.owner_data)
        self.endpoint = ""
        self.failure: str | None = None
        self.worlds = WorldCache()
        self.parsed = SessionScenarios()
        """Each consumer's distinct requests, parsed and checked once (a later session differs in its id only)."""
        self.texts = ScenarioTexts()
        """The sessions' scenarios as sent to their parties, each distinct one written once."""
        self.lock: StateLock | None = None
        self._out: Outbox | None = None
        self.started_at = time.monotonic()
        self.status_file = StatusFile(self.state)
        refuse_unservable(market, options, len(self.owners))

    @property
    def finished(self) -> list[dict[str, Any]]:
        """Every session that ended so far, oldest first (:class:`~.session_book.SessionBook`)."""
        return self.book.finished

    # --- life cycle

    def stop(self) -> None:
        """Stop: refuse what is queued, finish the running sessions, stop the agents (module docstring)."""
        self._stop.set()

    def stopping(self) -> bool:
        """Whether the server stops: :meth:`stop` was called, or a stopping signal came (read here,
        in the server's thread, never in a signal handler)."""
        if self.signals is not None and self.signals.requested() and not self._stop.is_set():
            log.info("signal %s: stopping", self.signals.received)
            self._stop.set()
        if self._stop.is_set():
            self.policy.stop()
        return self._stop.is_set()

    def run(self) -> int:
        """Serve until stopped; returns the exit status (0: stopped cleanly)."""
        self.state.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.lock = StateLock(self.state)
        try:
            self.lock.acquire()
        except OSError as err:
            raise ServeOptionsError(str(err)) from None
        try:
            with single_threaded_blas():  # as every party process: the sessions are the parallelism
                return self._run_locked()
        finally:
            self.lock.release()

    def _run_locked(self) -> int:
        init_keys(
            self.state,
            owners=len(self.owners),
            consumers=list(self.options.consumers),
            market_text=self.market.dump_yaml(),
        )
        (self.state / "sessions").mkdir(parents=True, exist_ok=True, mode=0o700)
        ctx = new_context()
        auth = PartyAuthenticator(
            ctx, allowlist(self.state), name="marketplace serve", reload=AllowlistReloader(self.state)
        )  # keys added to (or removed from) STATE/keys/ while serving are admitted (refused) without a restart
        auth.start()
        sock = ctx.socket(zmq.ROUTER)
        control.socket_options(sock)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        public, secret = load_pair(self.state / "keys" / f"{SERVER}.key_secret")
        sock.curve_secretkey, sock.curve_publickey, sock.curve_server = secret, public, True
        self._out = Outbox(sock)
        try:
            sock.bind(self.options.endpoint)
            self.endpoint = sock.getsockopt(zmq.LAST_ENDPOINT).decode()
            self.started_at = self.policy.started_at = time.monotonic()
            self.status_file.write(self._status())  # before ready: the endpoint is read from it
            if self.options.start_owners:
                self.agents.start(self.owners, self._control_for_agents(), self.options.owners_per_process)
            self.ready.set()
            log.info(
                "marketplace serving at %s (state %s): up to %d sessions at once, rule %s",
                self.endpoint,
                self.state,
                self.options.max_sessions,
                self.options.rule,
            )
            log.info("%s", data_banner(self.market))
            self._loop(sock)
            if self.status_file.due:  # what changed in the last turn
                self.status_file.write(self._status())
        finally:
            self.agents.end_all(30.0)
            sock.close(linger=0)
            auth.stop()
            ctx.term()
            self.ready.set()
            log.info("marketplace stopped after %d sessions", len(self.finished))
        return 0 if self.failure is None else 1

    def _loop(self, sock: zmq.Socket) -> None:
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        if self.signals is not None:
            poller.register(self.signals.fileno(), zmq.POLLIN)  # a signal wakes the loop at once
        while True:
            if self.stopping():
                for queued in self.policy.queued_to_refuse():
                    self.out.send(
                        queued.routing,
                        control.SessionRefused(
                            session=queued.id,
                            reason="the marketplace is stopping: this request was not started, and "
                            "nothing was charged for it",
                        ),
                    )
            step = self.policy.stop_step(time.monotonic(), len(self.sessions), self.agents.alive())
            if step == "tell_agents":
                log.info("stopping: the agents of the %d owners connected were told to stop", len(self.present))
                for routing in self.present.values():
                    self.out.send(routing, control.Stop(reason="the marketplace is stopping"))
            elif step == "exit":
                return
            touched: set[str] = set()
            empty = True  # the socket was read until nothing waited
            if sock in dict(poller.poll(self._wait_ms())):
                for _ in range(1024):
                    try:
                        parts = sock.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    try:
                        self._on_frame(parts, touched)
                    except Exception:  # noqa: BLE001 - one bad frame never stops the marketplace
                        log.exception("a control frame could not be handled; serving on")
                else:
                    empty = False
            for session_id in touched:
                s = self.sessions.get(session_id)
                if s is not None and s.loop is not None and s.state == "running":
                    self._guarded(s, s.loop.pump)
            if empty:
                self._drained(time.monotonic())
            self._progress()
            self.status_file.flush(self._status, time.monotonic())  # once a turn at most (:mod:`.status`)

    def _drained(self, now: float) -> None:
        """The shared socket was read until empty and every session's inbox handed to its curator:
        nothing any party sent before ``now`` is unread, for every running session, so a session
        whose owner's connection closed loses that owner now rather than at the heartbeat timeout
        (the ZeroMQ driver marks its socket drained the same way)."""
        for s in self.sessions.values():
            if s.loop is not None and s.state == "running" and not s.loop.inbox:
                s.loop.link.drained(now)

    def _wait_ms(self) -> int:
        if any(s.loop is not None and s.loop.backlog for s in self.sessions.values()):
            return 5
        return POLL_MS

    def _guarded(self, s: Session, step: Any) -> None:
        try:
            step()
        except Exception as err:  # noqa: BLE001 - a session that breaks ends as failed; the others go on
            log.exception("session %s broke", s.id)
            self._finish(s, failure=f"the session broke on the server: {type(err).__name__}: {err}")

    # --- messages

    def _on_frame(self, parts: list[zmq.Frame], touched: set[str]) -> None:
        if len(parts) != 2:
            return
        routing, frame = parts[0].bytes, parts[1]
        user = frame.get("User-Id")  # int | str in pyzmq's stub: the ZAP handler sets a str
        who = user if isinstance(user, str) else ""
        try:
            message = control.decode(frame.bytes)
        except control.ControlError as err:
            log.warning("%s: %s", who or "?", err)
            if who.startswith("consumer:"):
                self.out.send(routing, control.SessionRefused(reason=cut(f"refused a control frame: {err}", 1900)))
            return
        if who.startswith("owner-"):
            self._on_owner(routing, who, message, touched)
        elif who.startswith("consumer:"):
            self._on_consumer(routing, who.split(":", 1)[1], message, touched)

    def _on_owner(self, routing: bytes, who: str, message: Any, touched: set[str]) -> None:
        """A control message from owner ``who`` (its key), on connection ``routing``."""
        if self.present.get(who) != routing:
            log.info("owner %s present", who)
            self.present[who] = routing
            self.status_file.changed()
            if self.policy.agents_told:  # the agents were told to stop before this one came
                self.out.send(routing, control.Stop(reason="the marketplace is stopping"))
        if isinstance(message, control.SessionFrame):
            s = self.sessions.get(message.session)
            if s is not None and s.loop is not None and who in s.invited:
                s.loop.put(routing, who, message.frame)
                touched.add(s.id)
        elif isinstance(message, control.OwnerTerms):
            self.posted[who] = posted_terms(message)
        elif isinstance(message, control.PartyReport):
            self._on_report(who, message)
        elif isinstance(message, control.SessionDeclined):
            s = self.sessions.get(message.session)
            if s is not None and s.loop is not None and who in s.invited and s.state in ("running", "collecting"):
                s.declined[who] = message.reason  # no report of its part will come (market_policy)
                if s.state == "running":
                    s.loop.lose_now(who, f"its agent could not take part: {message.reason}")

    def _on_consumer(self, routing: bytes, consumer: str, message: Any, touched: set[str]) -> None:
        """A control message from consumer ``consumer`` (its key), on connection ``routing``."""
        if isinstance(message, control.SessionFrame):
            s = self.sessions.get(message.session)
            if s is not None and s.loop is not None and s.consumer == consumer:
                s.loop.put(routing, CONSUMER, message.frame)
                touched.add(s.id)
        elif isinstance(message, control.SessionOpen):
            self._on_open(routing, consumer, message)
        elif isinstance(message, control.SessionResume):
            self._on_resume(routing, consumer, message.session)
        elif isinstance(message, control.PartyReport):
            self._on_report(f"consumer:{consumer}", message, consumer=consumer)
        elif isinstance(message, control.CatalogueAsk | control.QuoteAsk):  # nothing queued, nothing charged
            view = MarketView(
                self.market, self.owners, frozenset(self.present), self.posted, self.admission.spent, self.options.rule
            )
            self.out.send(routing, answer(view, message, consumer, self.worlds.get))

    def _on_open(self, routing: bytes, consumer: str, message: control.SessionOpen) -> None:
        """A new request of ``consumer``: refused at once (:meth:`.market_policy.MarketPolicy.refusal`), or
        checked and queued."""
        self.stopping()  # a stop asked since the loop last looked refuses this request too
        why = self.policy.refusal(consumer)
        if why is not None:
            self.out.send(routing, control.SessionRefused(reason=why))
            return
        session = self.book.new_id()
        prepared = prepare_request(
            self.market, message.scenario, session, consumer, self.owners, self.worlds.get, self.parsed
        )
        if isinstance(prepared, str):
            self.out.send(routing, control.SessionRefused(session=session, reason=prepared))
            return
        scenario, charges = prepared
        s = Session(session, consumer, routing, scenario, self.state / "sessions" / session)
        s.references = self.options.references or message.references
        ahead = self.admission.add(session, consumer, charges, s) + len(self.sessions)
        log.info("request of %s queued as %s (%d ahead)", consumer, session, ahead)
        self.out.send(routing, control.SessionQueued(session=session, position=ahead))
        self.status_file.changed()

    def _on_resume(self, routing: bytes, consumer: str, session: str) -> None:
        """``consumer`` asks again for what session ``session`` released to it (:mod:`.kept`): a
        session still running or collecting answers when it ends; an ended one at once, from its
        folder."""
        s = self.sessions.get(session)
        if s is not None and s.consumer == consumer:
            s.resumers.append(routing)
            self.out.send(routing, control.SessionQueued(session=session, position=0))
            return
        kept = kept_for(self.state, session, consumer)
        if kept is None:
            self.out.send(
                routing,
                control.SessionRefused(
                    session=session,
                    reason=cut(f"no session {session!r} of {consumer} is kept by this marketplace", 1900),
                ),
            )
            return
        log.info("session %s: its outputs sent again to %s (%d frames)", session, consumer, len(kept.frames))
        self.out.send_kept(routing, kept)

    def _on_report(self, sender: str, message: control.PartyReport, *, consumer: str | None = None) -> None:
        s = self.sessions.get(message.session)
        if s is None:
            return
        why = take_report(s, sender, message.party, message.report, consumer=consumer)
        if why is not None:
            log.warning("%s: ignored", why)
            return
        if consumer is None and s.state == "running" and s.loop is not None:
            self._guarded(s, s.loop.pump)  # what the owner sent before its report (its bye) is read first
            lose = ended_early(s, sender)
            if lose is not None:
                s.loop.lose_now(sender, lose)

    # --- sessions

    def _progress(self) -> None:
        now = time.monotonic()
        if self.policy.probe_due(now):
            self._probe()
            if not self.stopping():
                self.agents.supervise(self.stopping)
        for s in list(self.sessions.values()):
            if s.state == "running" and s.loop is not None:
                self._guarded(s, lambda s=s: s.loop.tick(time.monotonic()))
                if s.state == "running" and s.loop.node.done:
                    self._guarded(s, lambda s=s: self._curator_done(s))
            if s.state == "collecting" and self.policy.session_ends(as_collecting(s), self.present, time.monotonic()):
                self._finish(s)
        for item, why in self.admission.never_granted:
            self.out.send(item.routing, control.SessionRefused(session=item.id, reason=f"not granted: {why}"))
        self.admission.never_granted.clear()
        while not self.stopping() and self.admission.waiting:  # none waits: no view of the sessions to make
            now = time.monotonic()
            chosen: Session | None = self.policy.next_start(
                as_running(self.sessions.values(), now), len(self.present), now
            )
            if chosen is None:
                break
            self._start(chosen)

    def _curator_done(self, s: Session) -> None:
        s.reports["curator"] = curator_report(s)
        s.state = "collecting"
        s.deadline, s.grace_end = self.policy.collecting(
            s.started, s.scenario.config.transport.run_timeout_s, time.monotonic(), self.options.collect_s
        )

    def _start(self, s: Session) -> None:
        s.text = self.texts.text(s.scenario)
        try:
            write_session_files(s)
        except OSError as err:
            log.error("session %s: its files could not be written: %s", s.id, err)
            self.out.send(
                s.routing,
                control.SessionRefused(
                    session=s.id,
                    reason=cut(
                        f"the marketplace could not write the session's files ({err.strerror or err}): the "
                        "request was not started, no owner was invited, nothing was charged; try again later",
                        1900,
                    ),
                ),
            )
            self._record(s, "refused", failure=f"its files could not be written: {err.strerror or err}")
            return
        s.started = time.monotonic()
        s.state = "running"
        self.sessions[s.id] = s
        self.book.running(len(self.sessions))
        self.status_file.changed()
        present = dict(self.present)
        try:
            s.loop = start_curator(
                s,
                self.worlds,
                send=lambda route, frame: self.out.send_frame(route, s, frame),
                route_of=lambda party: s.routing if party == CONSUMER else self.present.get(party),
            )
        except Exception as err:  # noqa: BLE001 - nothing was sent to any owner yet
            log.exception("session %s: its curator could not start", s.id)
            self._finish(s, failure=f"the session's curator could not start: {type(err).__name__}: {err}")
            return
        invite = control.SessionInvite(session=s.id, scenario=s.text)
        for owner in self.owners:
            routing = present.get(owner)
            if routing is not None and self.out.send(routing, invite) == "sent":
                s.invited.add(owner)
                s.invited_on[owner] = routing
        if self.out.send(s.routing, control.SessionReady(session=s.id, scenario=s.text)) != "sent":
            s.consumer_gone = True
            s.loop.gone(CONSUMER, s.routing)
        for owner in self.owners:
            if owner not in s.invited:
                s.loop.lose_now(owner, "not connected to the marketplace when the session started")
        log.info(
            "session %s for %s: %s (%s), %d of %d owners invited, %d sessions running",
            s.id,
            s.consumer,
            s.scenario.config.name,
            s.scenario.config.protocol,
            len(s.invited),
            len(self.owners),
            len(self.sessions),
        )

    def _finish(self, s: Session, failure: str | None = None) -> None:
        kept, problem = conclude(s, self.worlds, failure)
        self.out.send(
            s.routing,
            control.SessionReport(session=s.id, status=kept.status, report=kept.report, parties=kept.parties),
        )
        for routing in s.resumers:
            self.out.send_kept(routing, kept)
        s.state = "done"
        self.sessions.pop(s.id, None)
        self._record(s, s.status, failure=problem and f"its files could not be written: {problem}")
        log.info("session %s for %s: %s", s.id, s.consumer, s.status)

    def _record(self, s: Session, status: str, failure: str | None = None) -> None:
        self.book.record(s, status, failure)
        self.status_file.changed(ended=True)

    # --- liveness

    def _probe(self) -> None:
        """Probe every owner connection and every consumer with a request: a connection that is gone
        answers EHOSTUNREACH (module docstring). What an owner's connection gets names the sessions the
        server still holds that owner in (:class:`~marketplace.service.control.OwnerSessions`): its agent
        ends its part of every other one, so no reservation outlives its session (:mod:`.held`)."""
        held = held_by_owner(self.sessions.values())
        for owner, routing in list(self.present.items()):
            sessions = sorted(held.get(owner, ()))
            probe = control.OwnerSessions(sessions=sessions) if len(sessions) <= control.MAX_HELD else control.Ping()
            if self.out.send(routing, probe) == "unreachable":
                if self.policy.agents_told:  # it left as told (the operator's stop): nothing is lost
                    log.debug("owner %s: its agent has left (told to stop)", owner)
                else:
                    log.warning("owner %s: its connection is gone", owner)
                del self.present[owner]
                self.status_file.changed()
                for s in self.sessions.values():
                    if owner in s.invited and s.loop is not None and s.state == "running":
                        s.loop.gone(owner, routing)
        routings = {w.item.routing for w in self.admission.waiting} | {
            s.routing for s in self.sessions.values() if not s.consumer_gone
        }
        gone = {r for r in routings if self.out.send(r, control.Ping()) == "unreachable"}
        if not gone:
            return
        for dropped in self.admission.remove(lambda w: w.item.routing not in gone):
            log.info(
                "request %s of %s dropped: its consumer has gone (nothing was started or charged)",
                dropped.id,
                dropped.consumer,
            )
            self._record(dropped, "dropped", failure="its consumer left before it started")
        for s in self.sessions.values():
            if s.routing in gone and not s.consumer_gone:
                s.consumer_gone = True
                log.warning("session %s: its consumer %s has gone", s.id, s.consumer)
                if s.loop is not None and s.state == "running":
                    s.loop.gone(CONSUMER, s.routing)

    # --- helpers

    @property
    def out(self) -> Outbox:
        """What the server sends on its control socket, once :meth:`run` has opened it (:mod:`.outbox`)."""
        if self._out is None:
            raise RuntimeError("the marketplace's control socket is not open yet (serve opens it)")
        return self._out

    def _control_for_agents(self) -> str:
        host, port = self.endpoint.split("://", 1)[1].rsplit(":", 1)
        return f"tcp://{'127.0.0.1' if host in ('0.0.0.0', '*') else host}:{port}"

    def _status(self) -> dict[str, Any]:
        """What ``server.json`` says now (:mod:`.status`)."""
        return {
            "endpoint": self.endpoint,
            "pid": os.getpid(),
            "owners": len(self.owners),
            "max_sessions": self.options.max_sessions,
            "rule": self.options.rule,
            "owners_present": len(self.present),
            "running": sorted(self.sessions),
            "queued": [w.session for w in self.admission.waiting],
            "held": self.policy.held,
            "max_running": self.book.max_running,
            "agent_restarts": self.agents.restarts(),
            "sessions": self.finished[-KEPT_SESSIONS:],
            # public figures for the operator's console (marketplace.console): no ledger's, no row's
            "present": sorted(self.present),
            "posted": self.posted,
            "admitted": self.admission.spent,
            "ended": dict(self.book.ended),
        }
