"""Message kinds of the `pfds` protocol (private federated data sharing, docs/design.md §4).

Flow: every party says ``hello``; each sharer (owner) sends its private tree (``pfds_tree``); once
every live sharer's tree is in, the curator forwards each tree to every agent, the consumer and
the sharers (``pfds_shared_tree``), then announces the phase (``pfds_phase``, ``label``). Each
sharer answers with its synthetic records labelled by the majority of all trees (``pfds_data``);
the curator forwards them to every agent (``pfds_shared_data``) and announces ``train``. Then
``shutdown``/``bye``. Only private releases travel: a tree (structure and noisy leaf counts) and
synthetic records, never a sharer's row.

A tree travels as parallel arrays in breadth-first node order (see
:mod:`marketplace.protocols.pfds.tree`): ``threshold`` is NaN at non-numeric nodes; ``counts`` is
leaves x label codes. The receiver rebuilds it with ``PrivateTree.from_plain`` against its own
public schema, which checks the structure.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np

from marketplace.messages.arrays import Array, ArraySpec
from marketplace.messages.kinds import Body, PartyName
from marketplace.schema import Length, Range

Nodes = Annotated[np.ndarray, Array, ArraySpec(("<i8",), ("nodes",))]
Thresholds = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("nodes",), finite=False)]
LeafCounts = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("leaves", "codes"))]
SpendField = Annotated[str, Length(min=1, max=64)] | int | float
Sharers = Annotated[tuple[PartyName, ...], Length(max=4096)]


class PfdsTree(Body, kind="pfds_tree", frozen=True):
    """A sharer's private tree: node arrays, the leaves' noisy class counts, its parameters, and
    what growing it spent (one map per level: purpose, level, epsilon, mechanism)."""

    attribute: Nodes
    threshold: Thresholds
    n_children: Nodes
    counts: LeafCounts
    h_max: Annotated[int, Range(min=1, max=64)]
    t: Annotated[int, Range(min=1)]
    neighbours: Literal["add_remove", "replace"]
    spends: Annotated[tuple[dict[str, SpendField], ...], Length(max=128)]


class PfdsSharedTree(Body, kind="pfds_shared_tree", frozen=True):
    """The curator forwards one sharer's tree to an agent (fields as in ``pfds_tree``)."""

    sharer: PartyName
    attribute: Nodes
    threshold: Thresholds
    n_children: Nodes
    counts: LeafCounts
    h_max: Annotated[int, Range(min=1, max=64)]
    t: Annotated[int, Range(min=1)]
    neighbours: Literal["add_remove", "replace"]
    spends: Annotated[tuple[dict[str, SpendField], ...], Length(max=128)]


class PfdsPhase(Body, kind="pfds_phase", frozen=True):
    """What comes next, and from which sharers the forwarded trees (``label``) or datasets
    (``train``) came: the receiver checks that it holds exactly those."""

    phase: Literal["label", "train"]
    sharers: Sharers


class PfdsData(Body, kind="pfds_data", frozen=True):
    """A sharer's labelled synthetic records (schema order, categorical codes) and labels (class
    values or real values), and the total eps of the releases behind them."""

    X: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("n", "d"))]
    y: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("n",))]
    epsilon: Annotated[float, Range(min=0.0)]


class PfdsSharedData(Body, kind="pfds_shared_data", frozen=True):
    """The curator forwards one sharer's labelled synthetic records to an agent."""

    sharer: PartyName
    X: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("n", "d"))]
    y: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("n",))]
    epsilon: Annotated[float, Range(min=0.0)]


MESSAGES = (PfdsTree, PfdsSharedTree, PfdsPhase, PfdsData, PfdsSharedData)
"""Every kind of the protocol, in the order of a run."""

PfdsMessage = PfdsTree | PfdsSharedTree | PfdsPhase | PfdsData | PfdsSharedData
"""The protocol's messages: a tagged union, told apart on the wire by the envelope's ``kind``."""
