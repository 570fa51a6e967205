"""``marketplace agent``: a long-lived host of data owners that takes part in a marketplace's sessions.

Each served owner has its own control connection to the server, under its own CURVE key (from
``--keys``: ``<owner>.key_secret`` and the server's ``server.key``), kept open for as long as the
agent runs, with ZeroMQ heartbeats so the server knows within seconds when the agent is gone. When
the server invites an owner to a session, the agent builds that owner's node *in this process* (no
process per session) from the session's scenario: from its own file (``--data``; read and checked
against the marketplace's schema when the agent starts, read again only when it changes) or, in a
simulated marketplace, from its own share of the world generated from the scenario (kept between
sessions). The owner charges its lifetime ledger (kept in ``--ledgers``, by default the keys folder,
one ``<owner>.ledger.sqlite`` each, and kept open between sessions: :mod:`marketplace.roles.open_ledgers`)
before anything leaves, and takes part over its connection: the
session's frames travel inside control frames tagged with the session id
(:class:`~marketplace.transport.shared_link.SharedLinkLoop`). An owner may be in many sessions at
once; each has its own node, noise key and request id. When a session ends the agent sends each
owner's report back on that owner's connection: what the owner publishes only
(:mod:`marketplace.runtime.publication`). What it kept to itself stays here: its own report (the
published one, and under ``own`` its row count, its timings, the whole text of its failure) is written
to ``WORK/<session>/<owner>.json`` (``--work``), readable by the agent's user only.

The agent leaves when the server says it stops (after the sessions it is in), on SIGTERM, or when
the process it was told to exit with (the ``serve`` that started it) is gone. When the server falls
silent (a crash) every session it had is lost for its owners, and the agent keeps its connections
open for the server's return. Every second the server names, on each owner's connection, the sessions
it still holds that owner in: a session it no longer names (it lost the owner after a stall of
either side, the session ended, the server started again) is over for the owner here too, and its
reservation settles within seconds (:mod:`.held`).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import signal
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import zmq

from marketplace import plugins
from marketplace.data.own_files import ReadLimits
from marketplace.data.world import World
from marketplace.parties import owner_number, party_ids
from marketplace.plugins import Exchange
from marketplace.privacy.lifetime.terms import SaleTerms
from marketplace.roles import CURATOR, open_ledgers
from marketplace.roles.lifetime import LedgerFault
from marketplace.roles.lifetime import settle as settle_lifetime
from marketplace.roles.party import Party
from marketplace.runtime import (
    OWN,
    host_nodes,
    internal_failure,
    json_text,
    link_settings,
    party_report,
    scenario_identity,
)
from marketplace.runtime.scheduling import single_threaded_blas
from marketplace.scenario import Scenario
from marketplace.service import control
from marketplace.service.declines import declared_reason
from marketplace.service.held import sessions_to_end
from marketplace.service.keys import SERVER, load_pair, load_public
from marketplace.service.options import AgentOptions
from marketplace.service.worlds import OwnRowsCache, SessionScenarios, WorldCache, session_key
from marketplace.transport.context import new_context
from marketplace.transport.shared_link import Send, SharedLinkLoop
from marketplace.transport.tuning import frozen_heap

log = logging.getLogger("marketplace.agent")

PING_S = 2.0
POLL_MS = 100
SERVER_SILENT_S = 15.0
"""A server that sent nothing for this long (it probes every second) is gone: its sessions are lost."""
SESSION_LIMIT_S = 4 * 3600.0
"""The longest one session may run here before its owners fail it."""
SESSION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
"""A session id this agent names a folder after (the server's are ``s0007-1a2b3c4d``): one path
component, never ``..``."""


class OwnerAgent:
    """The agent (module docstring): ``run()`` serves until the server stops or :meth:`stop`.

    ``options.data`` maps each hosted owner to its own file (:func:`marketplace.data.own_files.parse_data_files`).
    Every file is read and checked against the marketplace's file (``options.schema``, or ``market.yaml``
    in the kit; public: its data schema) here, before anything connects: bad data, or data without the
    marketplace's file, refuses the agent, and nothing is sent.
    """

    def __init__(self, options: AgentOptions) -> None:
        self.market, self.keys, self.owners = options.market, Path(options.keys).resolve(), list(options.owners)
        given = {owner: Path(path) for owner, path in (options.data or {}).items()}
        market_file = _market_file(Path(options.keys), options.schema)
        if given and market_file is None:
            raise ValueError(
                "--data needs the marketplace's file to check the rows against: --schema MARKET.yaml "
                "(or market.yaml in the kit)"
            )
        self.terms = options.terms()
        """The fields of the hosted owners' sale terms they set themselves (``price``, ``points``,
        ``points_per_consumer``): each replaces that field of the marketplace's terms for the owner, the
        others stay the marketplace's (:func:`own_terms`)."""
        own_terms(None, self.terms)  # a bad field is refused now, naming it, before anything connects
        self.limits = options.limits
        for owner, path in given.items():
            if not path.is_file():
                raise ValueError(f"--data: {owner}: {path}: no such file")
        if given and market_file is not None:
            check_own_files(market_file, given, self.limits)
        self.data = {owner: path.resolve() for owner, path in given.items()}
        self.work = Path(options.work if options.work is not None else Path(options.keys) / "sessions").resolve()
        self.exit_with = options.exit_with
        self.ledgers = Path(options.ledgers).resolve() if options.ledgers is not None else self.keys
        self._stopping = False
        """Set by :meth:`stop` (from a signal handler too: one assignment, no lock to re-enter)."""
        self.sessions_done = 0
        self.loops: dict[tuple[str, str], tuple[SharedLinkLoop, Scenario, float]] = {}
        """(session, owner) -> the owner's loop in that session, its scenario and when it started."""
        self.scenarios: dict[str, Scenario] = {}
        self.identities: dict[str, dict[str, Any]] = {}
        """Session -> what its owners' reports record about its scenario (:meth:`_identity`)."""
        self.shared: dict[str, tuple[frozenset[str], World | None]] = {}
        """Session -> its party ids and its world (None until an owner needs it), found once for all
        the owners here (:meth:`_shared`): each costs O(owners of the marketplace) to find again."""
        self.parsed = SessionScenarios()
        """Each distinct request's scenario, parsed once: a later session of it differs in its request id only."""
        self.worlds = WorldCache(size=2)
        self.own_rows = OwnRowsCache()
        self.socks: dict[str, zmq.Socket] = {}
        self.heard: dict[str, float] = {}
        self.lists: dict[str, tuple[frozenset[str], float]] = {}
        """Owner -> the sessions the server said it holds the owner in, and when that list came: the
        latest list of each owner not yet looked at (:meth:`_let_go`)."""
        self.to_keep: list[tuple[str, str, dict[str, Any]]] = []
        """(session, owner, its own report) of the owners whose part ended in this turn of the loop,
        written (:meth:`_keep`) once every report of the turn is sent: the server hears of them all
        first, and no owner's report waits for another's file."""
        self.said: dict[tuple[str, str], list[str]] = {}
        """(session, what happened) -> the owners it happened to in this turn of the loop: logged as one
        line per session when the turn ends (:meth:`_say`), not one line per owner."""
        self.unsettled: dict[str, list[Party]] = {}
        """Owner -> the roles of its ended sessions whose reservation its ledger could not settle (a full
        disk): settled again before the owner's next session (:meth:`_settle_again`). Until then each
        counts as spent, and if the agent dies first, the ledger's reconcile settles it."""

    def stop(self) -> None:
        self._stopping = True

    def run(self) -> int:
        ctx = new_context()
        poller, by_socket = self._connect(ctx)
        self.work.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.ledgers.mkdir(parents=True, exist_ok=True, mode=0o700)
        log.info("agent of %d owners connecting to %s", len(self.owners), self.market)
        open_ledgers.keep_open()  # each owner's ledger opened once, not three times a session
        stopping = False
        last_ping = 0.0
        try:
            while True:
                now = time.monotonic()
                if now - last_ping >= PING_S:
                    self._ping()
                    last_ping = now
                touched: set[tuple[str, str]] = set()
                wait = 5 if any(loop.backlog for loop, _, _ in self.loops.values()) else POLL_MS
                for sock, _ in poller.poll(wait):
                    stopping = self._read(sock, by_socket[sock], touched) or stopping
                self._say()  # who joined, logged before their parts run (which may take seconds)
                for key in touched:
                    entry = self.loops.get(key)
                    if entry is not None:
                        self._guarded(key, entry[0].pump, "handling a message")
                self._progress()
                self._after_turn()
                if not self.loops and (stopping or self._stopping or not self._parent_alive()):
                    return 0
                if self._stopping or not self._parent_alive():
                    for key in list(self.loops):
                        self.loops[key][0].node.role.fail("the owner's agent was stopped")
                        self._end(key)
        finally:
            self._after_turn()
            open_ledgers.close_all()
            for sock in self.socks.values():
                sock.close()
            ctx.term()

    def _connect(self, ctx: zmq.Context) -> tuple[zmq.Poller, dict[zmq.Socket, str]]:
        """One CURVE connection to the server per owner, each announcing its owner."""
        server = load_public(self.keys / f"{SERVER}.key")
        poller = zmq.Poller()
        by_socket: dict[zmq.Socket, str] = {}
        for owner in self.owners:
            public, secret = load_pair(self.keys / f"{owner}.key_secret")
            sock = ctx.socket(zmq.DEALER)
            control.socket_options(sock)
            sock.setsockopt(zmq.LINGER, 2000)
            sock.curve_secretkey, sock.curve_publickey, sock.curve_serverkey = secret, public, server
            sock.connect(self.market)
            sock.send(control.encode(control.OwnerJoin(party=owner)))
            sock.send(control.encode(control.owner_terms_message(self.terms)))  # posted for the catalogue
            self.socks[owner] = sock
            by_socket[sock] = owner
            poller.register(sock, zmq.POLLIN)
        return poller, by_socket

    def _ping(self) -> None:
        """Every owner's "still here", and its posted terms again (a server started since has them too;
        a full queue skips one: the connection is busy, not gone)."""
        ping, terms = control.encode(control.Ping()), control.encode(control.owner_terms_message(self.terms))
        for sock in self.socks.values():  # the same two frames for every owner: encoded once
            try:
                sock.send(ping, zmq.NOBLOCK)
                sock.send(terms, zmq.NOBLOCK)
            except zmq.Again:
                pass

    def _read(self, sock: zmq.Socket, owner: str, touched: set[tuple[str, str]]) -> bool:
        """Read what waits on ``owner``'s connection (in a bounded batch); True when the server said stop."""
        stop = False
        for _ in range(1024):
            try:
                frame = sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            if owner not in self.heard:  # the server answered: its handshake admitted the key
                log.info("%s connected to %s", owner, self.market)
            self.heard[owner] = time.monotonic()
            try:
                message = control.decode(frame)
            except control.ControlError as err:
                log.warning("%s: %s", owner, err)
                continue
            if isinstance(message, control.SessionFrame):
                entry = self.loops.get((message.session, owner))
                if entry is not None:
                    entry[0].put(b"", CURATOR, message.frame)
                    touched.add((message.session, owner))
            elif isinstance(message, control.OwnerSessions):
                self.lists[owner] = (frozenset(message.sessions), time.monotonic())
            elif isinstance(message, control.SessionInvite):
                self._join(owner, message)
            elif isinstance(message, control.Stop):
                stop = True
        return stop

    # --- sessions

    def _scenario(self, message: control.SessionInvite) -> Scenario:
        """The session's scenario, with this agent's ledger folder: parsed once per distinct request
        (:class:`~.worlds.SessionScenarios`), and once per session when its text is not the server's."""
        scenario = self.scenarios.get(message.session)
        if scenario is None:
            key = session_key(message.scenario, message.session)
            parse = functools.partial(self._parse, message)
            scenario = parse() if key is None else self.parsed.get(key, message.session, parse)
            self.scenarios[message.session] = scenario
        return scenario

    def _parse(self, message: control.SessionInvite) -> Scenario:
        """The session's scenario parsed from its text, with this agent's ledger folder and its owners' terms."""
        overrides: dict[str, Any] = {"lifetime.ledgers": str(self.ledgers)}
        scenario = Scenario.from_yaml(message.scenario, source=f"session {message.session}")
        if self.terms:  # this agent's owners sell under their own terms, whatever the session says
            lifetime = scenario.config.lifetime
            overrides["lifetime.owner_terms"] = {
                **{owner: terms.sale_terms().to_dict() for owner, terms in lifetime.owner_terms.items()},
                **{owner: own_terms(lifetime.terms_of(owner), self.terms).to_dict() for owner in self.owners},
            }
        return scenario.with_overrides(overrides)

    def _join(self, owner: str, message: control.SessionInvite) -> None:
        key = (message.session, owner)
        if key in self.loops:
            return
        self._settle_again(owner)
        node = None
        try:
            scenario = self._scenario(message)
            own = {}
            if owner in self.data:
                own[owner] = self.own_rows.get(scenario, owner, self.data[owner], self.limits)
            exchange = plugins.exchange(scenario.config.protocol)  # the owner's side of the session starts
            own_schema = owner in self.data and scenario.config.data.schema_only
            parties, world = self._shared(message.session, scenario, exchange, need_world=not own_schema)
            (node,) = host_nodes(
                scenario, [owner], run_id=message.session, exchange=exchange, world=world, own=own, run_parties=parties
            )
            loop = SharedLinkLoop(
                node,
                link_settings(scenario),
                send=_frame_sender(self.socks[owner], message.session),
                route_of=lambda party: b"",
                connected=[CURATOR],
            )
            loop.stats.endpoint = self.market
            loop.begin()
        except Exception as err:  # noqa: BLE001 - this owner cannot take part; the agent serves on
            log.exception("session %s: %s could not take part", message.session, owner)
            if node is not None:  # its reservation is made: settled now (nothing left, unless marked so)
                settle_lifetime(node.party)
            # a ledger's fault names the owner, its ledger file and the error; any other error's details
            # stay in this log
            self._decline(owner, message.session, str(err) if isinstance(err, LedgerFault) else declared_reason(err))
            return
        self.loops[key] = (loop, scenario, time.monotonic())
        self.said.setdefault((message.session, "joined"), []).append(owner)

    def _shared(
        self, session: str, scenario: Scenario, exchange: Exchange, *, need_world: bool
    ) -> tuple[frozenset[str], World | None]:
        """``session``'s party ids and, when ``need_world``, its world (:class:`~.worlds.WorldCache`),
        found for its first owner here and kept for the others until the session ends here."""
        parties, world = self.shared.get(session) or (frozenset(party_ids(scenario.config)), None)
        if need_world and world is None:
            world = self.worlds.get(scenario, exchange)
        self.shared[session] = (parties, world)
        return parties, (world if need_world else None)

    def _decline(self, owner: str, session: str, reason: str) -> None:
        try:
            self.socks[owner].send(
                control.encode(control.SessionDeclined(session=session, reason=reason[:1900])), zmq.NOBLOCK
            )
        except zmq.Again:
            pass

    def _guarded(self, key: tuple[str, str], step: Any, phase: str) -> None:
        """Run ``step`` of one owner's session (``phase``: what it does, for its failure); an error
        fails that owner's session only. The error's text stays in this log and the owner's own report:
        the owner publishes its kind and the phase (:func:`~marketplace.runtime.publication.public_failure`)."""
        try:
            step()
        except Exception as err:  # noqa: BLE001 - one owner's session breaks; the others go on
            log.exception("session %s: %s broke", *key)
            entry = self.loops.get(key)
            if entry is not None:
                entry[0].node.role.fail(internal_failure(err, where="agent", phase=phase))
                self._end(key)

    def _progress(self) -> None:
        now = time.monotonic()
        self._let_go()
        for key, (loop, _, started) in list(self.loops.items()):
            session, owner = key
            if now - self.heard.get(owner, now) > SERVER_SILENT_S and CURATOR not in loop.lost:
                loop.gone(CURATOR, b"")
            if now - started > SESSION_LIMIT_S:
                loop.node.role.fail(f"the session ran longer than {SESSION_LIMIT_S:g} s")
            self._guarded(key, lambda loop=loop: loop.tick(time.monotonic()), "keeping time")
            if key in self.loops and loop.node.done:
                self._end(key)

    def _let_go(self) -> None:
        """End, as lost, every session the server no longer holds its owner in (:mod:`.held`): the
        server will send nothing more of it, and the owner's reservation settles now. Each list is
        looked at once, when it came (one a second): a session within its grace is judged by the next."""
        if not self.lists:
            return
        lists, self.lists = self.lists, {}
        joined: dict[str, dict[str, float]] = {}
        for (session, owner), (_, _, started) in self.loops.items():
            if owner in lists:
                joined.setdefault(owner, {})[session] = started
        for owner, (held, received_at) in lists.items():
            for session in sessions_to_end(joined.get(owner, {}), held, received_at):
                key = (session, owner)
                log.warning("session %s: the marketplace no longer holds %s in it: its part is over", session, owner)
                self._guarded(
                    key,
                    lambda loop=self.loops[key][0]: loop.lose_now(
                        CURATOR,
                        "the marketplace no longer holds this owner in the session "
                        "(it lost the owner, or the session ended there)",
                    ),
                    "ending a session the marketplace left",
                )
                if key in self.loops:
                    self._end(key)

    def _end(self, key: tuple[str, str]) -> None:
        """The owner's part of the session is over: its local work, its reservation settled, its report
        to the server, its own report kept here (:meth:`_keep`). Never raises: whatever breaks here
        breaks this owner's report of this session only."""
        session, owner = key
        loop, scenario, started = self.loops.pop(key)
        party = loop.node.party
        role = party.role
        try:
            loop.close()
        except Exception:  # noqa: BLE001 - its last frames stay unsent; the server loses it as it would anyway
            log.exception("session %s: %s's connection to the session could not be closed", session, owner)
        try:
            loop.node.finish()
        except Exception as err:  # noqa: BLE001 - its report says so
            log.exception("session %s: %s failed in its local work", session, owner)
            role.fail(internal_failure(err, where="agent", phase="finishing"))
        try:
            own = party_report(
                loop.node,
                role_name="owner",
                wall_s=time.monotonic() - started,
                driver=loop.stats.to_dict() | {"shared_links": True},
                identity=self._identity(session, scenario),
                own=True,
            )
        except Exception as err:  # noqa: BLE001 - a report of its failure instead; the agent serves on
            log.exception("session %s: %s's report could not be made", session, owner)
            settle_lifetime(party)  # never raises; a no-op once settled
            role.fail(internal_failure(err, where="agent", phase="reporting"))
            own = {"id": owner, "run_id": session, "role": "owner", "status": "failed", "failure": role.failure}
        admission = party.admission
        if admission is not None and admission.state == "reserved":  # its ledger could not settle it
            self.unsettled.setdefault(owner, []).append(party)
        report = {k: v for k, v in own.items() if k != OWN}  # what it publishes
        try:
            self.socks[owner].send(
                control.encode(control.PartyReport(session=session, party=owner, report=json.dumps(report).encode())),
                zmq.NOBLOCK,
            )
        except zmq.Again:
            log.warning("session %s: %s's report could not be sent (the connection is full)", session, owner)
        self.to_keep.append((session, owner, own))
        if not any(k[0] == session for k in self.loops):
            self.scenarios.pop(session, None)
            self.identities.pop(session, None)
            self.shared.pop(session, None)
            self.sessions_done += 1
        self.said.setdefault((session, f"done ({report['status']})"), []).append(owner)

    def _after_turn(self) -> None:
        """What waits for the end of a turn of the loop: the own reports of the owners whose part ended
        (:attr:`to_keep`), then the log of what happened (:meth:`_say`)."""
        kept, self.to_keep = self.to_keep, []
        for session, owner, own in kept:
            self._keep(session, owner, own)
        self._say()

    def _say(self) -> None:
        """Log what happened to the owners in this turn of the loop: per session, the owners that joined
        it, and those whose part ended, by status (a line per owner costs as much as its ledger's
        transaction, when an agent hosts hundreds)."""
        for (session, what), owners in self.said.items():
            log.info("session %s: %s %s", session, ", ".join(owners), what)
        self.said.clear()

    def _identity(self, session: str, scenario: Scenario) -> dict[str, Any]:
        """What the owners' reports of ``session`` record about its scenario (:func:`scenario_identity`:
        a fingerprint of its configuration), made once per session for all the owners here."""
        identity = self.identities.get(session)
        if identity is None:
            identity = self.identities[session] = scenario_identity(scenario)
        return dict(identity)

    def _settle_again(self, owner: str) -> None:
        """Settle again the reservations ``owner``'s ledger could not settle when their sessions ended
        (the same decision: committed if something of the release left, rolled back if nothing did),
        before its next session reserves on the same ledger. One that still cannot be settled stays
        reserved, counted as spent, for the next try or the ledger's reconcile: never lost, never
        counted twice."""
        parties = self.unsettled.pop(owner, [])
        left = [party for party in parties if (settle_lifetime(party) or {}).get("state") == "reserved"]
        if left:
            self.unsettled[owner] = left
        if len(left) < len(parties):
            settled = len(parties) - len(left)
            log.info("%s: %d reservation(s) its ledger could not settle before are settled now", owner, settled)

    def _keep(self, session: str, owner: str, report: dict[str, Any]) -> None:
        """Write ``owner``'s own report of ``session`` to ``WORK/<session>/<owner>.json``, readable by
        this agent's user only (written whole, never readable by others even for a moment). A disk that
        refuses it costs only this copy: the server has the published report, the log says why."""
        if not SESSION_NAME.fullmatch(session):
            log.warning("session %r: %s's own report not written (not a name for a folder)", session, owner)
            return
        folder = self.work / session
        path = folder / f"{owner}.json"
        tmp = path.with_suffix(".json.tmp")
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                os.fchmod(f.fileno(), 0o600)  # whatever the umask, and a file left from before
                f.write(json_text(report, 1))
            os.replace(tmp, path)
        except (OSError, TypeError, ValueError) as err:  # a full disk; a value JSON cannot hold
            log.error("session %s: %s's own report could not be written to %s: %s", session, owner, path, err)
            tmp.unlink(missing_ok=True)

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


def _frame_sender(sock: zmq.Socket, session: str) -> Send:
    """How a session's loop sends a frame: in a :class:`~.control.SessionFrame` of ``session`` on the
    owner's shared connection ``sock``, without blocking (there is one route, the server)."""

    def send(route: bytes | None, frame: bytes) -> None:
        sock.send(control.encode(control.SessionFrame(session=session, frame=frame)), zmq.NOBLOCK)

    return send


def own_terms(market: SaleTerms | None, given: Mapping[str, Any]) -> SaleTerms:
    """An owner's sale terms when its agent sets the fields ``given`` (``price``, ``points``,
    ``points_per_consumer``, ``price_per_eps``): each given field replaces the marketplace's (``market``, the terms the
    marketplace gives that owner; None: none), every other field stays the marketplace's. So ``--price``
    alone changes the price and keeps the marketplace's limits on points. ValueError names a bad field."""
    try:
        return SaleTerms.from_dict({**(market.to_dict() if market is not None else {}), **given})
    except ValueError as err:  # LedgerInputError names the key
        raise ValueError(f"sale terms (--price, --points, --points-per-consumer, --price-per-eps): {err}") from None


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


def _market_file(keys: Path, schema: Path | None) -> Path | None:
    """The marketplace's file the owners' rows are checked against: ``schema``, else ``market.yaml`` in
    the owners' kit when there, else None."""
    if schema is not None:
        return Path(schema)
    return keys / "market.yaml" if (keys / "market.yaml").is_file() else None


def serve_agent(options: AgentOptions) -> int:
    """Run an agent in this process until the server stops it, SIGTERM/SIGINT arrives, or the
    process ``options.exit_with`` is gone."""
    agent = OwnerAgent(options)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: agent.stop())
    # one BLAS thread, as every party process has: the agent's parallelism is its sessions and the
    # other agents, and a second OpenBLAS thread on busy cores made an owner's sketch 3-4x the CPU;
    # what is built by now (the imported modules, above all) is kept out of the collector's full walks
    with single_threaded_blas(), frozen_heap():
        return agent.run()
