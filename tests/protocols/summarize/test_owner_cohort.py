"""Owners bidding together (one product over their stacked rows) bid bit for bit as each alone."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from marketplace.messages import Envelope
from marketplace.protocols.summarize.bid import best_offer, bid_direction, stacked_best_rows
from marketplace.protocols.summarize.messages import RoundOpen
from marketplace.protocols.summarize.owner_cohort import OwnerCohort, Stack, prepared_offers


def _owners(rng: np.random.Generator, count: int, d: int, dtype: str) -> list[SimpleNamespace]:
    owners = []
    for _ in range(count):
        rows = int(rng.integers(1, 12))
        phi = rng.normal(size=(rows, d)) / np.sqrt(d)
        if rows > 2 and rng.random() < 0.3:
            phi[1] = phi[0]  # an exact tie: the lowest row must win, as alone
        available = rng.random(rows) < 0.8
        owners.append(
            SimpleNamespace(phi=phi.astype(dtype), available=available, target_mean=None, sent_rows=[], prepared=None)
        )
    return owners


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_stacked_offers_equal_each_owners_own(dtype: str) -> None:
    rng = np.random.default_rng(7)
    for trial in range(30):
        d = int(rng.integers(5, 200))
        owners = _owners(rng, 40, d, dtype)
        direction = rng.normal(size=d)
        alone = [best_offer(o.phi, direction, o.available) for o in owners]
        stack = Stack(owners)
        together = prepared_offers(stack, list(range(len(owners))), direction)
        assert together == alone, trial  # rows and bids, bit for bit (floats compare exactly)
        some = [int(i) for i in rng.permutation(len(owners))[:7]]  # part of a round, in any order
        assert prepared_offers(stack, some, direction) == [alone[i] for i in some], trial


def test_a_near_tie_is_not_certain() -> None:
    f = np.array([[1.0, 0.0], [1.0 + 1e-16, 0.0], [0.0, 1.0]])
    rows, certain = stacked_best_rows(f, np.array([0, 2]), np.ones(3, bool), np.array([1.0, 0.5]), 1.0)
    assert not certain[0] and certain[1] and rows[1] == 0


def test_the_cohort_prepares_each_owner_its_own_offer() -> None:
    rng = np.random.default_rng(3)
    d = 16
    owners = _owners(rng, 5, d, "float64")
    target = rng.normal(size=d)
    for owner in owners:
        owner.target_mean = target.copy()  # each owner decoded its own copy of g~
    cohort = OwnerCohort(owners)
    body = RoundOpen(round=3, q=4, summary_mean=rng.normal(size=d))
    envelope = Envelope(1, "run", 1, "curator", "owner-1", "round_open", None, body)
    cohort.prepare([(owner, envelope) for owner in owners])
    direction = bid_direction(target, body.summary_mean, body.q)
    for owner in owners:
        assert owner.prepared is not None and owner.prepared.body is body
        assert owner.prepared.offer == best_offer(owner.phi, direction, owner.available)


def test_an_owner_with_unreadable_features_bids_as_alone() -> None:
    rng = np.random.default_rng(5)
    owners = _owners(rng, 6, 8, "float64")
    owners[2].phi[0] = np.nan  # a broken owner's rows: best_offer decides, as it did alone
    owners[2].available[:] = True
    direction = rng.normal(size=8)
    alone = [best_offer(o.phi, direction, o.available) for o in owners]
    together = prepared_offers(Stack(owners), list(range(6)), direction)
    assert repr(together) == repr(alone)  # (0, nan) for the broken owner either way: nan != nan
