"""How every socket of the ZeroMQ driver is set up: no linger on error paths, the frame cap, the
high-water marks, ZMTP heartbeats run by libzmq's I/O thread, and a DEALER's plaintext identity; and
the flags and the send the driver uses per frame, as plain values."""

from __future__ import annotations

import zmq

from marketplace.transport.link_settings import LinkSettings

NOBLOCK, NOBLOCK_MORE, RCVMORE = int(zmq.NOBLOCK), int(zmq.NOBLOCK | zmq.SNDMORE), int(zmq.RCVMORE)
EVENTS, POLLIN = int(zmq.EVENTS), int(zmq.POLLIN)
"""Plain ints: pyzmq's flag enums cost about a microsecond per operation, per frame."""
RAW_SEND = getattr(zmq.backend, "Socket", zmq.Socket).send
"""pyzmq's own socket send, under its Python wrapper (which handles routing ids, groups and
zero-copy thresholds the driver never uses): a microsecond or more saved per frame."""


def plaintext_identity(sock: zmq.Socket, party: str) -> None:
    """Without CURVE (development only) a DEALER's routing id is its party id: its claim, unchecked."""
    sock.setsockopt(zmq.IDENTITY, party.encode())


def zmtp_heartbeats(settings: LinkSettings) -> dict[int, int]:
    """ZeroMQ's own heartbeat options for ``settings``, in milliseconds: a PING every
    ``heartbeat_interval_s``, and the connection closed when no traffic came back within
    ``heartbeat_timeout_s`` (``HEARTBEAT_TIMEOUT``). libzmq's I/O thread does all of it, so a party
    computing in Python keeps its connections; a stopped or dead one loses them.

    Both ends of every connection ping and time out on their own, so neither asks the other to
    keep a timer for it (``HEARTBEAT_TTL`` 0). A TTL would be a third timer per connection, armed
    by every PING received and cancelled by the next frame, and libzmq cancels a timer by walking
    every timer of its I/O thread: at 10,000 connections those walks were a tenth of the
    curator's CPU."""
    ivl = max(1, round(1000 * settings.heartbeat_interval_s))
    timeout = max(1, round(1000 * settings.heartbeat_timeout_s))
    return {int(zmq.HEARTBEAT_IVL): ivl, int(zmq.HEARTBEAT_TIMEOUT): timeout, int(zmq.HEARTBEAT_TTL): 0}


def configure_socket(sock: zmq.Socket, settings: LinkSettings) -> None:
    """Every socket of the driver: no linger on error paths, the frame cap, the high-water marks,
    ZMTP heartbeats (:func:`zmtp_heartbeats`)."""
    sock.setsockopt(zmq.LINGER, 0)
    for option, value in zmtp_heartbeats(settings).items():
        sock.setsockopt(option, value)
    sock.setsockopt(zmq.MAXMSGSIZE, settings.max_message_bytes)
    sock.setsockopt(zmq.SNDHWM, settings.high_water_mark)
    sock.setsockopt(zmq.RCVHWM, settings.high_water_mark)


def int_option(sock: zmq.Socket, option: int) -> int:
    """The value of an integer socket option (``ZMQ_EVENTS``, ``ZMQ_FD``): pyzmq types every
    ``Socket.get`` as ``int | bytes``, for the options that hold bytes (an identity, a key)."""
    value = sock.get(option)
    if not isinstance(value, int):
        raise TypeError(f"ZeroMQ socket option {option} holds {value!r}, not an integer")
    return value
