"""Which sessions an owner's agent ends because the server no longer holds the owner in them
(marketplace.service.held), on a fake clock, and the control message that carries the server's list."""

from __future__ import annotations

import pytest

from marketplace.service import control
from marketplace.service.held import GRACE_S, sessions_to_end


def test_no_list_yet_ends_nothing():
    assert sessions_to_end({"s1": 0.0}, None, 100.0) == []


def test_a_session_the_list_names_goes_on():
    assert sessions_to_end({"s1": 0.0, "s2": 1.0}, {"s1", "s2"}, 100.0) == []


def test_a_session_the_list_omits_ends_once_joined_before_the_grace():
    assert sessions_to_end({"s1": 0.0, "s2": 1.0}, {"s2"}, 100.0) == ["s1"]


def test_an_empty_list_ends_every_session_joined_long_enough_before_it():
    # a server that lost the owner everywhere, or one started again with no session at all
    assert sessions_to_end({"s2": 5.0, "s1": 0.0}, set(), 50.0) == ["s1", "s2"]


def test_a_list_sent_before_the_invitation_does_not_end_the_session_just_joined():
    joined = {"s1": 10.0}
    assert sessions_to_end(joined, set(), 10.0 - 0.5) == []  # the list came before the invitation
    assert sessions_to_end(joined, set(), 10.0) == []  # in the same batch
    assert sessions_to_end(joined, set(), 10.0 + GRACE_S - 0.01) == []  # within the grace
    assert sessions_to_end(joined, set(), 10.0 + GRACE_S) == ["s1"]  # a later list that still omits it


def test_the_grace_is_a_parameter():
    assert sessions_to_end({"s1": 10.0}, (), 10.5, grace_s=0.5) == ["s1"]
    assert sessions_to_end({"s1": 10.0}, (), 10.4, grace_s=0.5) == []


def test_owner_sessions_round_trips_and_its_list_is_bounded():
    message = control.OwnerSessions(sessions=["s0001-aa", "s0002-bb"])
    assert control.decode(control.encode(message)) == message
    assert control.decode(control.encode(control.OwnerSessions(sessions=[]))) == control.OwnerSessions(sessions=[])
    too_many = control.encode(control.OwnerSessions(sessions=["s"] * (control.MAX_HELD + 1)))
    with pytest.raises(control.ControlError):
        control.decode(too_many)
    with pytest.raises(control.ControlError):
        control.decode(control.encode(control.OwnerSessions(sessions=["x" * 129])))
