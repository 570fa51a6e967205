"""Tiny roles for the liveness and deadline tests: a curator that asks one party for a bid, a party
that, before it answers, computes in Python, stops itself (SIGSTOP) or dies (SIGKILL), and a silent
role that only records whom it lost (for tests that drive a loop's timers by hand).

    python tests/liveness_roles.py ENDPOINT BEHAVIOUR SECONDS HEARTBEAT_INTERVAL_S HEARTBEAT_TIMEOUT_S

runs the party (``BEHAVIOUR`` one of ``compute``, ``stop``, ``kill``) over the real ZeroMQ driver.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from marketplace.messages import Envelope
from marketplace.messages.kinds import Hello, Shutdown
from marketplace.protocols.summarize.messages import Bid, Request
from marketplace.roles import CURATOR, Role, Send

PARTY = "owner-1"
RUN = "liveness"
PARTIES = frozenset({CURATOR, PARTY})


class Silent(Role):
    """Sends nothing and accepts everything; records each peer it lost, with the reason."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[tuple[str, str]] = []

    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope) -> list[Send]:
        return []

    def peer_lost(self, peer: str, reason: str = "") -> list[Send]:
        self.lost.append((peer, reason))
        return []


class AskingCurator(Role):
    """Waits for the party's hello, asks it for a bid, and ends the run when the bid comes."""

    party_id = CURATOR
    role_name = "curator"

    def __init__(self) -> None:
        super().__init__()
        self.phase = "hello"
        self.bid: Bid | None = None
        self.lost: dict[str, str] = {}

    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope) -> list[Send]:
        if message.kind == "hello":
            self.phase = "bid"
            return [Send(PARTY, Request(round=1))]
        if message.kind == "bid":
            self.bid = message.body
            self.phase = "bye"
            return [Send(PARTY, Shutdown(reason="bid received"))]
        if message.kind == "bye":
            self.done = True
        return []

    def expected_peers(self) -> tuple[str, ...]:
        return (PARTY,)

    def awaited(self) -> dict[str, str]:
        return {PARTY: self.phase}

    def peer_lost(self, peer: str, reason: str = "") -> list[Send]:
        self.lost[peer] = reason
        self.done = True
        return []


class Bidder(Role):
    """Says hello; asked for a bid, first computes for ``seconds`` in pure Python (``compute``),
    or stops itself (``stop``), or dies (``kill``)."""

    party_id = PARTY
    role_name = "owner"

    def __init__(self, behaviour: str, seconds: float) -> None:
        super().__init__()
        self.behaviour = behaviour
        self.seconds = seconds

    def start(self) -> list[Send]:
        return [Send(CURATOR, Hello(role="owner", protocol="liveness", scenario="liveness"))]

    def handle(self, message: Envelope) -> list[Send]:
        if message.kind == "request":
            if self.behaviour == "stop":
                os.kill(os.getpid(), signal.SIGSTOP)
            elif self.behaviour == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            end = time.monotonic() + self.seconds
            while time.monotonic() < end:  # the GIL held, the driver's loop sends nothing
                pass
            return [Send(CURATOR, Bid(round=1, value=0.5, available=True), reply_to=message.msg_id)]
        if message.kind == "shutdown":
            return self.acknowledge_shutdown(message)
        return []


def main() -> int:
    from marketplace.transport.link_settings import LinkSettings
    from marketplace.transport.node import Node
    from marketplace.transport.zmq_driver import serve_party

    endpoint, behaviour, seconds, interval, timeout = sys.argv[1:6]
    role = Bidder(behaviour, float(seconds))
    settings = LinkSettings(
        heartbeat_interval_s=float(interval), heartbeat_timeout_s=float(timeout), progress_timeout_s=600.0
    )
    serve_party(Node(role, run_id=RUN, max_message_bytes=1 << 20, parties=PARTIES), endpoint, settings)
    return 3 if role.failure else 0


if __name__ == "__main__":
    sys.exit(main())
