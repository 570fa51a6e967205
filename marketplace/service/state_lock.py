"""One ``marketplace serve`` per state folder.

Two servers on one state folder would share its ledgers' agents, its session folders and its
``server.json`` (whose pid the documented ``kill -TERM`` reads). The first server takes an exclusive
``flock`` on ``STATE/serve.lock`` and writes its pid into it; a second one is refused, naming the
first one's pid. The operating system releases the lock when the process ends, however it ends, so
a server killed with SIGKILL leaves no stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class StateLocked(OSError):
    """The state folder is in use by another ``marketplace serve`` (``holder``: its pid, as it wrote it)."""

    def __init__(self, message: str, holder: str = "unknown") -> None:
        super().__init__(message)
        self.holder = holder


class StateLock:
    """The lock of ``state`` (module docstring): :meth:`acquire`, then :meth:`release`."""

    def __init__(self, state: Path) -> None:
        self.path = Path(state) / "serve.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`StateLocked` naming the pid that holds it."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StateLocked(
                f"the state folder {self.path.parent} is in use by another `marketplace serve` (pid {holder}): "
                "stop it first (kill -TERM " + holder + "), or give this one another --state",
                holder,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the lock
            self._fd = None
