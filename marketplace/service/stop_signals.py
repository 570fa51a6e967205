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

STOPPING = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """SIGTERM and SIGINT recorded (module docstring). :meth:`install` from the main thread."""

    def __init__(self, signals: tuple[signal.Signals, ...] = STOPPING) -> None:
        self.signals = signals
        self.received: int | None = None
        """The first stopping signal seen, or None."""
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)

    def install(self) -> StopSignals:
        """Handle the signals here (the main thread only, as :func:`signal.signal` requires)."""
        for sig in self.signals:
            signal.signal(sig, self._record)
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        return self

    def _record(self, signum: int, frame: FrameType | None) -> None:
        # one assignment: no lock, no I/O, nothing that a signal landing here again could break
        self.received = signum

    def fileno(self) -> int:
        """The pipe's read end: readable once a signal came (poll it beside the sockets)."""
        return self._read

    def requested(self) -> bool:
        """Whether a stopping signal came: the handler's record, or a signal's number in the pipe
        (written by the interpreter the moment the signal arrived, before any Python code ran)."""
        if self.received is None:
            try:
                numbers = os.read(self._read, 4096)
            except BlockingIOError:
                numbers = b""
            for number in numbers:
                if number in self.signals:
                    self.received = number
        return self.received is not None
