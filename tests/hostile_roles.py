"""Hostile and broken owners for the availability tests: each is an honest summarize owner changed in
one way. The same changed role runs as a real process (``tests/hostile_party.py``) and in process,
so a hostile run over ZeroMQ can be compared with the in-process reference of the same behaviour."""

from __future__ import annotations

from typing import Any

import numpy as np

from marketplace.messages import Envelope, ProtocolError
from marketplace.messages.kinds import Bye, Error
from marketplace.protocols.summarize.messages import Point
from marketplace.roles import Role, Send

BEHAVIOURS = ("never_bids", "refuses_target", "bye_mid_round", "lies_about_rows", "resells", "spams_errors")


def make_hostile(role: Role, behaviour: str) -> Role:
    """Change ``role`` (an honest summarize owner) in place to misbehave as ``behaviour``."""
    if behaviour not in BEHAVIOURS:
        raise ValueError(f"unknown behaviour {behaviour!r}: one of {BEHAVIOURS}")
    honest_handle = role.handle
    state: dict[str, Any] = {"rounds": 0, "sent": []}

    def handle(message: Envelope) -> list[Send]:
        kind = message.kind
        if behaviour == "never_bids" and kind == "round_open":
            return []  # alive, heartbeating, never bidding
        if behaviour == "refuses_target" and kind == "target_embedding":
            raise ProtocolError(party=message.sender, kind=kind, reason="this owner will not take g~")
        if behaviour == "bye_mid_round" and kind == "round_open":
            state["rounds"] += 1
            if state["rounds"] == 2:
                return [Send(message.sender, Bye())]  # a bye nobody asked for, then silence
            if state["rounds"] > 2:
                return []
        sends = honest_handle(message)
        if behaviour == "spams_errors" and kind == "round_open":
            sends += [Send(message.sender, Error(code="refused", detail="x" * 2000)) for _ in range(200)]
        if kind == "request" and sends and isinstance(sends[0].body, Point):
            point: Point = sends[0].body
            if behaviour == "lies_about_rows":
                sends = [
                    Send(
                        sends[0].to,
                        Point(round=point.round, x=point.x, y=point.y, row=10**12 + point.row),
                        reply_to=sends[0].reply_to,
                    )
                ]
            elif behaviour == "resells":
                state["sent"].append(point)
                if len(state["sent"]) == 2:  # its second sale: the first point again, under a new row number
                    first = state["sent"][0]
                    sends = [
                        Send(
                            sends[0].to,
                            Point(round=point.round, x=first.x, y=first.y, row=first.row + 1_000_000),
                            reply_to=sends[0].reply_to,
                        )
                    ]
        return sends

    role.handle = handle  # type: ignore[method-assign]
    return role


def data_with_huge_values(role: Role) -> Role:
    """An owner whose data hold 1e308: its h1 features overflow, so its bids are NaN."""
    role.phi = np.full_like(role.phi, np.nan)
    return role
