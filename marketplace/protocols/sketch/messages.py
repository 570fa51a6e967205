"""The message kinds of the `sketch` protocol (docs/design.md §5): msgspec Structs deriving from
:class:`marketplace.messages.kinds.Body`, each naming its wire kind.

Flow: every party says ``hello``; once all are present the curator sends ``sketch_request`` (the
public map's fingerprint) to every owner; each owner answers once with its ``sketch_release`` (the
noisy sum of features and the noisy count, not their ratio, so releases of disjoint datasets
merge by addition); the curator sends the consumer one ``sketch_publication`` (every owner's
release and their merge), then ``shutdown`` to everyone. The consumer's queries afterwards are
post-processing: they send nothing.
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np

from marketplace.messages.arrays import Array, ArraySpec
from marketplace.messages.kinds import Body, PartyName
from marketplace.schema import Length, Range

Fingerprint = Annotated[str, Length(min=64, max=64)]
"""sha256 (hex) of the public feature map: kind, box and parameters (FeatureMap.fingerprint)."""
Variance = Annotated[float, Range(min=0.0)]
Epsilon = Annotated[float, Range(min=0.0, min_open=True)] | None
"""An owner's eps; None for an exact (non-private) release."""
Delta = Annotated[float, Range(min=0.0, max=1.0, max_open=True)]
Mechanism = Literal["laplace", "gaussian", "none"]


Numerator = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("m",))]
"""One sketch's numerator: m coordinates of the public map."""
PerOwner = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("k",))]
"""One number per owner whose release is published (k owners)."""
Numerators = Annotated[np.ndarray, Array, ArraySpec(("<f8",), ("k", "m"))]
"""Every published owner's numerator, one row each."""


class SketchRequest(Body, kind="sketch_request", frozen=True):
    """The curator asks an owner for its one release, naming the public map it must use."""

    map_fingerprint: Fingerprint
    n_features: Annotated[int, Range(min=1)]


class SketchReleaseBody(Body, kind="sketch_release", frozen=True):
    """An owner's DP sketch: sum_i Phi(x_i) + xi and n + zeta, the variances of one coordinate of
    xi and of zeta, and the guarantee it was released under."""

    numerator: Numerator
    count: float
    numerator_variance: Variance
    count_variance: Variance
    map_fingerprint: Fingerprint
    epsilon: Epsilon
    delta: Delta
    mechanism: Mechanism


class SketchPublication(Body, kind="sketch_publication", frozen=True):
    """The curator's publication to the consumer: every accepted release (row i is ``owners[i]``'s)
    and their merge (numerators and counts added; ``merged_*`` must equal those sums)."""

    owners: Annotated[tuple[PartyName, ...], Length(min=1)]
    numerators: Numerators
    counts: PerOwner
    numerator_variances: PerOwner
    count_variances: PerOwner
    epsilons: tuple[Epsilon, ...]
    deltas: tuple[Delta, ...]
    mechanisms: tuple[Mechanism, ...]
    map_fingerprint: Fingerprint
    merged_numerator: Numerator
    merged_count: float


MESSAGES = (SketchRequest, SketchReleaseBody, SketchPublication)
"""Every kind of the protocol, in the order of the flow."""

SketchMessage = SketchRequest | SketchReleaseBody | SketchPublication
"""A body of the protocol: told apart on the wire by the envelope's ``kind``."""
