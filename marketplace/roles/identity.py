"""Who a party is beyond its id, and what it has sent: the two things a role is handed by the
:class:`~marketplace.roles.party.Party` that runs it rather than computing itself.

Both are read-only to the role: its :class:`Identity` (the configuration fingerprint its ``hello``
states, where its noise comes from) is fixed when it is built, and its :class:`Traffic` counts
only what its party's transport recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

RUNTIME_KINDS = frozenset({"hello", "heartbeat", "error", "shutdown", "bye"})
"""Kinds every party sends whatever its protocol: none carries anything derived from its data."""


@dataclass(frozen=True)
class Identity:
    """A party as the scenario names it: its id, role and scenario, the configuration fingerprint
    every party must agree on (sent in ``hello`` and checked by the curator,
    :func:`marketplace.scenario.fingerprint.fingerprint`), and where its privacy noise comes from and
    who could strip it (:func:`marketplace.privacy.noise.describe`; reported with the party), or None."""

    party_id: str
    role_name: str
    scenario_name: str = ""
    config_fingerprint: Mapping[str, str] = field(default_factory=dict)
    noise: dict[str, Any] | None = None


class Traffic:
    """What a party has sent so far on its role's behalf, as its transport recorded it: every frame
    its node encoded for it but heartbeats (whose number follows the wall clock) and ``error``
    answers to frames it refused (whose number follows what others send). Only the
    :class:`~marketplace.roles.party.Party` that owns it counts; everyone else (its role, a curator's
    per-round history) reads it. During a call to the role it counts what was sent before that call."""

    __slots__ = ("_bytes", "_messages", "_protocol")

    def __init__(self) -> None:
        self._messages = 0
        self._bytes = 0
        self._protocol = 0

    @property
    def messages_sent(self) -> int:
        """Messages sent (see the class docstring for what counts)."""
        return self._messages

    @property
    def bytes_sent(self) -> int:
        """The bytes of those frames, envelope included."""
        return self._bytes

    @property
    def protocol_messages_sent(self) -> int:
        """Messages of the protocol's own kinds among them (not hello, heartbeat, error, shutdown or
        bye): zero means nothing derived from the party's data left it, so a lifetime reservation
        may be rolled back (:mod:`marketplace.roles.lifetime`)."""
        return self._protocol


NO_TRAFFIC = Traffic()
"""What a role that no party runs has sent: nothing (no party ever counts on it)."""
