"""A party: one role as it runs, with what the role itself does not keep.

A :class:`~marketplace.roles.Role` is a pure protocol state machine: messages in, messages out. The
:class:`Party` around it holds the rest of what a party is while it runs: its
:class:`~marketplace.roles.identity.Identity` (the configuration fingerprint and noise description
given when its role was built), the :class:`~marketplace.roles.identity.Traffic` its transport
counts, and its standing under its lifetime ledger (:class:`~marketplace.roles.lifetime.Admission`,
or None). The transport's node talks to the party (:meth:`Party.sent`), never to these through the
role; the role reads its identity and traffic through the read-only views its party hands it.
"""

from __future__ import annotations

from typing import Any, Protocol

from marketplace.roles import Role
from marketplace.roles.identity import RUNTIME_KINDS, Identity, Traffic


class Standing(Protocol):
    """What a party uses of its standing under its lifetime ledger
    (:class:`~marketplace.roles.lifetime.Admission`, which imports this module)."""

    state: str
    points: int | None

    def mark_left(self) -> None: ...

    def settle(self, released: bool, sold: int | None = None) -> dict[str, Any]: ...


class Party:
    """``role`` as it runs (module docstring). Its identity is the one the role was built with
    (:meth:`Role.join`); ``admission`` is its standing under its lifetime ledger, if it keeps one."""

    def __init__(self, role: Role, *, admission: Standing | None = None) -> None:
        self.role = role
        self.traffic = Traffic()
        self.admission = admission
        role.join(traffic=self.traffic)

    @property
    def identity(self) -> Identity:
        return self.role.identity

    @property
    def party_id(self) -> str:
        return self.role.party_id

    @property
    def role_name(self) -> str:
        return self.role.role_name

    @property
    def scenario_name(self) -> str:
        return self.identity.scenario_name

    @property
    def config_fingerprint(self) -> dict[str, str]:
        return dict(self.identity.config_fingerprint)

    @property
    def noise(self) -> dict[str, Any] | None:
        """Where this party's privacy noise comes from, as its report states it; None: not described."""
        return self.identity.noise

    def sent(self, kind: str, nbytes: int) -> None:
        """The transport encoded a frame of ``kind`` (``nbytes`` long, envelope included) for this
        party, to be handed on: counted in :attr:`traffic` (the caller leaves out heartbeats and
        ``error`` answers). Before the first message of the protocol's own kinds, the lifetime ledger
        records, durably, that the release left (:meth:`Admission.mark_left`): when it cannot, it
        raises :class:`~marketplace.roles.lifetime.LedgerFault` and the frame must not leave."""
        traffic = self.traffic
        traffic._messages += 1
        traffic._bytes += nbytes
        if kind not in RUNTIME_KINDS:
            if traffic._protocol == 0 and self.admission is not None:
                self.admission.mark_left()
            traffic._protocol += 1
