"""A party of a session on a shared connection (:class:`SharedLinkLoop`): the curator, reached over
the live connection to the marketplace, counts as arrived when the session starts, so a curator
with nothing to send yet (it waits for the owners) is not lost at the start deadline; its
connection closing still loses it. Time is passed to the loop's timers, never waited for."""

from __future__ import annotations

import time

from marketplace.messages import Envelope
from marketplace.roles import CURATOR, Role, Send
from marketplace.transport.link_settings import LinkSettings
from marketplace.transport.node import Node
from marketplace.transport.shared_link import SharedLinkLoop


class WaitsForTheCurator(Role):
    """Sends nothing and waits for a frame from the curator (as a consumer waits for a publication)."""

    party_id = "consumer"
    role_name = "consumer"

    def start(self) -> list[Send]:
        return []

    def handle(self, message: Envelope) -> list[Send]:
        return []

    def expected_peers(self) -> tuple[str, ...]:
        return (CURATOR,)


def loop(connected: tuple[str, ...]) -> tuple[SharedLinkLoop, list[bytes]]:
    sent: list[bytes] = []
    settings = LinkSettings(start_timeout_s=1.0, heartbeat_timeout_s=1.0, progress_timeout_s=1.0, run_timeout_s=600)
    node = Node(WaitsForTheCurator(), run_id="s1", max_message_bytes=1 << 20)
    shared = SharedLinkLoop(
        node, settings, send=lambda route, frame: sent.append(frame), route_of=lambda party: b"", connected=connected
    )
    shared.begin()
    return shared, sent


def test_a_curator_on_the_live_connection_is_not_lost_at_the_start_deadline():
    shared, sent = loop(connected=(CURATOR,))
    later = time.monotonic() + 50  # far past start_timeout_s
    shared.pump()
    shared.tick(later)
    assert CURATOR not in shared.lost
    assert shared.stats.arrivals == 1 and not sent  # no frame travels to say so


def test_without_it_the_start_deadline_loses_a_silent_curator():
    """What the consumer did before: the curator had sent nothing yet, so it was 'never connected'."""
    shared, _ = loop(connected=())
    shared.pump()
    shared.tick(time.monotonic() + 50)
    assert "never connected" in shared.stats.lost_peers.get(CURATOR, "")


def test_a_connected_curator_whose_connection_closes_is_lost():
    shared, _ = loop(connected=(CURATOR,))
    shared.gone(CURATOR, b"")
    shared.pump()  # drained past the close
    shared.tick(time.monotonic() + 2)
    assert "connection closed" in shared.stats.lost_peers.get(CURATOR, "")
