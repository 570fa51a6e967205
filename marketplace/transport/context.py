"""Every ZeroMQ context of the project, made by :func:`new_context`: one that can never block on exit.

A plain ``zmq.Context`` can hang its process for ever. Terminating it (``term()``, and ``destroy()``
after closing the sockets it knows) waits until every socket is closed and every message sent on
one has left, and the default linger is infinite: a message for a peer that is gone (or was never
there) is waited for without end. pyzmq terminates a context it garbage-collects, so the wait can
start anywhere: in the collector, while pytest formats a failed test whose traceback held the
context, or at a process's exit. Two things make a context of ours safe:

* **No linger by default.** ``BLOCKY`` off (libzmq: new sockets start with ``LINGER`` 0) and a
  default ``LINGER`` of 0 for every socket pyzmq makes from the context, monitor sockets included.
  A socket that must still deliver its last message sets a bounded linger itself (the driver's
  ``close_linger_s``, the service's 2 s): bounded, so still safe.
* **Never terminated inside the garbage collector.** When a context and its sockets are collected
  together (a reference cycle, such as a traceback's frames), Python clears the context's weak
  references to its sockets before any finalizer runs, so pyzmq's ``__del__`` cannot close them
  and waits in ``term()`` for sockets whose own finalizers come after it, in the same thread: for
  ever, whatever the linger. Ours closes the sockets it still sees and terminates the context on a
  short-lived thread of its own, which ends as soon as the remaining sockets' finalizers have run.

Contexts are still to be closed by their owner (``destroy(linger=0)`` or closing the sockets, then
``term()``); :func:`open_contexts` lists the ones that are not, each with who made it, so a test
suite can name a leak instead of finding it as a hang.
"""

from __future__ import annotations

import sys
import threading
import weakref
from warnings import warn

import zmq
import zmq.sugar.context

_made: weakref.WeakSet[NeverBlockingContext] = weakref.WeakSet()
_count_lock = threading.Lock()
_count = 0


class NeverBlockingContext(zmq.Context):
    """A ``zmq.Context`` whose sockets default to no linger and whose garbage collection never waits
    for a socket. Made by :func:`new_context`; otherwise used like any context."""

    owner: str = ""
    """Who made it (the caller's ``owner=``, else the calling function's qualified name)."""
    number: int = 0
    """The order it was made in, in this process (1 for the first)."""

    def __repr__(self) -> str:
        return f"<ZeroMQ context #{self.number} made by {self.owner}{' (closed)' if self.closed else ''}>"

    def __del__(self) -> None:
        if self.closed or getattr(self, "_shadow", False) or sys.is_finalizing():
            return
        if getattr(zmq.sugar.context, "_exiting", False):  # pyzmq's atexit: as pyzmq, leave it to the exit
            return
        for sock in list(getattr(self, "_sockets", ())):
            if not sock.closed:
                sock.close(linger=0)
        # sockets collected with the context are closed by their own finalizers, after this one, in this
        # thread: terminating here would wait for them for ever
        try:
            threading.Thread(target=self.term, name=f"zmq term {self.owner}", daemon=True).start()
        except RuntimeError:  # no new threads (the interpreter is shutting down): the process ends anyway
            pass
        warn(f"unclosed {self!r}", ResourceWarning, stacklevel=2, source=self)


def new_context(io_threads: int = 1, *, owner: str | None = None) -> NeverBlockingContext:
    """A new ZeroMQ context that can never block on exit: every socket made from it starts with
    ``LINGER`` 0 and its garbage collection does not wait (see the module's notes).

    ``owner`` names who made it in :func:`open_contexts` (default: the calling function, as
    ``module.qualified_name``)."""
    global _count
    ctx = NeverBlockingContext(io_threads=io_threads)
    ctx.set(zmq.BLOCKY, 0)
    ctx.setsockopt(zmq.LINGER, 0)
    if owner is None:
        caller = sys._getframe(1)
        owner = f"{caller.f_globals.get('__name__', '?')}.{caller.f_code.co_qualname}"
    with _count_lock:
        _count += 1
        ctx.owner, ctx.number = owner, _count
        _made.add(ctx)
    return ctx


def contexts_made() -> int:
    """How many contexts :func:`new_context` has made in this process (the last one's ``number``)."""
    return _count


def open_contexts() -> list[NeverBlockingContext]:
    """The contexts :func:`new_context` made in this process that are still referenced and not yet
    closed, oldest first."""
    return sorted((ctx for ctx in list(_made) if not ctx.closed), key=lambda ctx: ctx.number)
