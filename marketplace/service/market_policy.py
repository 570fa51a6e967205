"""A served marketplace's decisions as a pure state machine: when the next waiting request may
start, when a session's reports are all in, when to probe the connections, and how a stop ends.

:class:`~marketplace.service.server.MarketServer` is the ZeroMQ loop around it: it reads and writes
the control socket, runs the sessions' curators, and tells the policy what it sees, with the time it
sees it (:class:`Running` for each session that runs). Nothing here reads a clock, touches a socket or
imports ZeroMQ, so every rule is tested with times given as numbers
(``tests/service/test_market_policy.py``), as the transport's link policy is. The rules:

* **Admission by capacity.** A waiting request starts when the marketplace's scheduling rule grants
  it (:mod:`.admission`: ``fcfs`` or ``dpf``, ``max_sessions``, per-consumer caps) *and* the sessions
  already running show that the machine carries them:

  - none of them is **pressed**: no party it waits for has used more than :data:`PRESSED` of its
    progress deadline (the curator's own waits, :meth:`~marketplace.transport.link_policy.LinkPolicy.pressure`).
    A pressed session is one a further session could push past its deadline, and an owner lost to a
    missed deadline has released (and been charged) for a run that may then deliver nothing;
  - at most :data:`RAMP` of them started within the last :data:`SETTLE_S` seconds: a burst of requests
    is admitted at the pace at which the sessions started show how the machine copes, not all at
    once before any of them has had time to be pressed.

  When no session runs, the next request always starts. While the marketplace starts it first waits
  for its owners to connect (at most ``transport.start_timeout_s``): a session invites only the
  owners present when it starts. A request held back waits in the queue, where nothing is charged;
  :attr:`MarketPolicy.held` says why, for the status file.
* **Reports.** Once a session's curator is done the server waits for the parties' reports: from a
  party still on its connection that the session kept to its end (computing its own local work, not
  dead) until the session's run deadline (``transport.run_timeout_s`` from its start) and at least
  ``collect_s``; from one on its connection that the session lost (it missed a deadline, or its
  part ended in its agent), ``collect_s``; from a party whose connection is gone, or one whose agent
  declined the session (it said it takes no part: it has nothing to report), not at all. So a session
  whose only missing reports are those of declined or gone parties ends as soon as its curator is done.
  The server asks :meth:`MarketPolicy.session_ends` with what it sees of each collecting session
  (:class:`Collecting`): which invited owners are still on the connection they were invited on.
* **Refusals.** A new request is refused at once while the marketplace stops, or when the queue
  (the consumer's or the whole) is full; nothing was charged for it. Once a stop is asked, every
  request still queued is refused (:meth:`MarketPolicy.queued_to_refuse`).
* **Probes.** Every :data:`PROBE_S` the server probes its connections (a gone one answers at once).
* **Stopping.** Once a stop is asked, queued requests are refused, running sessions finish, then the
  agents are told to stop, and the server exits when they have, or :data:`STOP_GRACE_S` later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from marketplace.roles import CONSUMER
from marketplace.service.admission import Admission

PRESSED = 0.5
"""The share of a progress deadline that marks a session as pressed (no new session starts beside it)."""
SETTLE_S = 1.0
"""How long a newly started session counts as unproven (see :data:`RAMP`)."""
RAMP = 2
"""How many unproven sessions may run at once: the pace of admission in a burst (``serve --ramp``;
0 lifts the ramp)."""
PROBE_S = 1.0
"""How often the server probes its connections (owners and consumers that wait)."""
STOP_GRACE_S = 10.0
"""How long a stopping server waits for its agents to leave once told to."""

StopStep = Literal["serve", "finish_sessions", "tell_agents", "wait_for_agents", "exit"]


@dataclass(frozen=True)
class Running:
    """What the policy sees of a session the server holds at a moment: its consumer, when it started,
    whether its curator is done (it collects reports) and how pressed its curator's waits are."""

    session: str
    consumer: str
    started: float
    collecting: bool = False
    pressure: float = 0.0


@dataclass(frozen=True)
class Collecting:
    """What the policy sees of a session whose curator is done, collecting its parties' reports:
    the connection each invited owner was invited on, whether its consumer's connection is gone, the
    parties the session lost, the parties that reported, until when it waits (``deadline`` for the
    parties it kept to the end, ``grace_end`` for those it lost), and the owners whose agents declined
    the session (they built no part of it, so no report of theirs will come)."""

    invited_on: Mapping[str, bytes]
    consumer_gone: bool
    lost: Iterable[str]
    reported: Iterable[str]
    deadline: float
    grace_end: float
    declined: Iterable[str] = ()


@dataclass
class MarketPolicy:
    """The decisions of one server (module docstring). ``owners``: how many the marketplace has;
    ``start_grace_s``: how long it waits for them to connect after ``started_at``."""

    admission: Admission
    owners: int
    start_grace_s: float
    started_at: float
    pressed: float = PRESSED
    settle_s: float = SETTLE_S
    ramp: int = RAMP
    probe_s: float = PROBE_S
    next_probe: float = 0.0
    held: str = ""
    """Why the last admission that could have started a request did not (empty: it was not held)."""
    stop_asked: bool = False
    stop_by: float | None = None
    """Once the agents were told to stop: when the server exits whatever they do."""

    # --- admission ------------------------------------------------------------------------------
    def owners_arriving(self, present: int, now: float) -> bool:
        """Whether requests still wait for owners to connect (module docstring)."""
        return present < self.owners and now - self.started_at < self.start_grace_s

    def capacity(self, running: Sequence[Running], now: float) -> str | None:
        """Why no further session may start beside ``running`` at ``now`` for the machine's sake, or
        None when one may (module docstring)."""
        if not running:
            return None
        pressed = [r for r in running if not r.collecting and r.pressure >= self.pressed]
        if pressed:
            worst = max(pressed, key=lambda r: r.pressure)
            return (
                f"session {worst.session} has used {worst.pressure:.0%} of a progress deadline "
                f"(a new session waits while any has used {self.pressed:.0%})"
            )
        young = [r for r in running if not r.collecting and now - r.started < self.settle_s]
        if self.ramp > 0 and len(young) >= self.ramp:
            return f"{len(young)} sessions started within {self.settle_s:g} s (at most {self.ramp} at once)"
        return None

    def next_start(self, running: Sequence[Running], present: int, now: float) -> Any | None:
        """The request to start now (what the server queued with it), or None: the marketplace stops,
        it still waits for its owners, the machine is busy (:meth:`capacity`), or the rule grants
        nothing. Call again after starting one: several may start at once."""
        if self.stop_asked or self.owners_arriving(present, now) or not self.admission.waiting:
            return None
        why = self.capacity(running, now)
        if why is not None:
            self.held = why
            return None
        chosen = self.admission.next(r.consumer for r in running)
        self.held = ""
        return chosen

    def refusal(self, consumer: str) -> str | None:
        """Why a new request of ``consumer`` is refused at once (the marketplace stops, or the queue is
        full: :meth:`.admission.Admission.refusal`), or None when it may wait in the queue."""
        if self.stop_asked:
            return "the marketplace is stopping; nothing was charged"
        why = self.admission.refusal(consumer)
        return None if why is None else why + "; nothing was charged: try again later"

    def queued_to_refuse(self) -> list[Any]:
        """Once a stop is asked: every request still queued (what the server queued with it), taken out
        of the queue for the server to refuse (nothing of theirs ran, nothing was charged); else none."""
        return self.admission.remove(lambda w: False) if self.stop_asked else []

    # --- sessions -------------------------------------------------------------------------------
    @classmethod
    def collecting(cls, started: float, run_timeout_s: float, now: float, collect_s: float) -> tuple[float, float]:
        """A session whose curator is done at ``now`` waits for its parties' reports: returns until when
        it waits for those it kept to the end (:meth:`collecting_deadline`) and for those it lost
        (``collect_s`` from now), ``(deadline, grace_end)``."""
        return cls.collecting_deadline(started, run_timeout_s, now, collect_s), now + collect_s

    @staticmethod
    def collecting_deadline(started: float, run_timeout_s: float, now: float, collect_s: float) -> float:
        """Until when a session whose curator is done at ``now`` waits for its parties' reports."""
        return max(now + collect_s, started + run_timeout_s)

    @staticmethod
    def reports_in(
        took_part: Iterable[str],
        lost: Iterable[str],
        reported: Iterable[str],
        now: float,
        deadline: float,
        grace_end: float,
    ) -> bool:
        """Whether a collecting session ends now. ``took_part``: the parties still on their connection
        that the session kept to its end, waited for until ``deadline`` (computing their own local work,
        not dead); ``lost``: those on their connection the session lost (a declined owner, one that
        missed a deadline), whose report is waited for only until ``grace_end`` (``collect_s``)."""
        reported = set(reported)
        if now > deadline:
            return True
        if not set(took_part) <= reported:
            return False
        return set(lost) <= reported or now > grace_end

    @classmethod
    def session_ends(cls, session: Collecting, present: Mapping[str, bytes], now: float) -> bool:
        """Whether the collecting ``session`` ends at ``now``, with ``present`` the owners' live
        connections: the parties still on the connection they took part on (an owner on the one it was
        invited on, the consumer unless gone) are waited for (:meth:`reports_in`); a party whose
        connection is gone is not, nor an owner whose agent declined the session (it has no part to
        report on: waiting for it would hold the consumer's report ``collect_s`` for nothing)."""
        on = {o for o, routing in session.invited_on.items() if present.get(o) == routing}
        on |= set() if session.consumer_gone else {CONSUMER}
        on -= set(session.declined)
        lost = set(session.lost)
        return cls.reports_in(on - lost, on & lost, session.reported, now, session.deadline, session.grace_end)

    # --- liveness -------------------------------------------------------------------------------
    def probe_due(self, now: float) -> bool:
        """Whether to probe the connections now (then the next probe is due :attr:`probe_s` later)."""
        if now < self.next_probe:
            return False
        self.next_probe = now + self.probe_s
        return True

    # --- stopping -------------------------------------------------------------------------------
    def stop(self) -> None:
        """A stop was asked (a signal, or the API): no request starts any more."""
        self.stop_asked = True

    @property
    def agents_told(self) -> bool:
        """Whether the agents were told to stop: an owner that connects after that is told at once (an
        agent still starting when the stop came would otherwise be waited for until the grace ends)."""
        return self.stop_by is not None

    def stop_step(self, now: float, sessions: int, agents_alive: bool) -> StopStep:
        """What a stop does next at ``now``, with ``sessions`` still held and the agents alive or not:
        keep serving (no stop asked), let the sessions finish, tell the agents to stop (once), wait for
        them, or exit."""
        if not self.stop_asked:
            return "serve"
        if sessions:
            return "finish_sessions"
        if self.stop_by is None:
            self.stop_by = now + STOP_GRACE_S
            return "tell_agents"
        if not agents_alive or now > self.stop_by:
            return "exit"
        return "wait_for_agents"
