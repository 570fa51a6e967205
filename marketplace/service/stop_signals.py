"""SIGTERM and SIGINT for a process that stops cleanly: recorded, never acted on in the handler.

A Python signal handler runs in the main thread between two bytecodes, wherever that thread is,
and a second signal can run it again inside the first. A handler that takes a lock (``Event.set``
takes its condition's) can therefore re-enter that lock and deadlock the process, or recurse until
it fails, when signals come in a burst (``timeout``, systemd's control-group kill, a user pressing
Ctrl-C twice). :class:`StopSignals` only records that a stop was asked: its Python handler assigns
one attribute, and the operating-system-level handler of CPython writes the signal's number into a
pipe (:func:`signal.set_wakeup_fd`) whatever thread it lands on. The thread that does the stopping
polls the pipe's read end (:meth:`StopSignals.fileno`) beside its sockets, and asks
:meth:`StopSignals.requested` outside any handler.
"""

from __future__ import annotations

import os
import signal
from types import FrameType
from typing import Any

STOPPING = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """SIGTERM and SIGINT recorded (module docstring). :meth:`install` from the main thread."""

    def __init__(self, signals: tuple[signal.Signals, ...] = STOPPING) -> None:
        self.signals = signals
        self.received: int | None = None
        """The first stopping signal seen, or None."""
        self._before: dict[signal.Signals, Any] = {}
        self._before_fd = -1
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)

    def install(self) -> StopSignals:
        """Handle the signals here (the main thread only, as :func:`signal.signal` requires)."""
        self._before = {sig: signal.getsignal(sig) for sig in self.signals}
        for sig in self.signals:
            signal.signal(sig, self._record)
        self._before_fd = signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        return self

    def uninstall(self) -> None:
        """Put back the handlers and the wakeup descriptor :meth:`install` replaced (the main thread only)."""
        signal.set_wakeup_fd(self._before_fd)
        for sig, handler in self._before.items():
            signal.signal(sig, handler)

    def _record(self, signum: int, frame: FrameType | None) -> None:
        # one assignment: no lock, no I/O, nothing that a signal landing here again could break
        self.received = signum

    def fileno(self) -> int:
        """The pipe's read end: readable once a signal came (poll it beside the sockets)."""
        return self._read

    def requested(self) -> bool:
        """Whether a stopping signal came: the handler's record, or a signal's number in the pipe
        (written by the interpreter the moment the signal arrived, before any Python code ran)."""
        while True:  # drained every time: a pipe left readable would wake its poller at once, forever
            try:
                numbers = os.read(self._read, 4096)
            except BlockingIOError:
                break
            for number in numbers:
                if number in self.signals and self.received is None:
                    self.received = number
            if not numbers:
                break
        return self.received is not None
