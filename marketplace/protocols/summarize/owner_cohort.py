"""The owners of one process bid together: one matrix product for every owner's bid of a round.

Every owner answers a round's ``round_open`` with the best of its unsent points for the same
direction (:func:`~marketplace.protocols.summarize.bid.bid_direction` of the same g~, summary mean
and q). An owner alone does one matrix-vector product over its own rows; the owners of a process
(the in-process driver's, an owner host's) keep their feature rows in one stacked matrix, each
owner's ``phi`` and ``available`` a view of its own block, and the round's broadcast is answered
by one product over the stack and a segmented argmax
(:func:`~marketplace.protocols.summarize.bid.stacked_best_rows`). Each owner then bids from its own
prepared choice, in its own message: what it sends is bit for bit what it would have sent alone
(an owner whose choice the stacked product cannot settle for certain, and any owner the batch does
not fit, computes alone as before). Nothing is shared but the public direction: no owner's rows,
choice or noise reach another owner.

:func:`prepared_offers` is the pure policy (decoded broadcast, owners' states -> each owner's
choice); :class:`OwnerCohort` holds the stack and hands each owner its own result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

from marketplace.messages import Envelope
from marketplace.protocols.summarize.bid import best_offer, bid_direction, bid_value, stacked_best_rows
from marketplace.protocols.summarize.messages import RoundOpen
from marketplace.roles.cohort import Cohort

Offer = tuple[int, float] | None
"""What :func:`~marketplace.protocols.summarize.bid.best_offer` returns: (row, bid), or None."""


class Prepared(NamedTuple):
    """An owner's choice prepared by its cohort: for ``body``'s round, with ``direction``, when the
    owner had handed over ``sent`` points (its rows' availability then)."""

    body: RoundOpen
    direction: np.ndarray
    offer: Offer
    sent: int


class Bidder(Protocol):
    """What the cohort reads of an owner (:class:`~marketplace.protocols.summarize.owner.SummarizeOwner`)."""

    phi: np.ndarray
    available: np.ndarray
    target_mean: np.ndarray | None
    sent_rows: list[int]
    prepared: Prepared | None


class Stack:
    """The feature rows and availability flags of many owners in one matrix each, owner i's rows
    from ``starts[i]``. Owners keep views of their blocks, so what an owner marks sent is marked here."""

    def __init__(self, owners: Sequence[Bidder]) -> None:
        self.owners = list(owners)
        self.features = np.concatenate([owner.phi for owner in self.owners])
        self.available = np.concatenate([owner.available for owner in self.owners])
        self.sizes = np.array([len(owner.phi) for owner in self.owners], dtype=np.intp)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.intp)
        for owner, start, size in zip(self.owners, self.starts, self.sizes, strict=True):
            owner.phi = self.features[start : start + size]
            owner.available = self.available[start : start + size]
        norms = np.linalg.norm(self.features.astype(np.float64, copy=False), axis=1)
        self.row_norm = float(norms.max()) if len(norms) else 0.0


def prepared_offers(stack: Stack, members: Sequence[int], direction: np.ndarray) -> list[Offer]:
    """Each listed owner's :func:`best_offer` for ``direction`` (owners by index into the stack):
    bit for bit what it computes alone, from one product over the whole stack."""
    if len(members) == len(stack.owners) and list(members) == list(range(len(stack.owners))):
        rows, certain = stacked_best_rows(stack.features, stack.starts, stack.available, direction, stack.row_norm)
    else:  # some of the owners (an owner host's socket reads bring part of a round): their rows gathered
        rows, certain = _members_best_rows(stack, members, direction)
    offers: list[Offer] = []
    for k, i in enumerate(members):
        owner = stack.owners[i]
        if not certain[k]:
            offers.append(best_offer(owner.phi, direction, owner.available))
        elif rows[k] < 0:
            offers.append(None)
        else:
            row = int(rows[k])
            offers.append((row, bid_value(owner.phi[row], direction)))
    return offers


def _members_best_rows(stack: Stack, members: Sequence[int], direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`stacked_best_rows` over the listed owners' rows alone (gathered, in the listed order),
    so that a part of a round costs its own rows, not the whole stack's."""
    index = np.asarray(members, dtype=np.intp)
    sizes = stack.sizes[index]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    rows = np.arange(int(sizes.sum()), dtype=np.intp) + np.repeat(stack.starts[index] - offsets, sizes)
    return stacked_best_rows(stack.features[rows], offsets, stack.available[rows], direction, stack.row_norm)


class OwnerCohort(Cohort):
    """The summarize owners of one process (:class:`~marketplace.roles.cohort.Cohort`): stacks their
    rows once, and before a batch of ``round_open`` messages, prepares each owner's choice."""

    def __init__(self, owners: Sequence[Any]) -> None:
        # owners with rows, of the process's most common feature layout (an owner of another
        # configuration, with other features, bids alone and is refused as before)
        layouts: dict[tuple[np.dtype, int], list[Any]] = {}
        for owner in owners:
            if owner.phi.ndim == 2 and len(owner.phi) > 0:
                layouts.setdefault((owner.phi.dtype, owner.phi.shape[1]), []).append(owner)
        usable = max(layouts.values(), key=len, default=[])
        self.stack = Stack(usable) if len(usable) > 1 else None
        self.index = {id(owner): i for i, owner in enumerate(self.stack.owners)} if self.stack else {}
        self.same_target: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        """Owner -> (its g~, the batch's g~) once found equal: g~ arrives once, so each owner's is compared once."""

    def _same_target(self, i: int, mine: np.ndarray, batch: np.ndarray | None) -> bool:
        """Whether owner ``i``'s g~ is the batch's, bit for bit (remembered for the same two arrays)."""
        known = self.same_target.get(i)
        if known is not None and known[0] is mine and known[1] is batch:
            return True
        if batch is None or not _same_array(mine, batch):
            return False
        self.same_target[i] = (mine, batch)
        return True

    def prepare(self, deliveries: Sequence[tuple[Any, Envelope]]) -> None:
        stack = self.stack
        if stack is None:
            return
        first: RoundOpen | None = None
        target: np.ndarray | None = None
        members: list[int] = []
        for owner, message in deliveries:
            body = message.body
            i = self.index.get(id(owner))
            if i is None or not isinstance(body, RoundOpen) or owner.target_mean is None:
                continue
            if first is None:
                first, target = body, owner.target_mean
            elif not _same_round(body, first) or not self._same_target(i, owner.target_mean, target):
                continue  # not this batch's broadcast: that owner bids alone
            if body.summary_mean.shape != owner.target_mean.shape:
                continue  # the owner refuses it itself
            members.append(i)
        if first is None or target is None or len(members) < 2:
            return
        direction = bid_direction(target, first.summary_mean, first.q)
        for i, offer in zip(members, prepared_offers(stack, members, direction), strict=True):
            owner = stack.owners[i]
            owner.prepared = Prepared(first, direction, offer, len(owner.sent_rows))


def _same_round(body: RoundOpen, first: RoundOpen) -> bool:
    return body is first or (
        body.round == first.round and body.q == first.q and _same_array(body.summary_mean, first.summary_mean)
    )


def same_round(body: RoundOpen, first: RoundOpen) -> bool:
    """Whether two ``round_open`` bodies are the same broadcast: the same round, q and summary mean, bit for bit."""
    return _same_round(body, first)


def _same_array(a: np.ndarray, b: np.ndarray | None) -> bool:
    """Equal bit for bit (a signed zero is not the other zero: the bid would differ in its last bits)."""
    if a is b:
        return True
    return b is not None and a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
