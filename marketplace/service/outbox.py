"""The sending side of a served marketplace's control socket: control messages sent without
blocking, each saying what became of it, a session's frames out on the live links, and an ended
session sent again to a consumer that asks for it (:mod:`.kept`).

The socket is the server's ROUTER (``ROUTER_MANDATORY``): a message to a connection that is gone
fails at once with ``EHOSTUNREACH``, which is how the server learns that a peer has left.
"""

from __future__ import annotations

import errno
import logging
from typing import Any, Literal

import zmq

from marketplace.service import control
from marketplace.service.kept import Kept
from marketplace.service.session_run import Session

log = logging.getLogger("marketplace.serve")

Delivery = Literal["sent", "busy", "unreachable"]
"""What became of a control message sent without blocking: it left; it could not leave for another reason
than a lost peer (a full queue: the peer is not reading); the peer's connection is gone (``EHOSTUNREACH``)."""


class Outbox:
    """What the server sends on its control socket ``sock`` (module docstring)."""

    def __init__(self, sock: zmq.Socket) -> None:
        self.sock = sock

    def send(self, routing: bytes, message: Any) -> Delivery:
        """Send a control message without blocking, and say what became of it (:data:`Delivery`): the
        caller learns from the return value alone whether the peer's connection is gone or only busy."""
        try:
            self.sock.send_multipart([routing, control.encode(message)], zmq.NOBLOCK)
            return "sent"
        except zmq.ZMQError as err:  # the peer is gone (ROUTER_MANDATORY), or not reading
            return "unreachable" if err.errno == errno.EHOSTUNREACH else "busy"

    def send_frame(self, route: bytes | None, s: Session, frame: bytes) -> None:
        """A session frame out, raising as a socket would (what the session's loop expects). A frame
        to the consumer is kept first, whether or not it can leave (:mod:`.kept`)."""
        if route is not None and route == s.routing:
            s.to_consumer.append(frame)
        if route is None:
            raise zmq.ZMQError(errno.EHOSTUNREACH)
        self.sock.send_multipart([route, control.encode(control.SessionFrame(session=s.id, frame=frame))], zmq.NOBLOCK)

    def send_kept(self, routing: bytes, kept: Kept) -> None:
        """A session as its consumer saw it: ready, the curator's frames to it, the run report."""
        messages: list[Any] = [
            control.SessionReady(session=kept.session, scenario=kept.scenario),
            *(control.SessionFrame(session=kept.session, frame=f) for f in kept.frames),
            control.SessionReport(
                session=kept.session,
                status="completed" if kept.status == "completed" else "failed",
                report=kept.report,
                parties=kept.parties,
            ),
        ]
        for message in messages:
            if self.send(routing, message) != "sent":
                log.warning("session %s: its consumer's connection took not all it asked again", kept.session)
                return
