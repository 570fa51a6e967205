"""The ZeroMQ driver's settings and the statistics its loop reports, as plain data.

Kept apart from :mod:`marketplace.transport.zmq_driver` so that the link policy
(:mod:`marketplace.transport.link_policy`), which decides from these settings and writes these
statistics, needs no socket library to be imported, built or tested.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LinkSettings:
    """Timeouts and limits of the ZeroMQ driver (all scenario settings under ``transport``)."""

    heartbeat_interval_s: float = 0.5
    heartbeat_timeout_s: float = 5.0
    start_timeout_s: float = 30.0
    run_timeout_s: float = 600.0
    progress_timeout_s: float = 30.0
    max_message_bytes: int = 64 * 1024 * 1024
    high_water_mark: int = 10_000
    send_timeout_s: float = 5.0
    max_queued_frames: int = 10_000
    refusal_budget: int = 50
    quarantine_s: float = 5.0
    close_linger_s: float = 1.0
    curve_keys: str | None = None
    """Key folder: CURVE on (see :mod:`marketplace.transport.curve`); None: plaintext."""


@dataclass
class DriverStats:
    """What one loop of the driver did, for the party's report (``driver``)."""

    io_s: float = 0.0
    idle_s: float = 0.0
    lost_peers: dict[str, str] = field(default_factory=dict)
    endpoint: str = ""
    dropped_connections: int = 0
    quarantined: dict[str, int] = field(default_factory=dict)
    """Peer (or stranger) -> frames dropped unread while it was in quarantine."""
    replies_dropped: int = 0
    """Best-effort replies (errors) dropped because their receiver was not reading."""
    max_batch: int = 0
    arrivals: int = 0
    """Parties whose first frame this loop accepted."""
    last_arrival_s: float = 0.0
    """Seconds from this loop's start to the last of those first frames: at the curator, the
    connection set-up of the whole run (every CURVE handshake and hello)."""

    def to_dict(self) -> dict[str, object]:
        return {
            "io_s": self.io_s,
            "idle_s": self.idle_s,
            "lost_peers": dict(self.lost_peers),
            "endpoint": self.endpoint,
            "dropped_connections": self.dropped_connections,
            "quarantined": dict(self.quarantined),
            "replies_dropped": self.replies_dropped,
            "max_batch": self.max_batch,
            "arrivals": self.arrivals,
            "last_arrival_s": self.last_arrival_s,
        }
