"""``STATE/server.json``: what a served marketplace is doing, for its operator and its tests.

The server rewrites it whenever something an operator would look for changes (an owner arrives, a
request is queued, a session starts or ends): its pid and endpoint, the owners present, the sessions
running and waiting, why the last request that could have started waited (``held``), the most
sessions that ran at once, the agents started again, and the last 200 sessions with their status,
wait and wall time. It is written whole, to a temporary file renamed over the old one, so a reader
never sees half of it; a disk that refuses it costs the file, never the marketplace.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

log = logging.getLogger("marketplace.serve")

STATUS_FILE = "server.json"
KEPT_SESSIONS = 200
"""How many ended sessions the file lists (the newest)."""


def write_status(state: Path, status: dict[str, Any]) -> str | None:
    """Write ``status`` as ``state/server.json``, atomically; returns why it could not, or None."""
    tmp = state / f"{STATUS_FILE}.tmp"
    try:
        tmp.write_text(json.dumps(status, indent=1))
        os.replace(tmp, state / STATUS_FILE)
    except OSError as err:
        return str(err)
    return None


class StatusFile:
    """``state/server.json``, rewritten whole on every :meth:`write`. A write the disk refuses is
    logged once, until one succeeds again (:attr:`problem`: why the last one failed, or None)."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.problem: str | None = None

    def write(self, status: dict[str, Any]) -> None:
        """Write ``status``: a full disk costs the status file, not the marketplace."""
        problem = write_status(self.state, status)
        if problem is not None and self.problem is None:
            log.error("could not write %s: %s", self.state / STATUS_FILE, problem)
        self.problem = problem
