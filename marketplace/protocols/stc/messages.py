"""Message kinds of the `stc` protocol (private source-target clustering, docs/design.md §6).

Flow: every party says ``hello``; the consumer sends its target set T (``stc_target``: public by
the protocol's design, it is what the consumer wants labelled); the curator forwards it to every
owner (``stc_request``); each owner answers once with its private release S' (``stc_release``,
with what it cost); the curator forwards all releases to the consumer (``stc_releases``), which
chooses its k points alone. No owner's raw point travels.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np

from marketplace.messages.arrays import Array, ArraySpec
from marketplace.messages.kinds import Body, PartyName
from marketplace.schema import Length, Range

Points = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("m", "dim"))]


class StcTarget(Body, kind="stc_target", frozen=True):
    """The consumer's target points T (or their coreset), in the data's own units."""

    points: Points


class StcRequest(Body, kind="stc_request", frozen=True):
    """The curator asks an owner for its release S' computed against these target points."""

    points: Points


class StcRelease(Body, kind="stc_release", frozen=True):
    """An owner's private release S' (points in the public scaled space, radius 1/2) and its cost."""

    centers: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("c", "dim"))]
    method: Literal["nna", "nas"]
    notion: Literal["dp", "zcdp"]
    cost: Annotated[float, Range(min=0.0, min_open=True)]
    """eps under dp, rho under zcdp."""


class StcReleases(Body, kind="stc_releases", frozen=True):
    """Every release the curator received, stacked: ``counts[i]`` rows of ``centers`` came from
    ``owners[i]``, in that order."""

    centers: Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("c", "dim"))]
    counts: Annotated[np.ndarray, Array, ArraySpec(("<i8",), ("k",))]
    owners: Annotated[tuple[PartyName, ...], Length(max=4096)]


MESSAGES = (StcTarget, StcRequest, StcRelease, StcReleases)
"""Every kind of the protocol, in the order a run sends them."""

StcMessage = StcTarget | StcRequest | StcRelease | StcReleases
"""A body of the `stc` protocol: a tagged union, told apart on the wire by the envelope's ``kind``."""
