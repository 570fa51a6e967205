"""Message kinds of the `summarize` protocol.

Flow (non-private): every party says ``hello``; the consumer sends ``validation_set``; the curator
sends ``target_embedding`` to the owners, then each round ``round_open``; every owner answers with
a ``bid`` (an owner with sale terms sends ``terms`` once, after its hello: its price per point and
how many it sells in this run); the curator sends ``request`` to the best bidder only, which answers with a ``point``.
After the last round the consumer gets the ``summary``; everyone gets ``shutdown`` and answers
``bye``.

Less-trusted curator: the consumer sends ``validation_embedding`` (h1 of each D_v row and its public
key) instead of ``validation_set``; ``target_embedding`` carries that key to the owners; a requested
owner answers with a ``sealed_point`` (the point's h1 embedding, and the point sealed for the
consumer); the consumer gets a ``sealed_summary``. The curator never holds a raw point.

The kinds keep the unprefixed names they have always had on the wire (``bid``, ``point``, ...);
the other protocols' kinds carry their protocol's prefix.
"""

from __future__ import annotations

from typing import Annotated

import numpy as np

from marketplace.messages.arrays import Array, ArraySpec
from marketplace.messages.kinds import Body, Count, PublicKey, RoundNo, SealedBytes
from marketplace.protocols.summarize.identity import COMMITMENT_BYTES, KEY_BYTES
from marketplace.schema import Length, Range

Embedding = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("d",))]
"""A vector of the h1-embedding space (d coordinates)."""
Features = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("dim",))]
"""One point's features (dim coordinates)."""
ContentKey = Annotated[bytes, Length(min=KEY_BYTES, max=KEY_BYTES)]
"""A sealed point's content key (:func:`~marketplace.protocols.summarize.identity.sealed_point_key`)."""
Commitment = Annotated[bytes, Length(min=COMMITMENT_BYTES, max=COMMITMENT_BYTES)]
"""The commitment to an owner's point-key secret
(:func:`~marketplace.protocols.summarize.identity.secret_commitment`)."""


class ValidationSet(Body, kind="validation_set", frozen=True):
    """The consumer's D_v, features only (the labels stay with the consumer)."""

    X: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("m", "dim"))]


class ValidationEmbedding(Body, kind="validation_embedding", frozen=True):
    """Less-trusted curator: h1 of each row of D_v (never the rows), and the consumer's public key."""

    phi: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("m", "d"))]
    consumer_key: PublicKey


class TargetEmbedding(Body, kind="target_embedding", frozen=True):
    """g~: the mean h1-embedding of D_v, broadcast once to every owner; with a less-trusted curator
    also the consumer's public key, to which owners seal the points they send."""

    mean: Embedding
    consumer_key: PublicKey | None = None


class RoundOpen(Body, kind="round_open", frozen=True):
    """Round l: the mean h1-embedding g_l of the current summary, which holds q points."""

    round: RoundNo
    summary_mean: Embedding
    q: Annotated[int, Range(min=0)]


class Bid(Body, kind="bid", frozen=True):
    """An owner's best value (g~ - q/(q+1) g_l) . h1(x) over its unsent points, for one round."""

    round: RoundNo
    value: float
    available: bool


class Terms(Body, kind="terms", frozen=True):
    """An owner's sale terms for this run, sent once right after its hello (before its first bid):
    its posted price per point handed over, and the most points it hands over in this run (what its
    lifetime ledger reserved under its terms; None: no cap beyond the run's rounds)."""

    price: Annotated[float, Range(min=0.0, max=1e12)]
    points: Annotated[int, Range(min=0)] | None = None


class Request(Body, kind="request", frozen=True):
    """The curator asks an owner for the point behind its bid in this round."""

    round: RoundNo


class Point(Body, kind="point", frozen=True):
    """An owner's point for a round: features, label and the point's serial in ``row``: k for the k-th
    point its owner hands over in this run (0, 1, 2, ...), never the owner's row index, which stays
    with the owner (the field keeps its name on the wire)."""

    round: RoundNo
    x: Features
    y: int
    row: Count


class Summary(Body, kind="summary", frozen=True):
    """The finished summary D_s (seed set excluded), with the owners' labels, for the consumer."""

    X: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("p", "dim"))]
    y: Annotated[np.ndarray, Array, ArraySpec(("<i8",), ("p",))]
    rounds: Count


class SealedPoint(Body, kind="sealed_point", frozen=True):
    """Less-trusted curator: the requested point's h1 embedding (checked against the bid), the point
    itself sealed for the consumer (fixed length, unreadable by the curator), the point's content key
    (what the curator tells the owner's points apart by) and the commitment to the secret that key
    is made with (one per owner). A less-trusted curator refuses a sealed point without them. ``row``
    is the point's serial, as in :class:`Point`, never the owner's row index."""

    round: RoundNo
    phi: Embedding
    row: Count
    sealed: SealedBytes
    key: ContentKey | None = None
    commitment: Commitment | None = None


class SealedSummary(Body, kind="sealed_summary", frozen=True):
    """Less-trusted curator: D_s as the embeddings the curator verified, the sealed points, and the
    content key and commitment each point came with, in summary order; the consumer opens each and
    checks it against its embedding, its key and its commitment."""

    phi: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("p", "d"))]
    sealed: tuple[SealedBytes, ...]
    rounds: Count
    keys: tuple[ContentKey, ...] = ()
    commitments: tuple[Commitment, ...] = ()


MESSAGES = (
    ValidationSet,
    ValidationEmbedding,
    TargetEmbedding,
    RoundOpen,
    Bid,
    Terms,
    Request,
    Point,
    Summary,
    SealedPoint,
    SealedSummary,
)
"""Every kind of the protocol."""

SummarizeMessage = (
    ValidationSet
    | ValidationEmbedding
    | TargetEmbedding
    | RoundOpen
    | Bid
    | Terms
    | Request
    | Point
    | Summary
    | SealedPoint
    | SealedSummary
)
"""The protocol's messages as one tagged union (the envelope's ``kind`` tells them apart)."""
