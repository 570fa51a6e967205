"""``STATE/server.json``: what a served marketplace is doing, for its operator and its tests.

The server says when something an operator would look for changes (an owner arrives, a request is
queued, a session starts or ends); the file holds its pid and endpoint, the owners present, the
sessions running and waiting, why the last request that could have started waited (``held``), the
most sessions that ran at once, the agents started again, and the last 200 sessions with their
status, wait and wall time. It is written whole, to a temporary file renamed over the old one, so a
reader never sees half of it; a disk that refuses it costs the file, never the marketplace.

It is written at most once per turn of the server's loop, however much changed in it, and only when
something did: at once in the turn a session ends (a reader waiting for a session's end sees it
promptly), otherwise at most every :data:`STATUS_EVERY_S` (a request queued, a session started or an
owner arriving shows within that, with what else changed meanwhile). Each rewrite costs the server
CPU: the text, and the rename over the old file (ext4 writes the new file's blocks out on it).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from marketplace.runtime import json_text

log = logging.getLogger("marketplace.serve")

STATUS_FILE = "server.json"
KEPT_SESSIONS = 200
"""How many ended sessions the file lists (the newest)."""
STATUS_EVERY_S = 0.5
"""The longest a change other than a session's end waits before the file shows it (plus a turn of
the server's loop, at most its poll of 100 ms)."""


def write_status(state: Path, status: dict[str, Any]) -> str | None:
    """Write ``status`` as ``state/server.json``, atomically; returns why it could not, or None."""
    tmp = state / f"{STATUS_FILE}.tmp"
    try:
        tmp.write_text(json_text(status, 1))
        os.replace(tmp, state / STATUS_FILE)
    except OSError as err:
        return str(err)
    return None


class StatusFile:
    """``state/server.json``, rewritten whole: on every :meth:`write`, or by :meth:`flush` once per turn
    of the server's loop when :meth:`changed` said so (module docstring). A write the disk refuses is
    logged once, until one succeeds again (:attr:`problem`: why the last one failed, or None)."""

    def __init__(self, state: Path, every_s: float = STATUS_EVERY_S) -> None:
        self.state = state
        self.problem: str | None = None
        self.every_s = every_s
        self.due = False
        """Something changed since the file was last written."""
        self.urgent = False
        """A session ended since: the next :meth:`flush` writes, however recent the last write."""
        self.written_at = -math.inf

    def changed(self, *, ended: bool = False) -> None:
        """What the file says changed (``ended``: a session ended): the next due :meth:`flush` writes it."""
        self.due = True
        self.urgent = self.urgent or ended

    def flush(self, status: Callable[[], dict[str, Any]], now: float) -> None:
        """Write ``status()`` if something changed and it is due at ``now`` (a session ended, or
        :attr:`every_s` passed since the last write)."""
        if self.due and (self.urgent or now - self.written_at >= self.every_s):
            self.write(status())

    def write(self, status: dict[str, Any]) -> None:
        """Write ``status`` now: a full disk costs the status file, not the marketplace."""
        self.due = self.urgent = False
        self.written_at = time.monotonic()
        problem = write_status(self.state, status)
        if problem is not None and self.problem is None:
            log.error("could not write %s: %s", self.state / STATUS_FILE, problem)
        self.problem = problem
