"""A served marketplace's bookkeeping of its sessions, apart from the socket loop that runs them:
their ids, the most that ran at once, the record of every ended one (for ``STATE/server.json`` and
:attr:`marketplace.service.api.Marketplace.finished`), which sessions still hold each owner (what
the server's probe of an owner names), what the policy sees of the sessions held
(:mod:`.market_policy`), and what an ended session leaves: its report assembled and
archived in its folder, and what its consumer is sent, kept for a later ``--resume`` (:mod:`.kept`).
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Iterable
from typing import Any

from marketplace.runtime import json_default
from marketplace.service.kept import Kept, keep
from marketplace.service.market_policy import Collecting, Running
from marketplace.service.session_run import Session, archive, assemble, handed_back, report_texts
from marketplace.service.sessions import new_session_id
from marketplace.service.worlds import WorldCache

log = logging.getLogger("marketplace.serve")


class SessionBook:
    """How many sessions the server numbered, the most that ran at once, and every ended one."""

    def __init__(self) -> None:
        self.number = 0
        self.max_running = 0
        """The most sessions that ran at once so far."""
        self.finished: list[dict[str, Any]] = []
        """Every session that ended (refused, dropped, completed or failed), oldest first."""
        self.ended: Counter[str] = Counter()
        """How many of :attr:`finished` ended with each status (first status first), kept as they end:
        ``server.json`` shows it at every rewrite, which a count over every session ever ended would
        make cost more with each session served."""

    def new_id(self) -> str:
        """The id of the next request (:func:`.sessions.new_session_id`)."""
        self.number += 1
        return new_session_id(self.number)

    def running(self, count: int) -> None:
        """``count`` sessions run now."""
        self.max_running = max(self.max_running, count)

    def record(self, s: Session, status: str, failure: str | None = None) -> None:
        """Session ``s`` ended with ``status`` (and ``failure``, the problem to name, if any)."""
        self.finished.append(
            {
                "session": s.id,
                "consumer": s.consumer,
                "protocol": s.scenario.config.protocol,
                "status": status,
                "wall_s": s.wall_s(),
                "wait_s": round((s.started or time.monotonic()) - s.queued_at, 3),
                "owners_invited": len(s.invited),
                **({"problem": failure} if failure else {}),
            }
        )
        self.ended[status] += 1


def held_by_owner(sessions: Iterable[Session]) -> dict[str, list[str]]:
    """Owner -> the sessions among ``sessions`` that still hold it: running or collecting, invited,
    and not lost (what the probe of its connection names, so its agent ends its part of every other)."""
    held: dict[str, list[str]] = {}
    for s in sessions:
        if s.loop is not None and s.state in ("running", "collecting"):
            for owner in s.invited:
                if owner not in s.loop.lost:
                    held.setdefault(owner, []).append(s.id)
    return held


def as_running(sessions: Iterable[Session], now: float) -> list[Running]:
    """What the policy sees of the sessions held at ``now`` (:class:`~.market_policy.Running`)."""
    return [
        Running(
            session=s.id,
            consumer=s.consumer,
            started=s.started,
            collecting=s.state != "running",
            pressure=s.loop.link.pressure(now) if s.loop is not None and s.state == "running" else 0.0,
        )
        for s in sessions
    ]


def as_collecting(s: Session) -> Collecting:
    """What the policy sees of session ``s``, collecting its parties' reports
    (:class:`~.market_policy.Collecting`)."""
    lost = s.loop.lost if s.loop is not None else set()
    return Collecting(
        {o: s.invited_on[o] for o in s.invited},
        s.consumer_gone,
        lost,
        s.reports,
        s.deadline,
        s.grace_end,
        declined=s.declined,
    )


def conclude(s: Session, worlds: WorldCache, failure: str | None) -> tuple[Kept, str | None]:
    """End session ``s`` (its loop closed): its run report assembled and archived in its folder, and
    what its consumer is sent kept there (:mod:`.kept`). Returns what the consumer is sent, and why the
    session's files could not be written (None: they were); the consumer gets its report either way."""
    if s.loop is not None and not s.loop.closed:
        s.loop.close()
    report = assemble(s, worlds, failure)
    s.status = report.get("status", "failed")
    text, texts = json.dumps(report, default=json_default), report_texts(s.reports)  # each written once
    problem = archive(s, report, text, texts)
    kept = Kept(
        session=s.id,
        consumer=s.consumer,
        scenario=s.text,
        frames=s.to_consumer,
        status="completed" if s.status == "completed" else "failed",
        report=text.encode(),
        parties=handed_back(s, failure, texts),
    )
    try:
        keep(s.folder, kept)
    except OSError as err:  # the consumer connected now still gets it; only a later --resume cannot
        log.error("session %s: could not keep its outputs for its consumer: %s", s.id, err)
        problem = problem or f"{s.folder}: {err.strerror or err}"
    return kept, problem
