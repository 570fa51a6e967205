"""The message kinds of the `sketch` protocol (docs/design.md §5), registered with
:func:`marketplace.messages.kinds.kind`.

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
from marketplace.messages.kinds import PartyName, kind
from marketplace.schema import Length, Range

Fingerprint = Annotated[str, Length(min=64, max=64)]
"""sha256 (hex) of the public feature map: kind, box and parameters (FeatureMap.fingerprint)."""
Variance = Annotated[float, Range(min=0.0)]
Epsilon = Annotated[float, Range(min=0.0, min_open=True)] | None
"""An owner's eps; None for an exact (non-private) release."""
Delta = Annotated[float, Range(min=0.0, max=1.0, max_open=True)]
Mechanism = Literal["laplace", "gaussian", "none"]


def _array(*dims: str) -> object:
    return Annotated[np.ndarray, Array, ArraySpec(("<f8",), dims)]


@kind("sketch_request")
class SketchRequest:
    """The curator asks an owner for its one release, naming the public map it must use."""

    map_fingerprint: Fingerprint
    n_features: Annotated[int, Range(min=1)]


@kind("sketch_release")
class SketchReleaseBody:
    """An owner's DP sketch: sum_i Phi(x_i) + xi and n + zeta, the variances of one coordinate of
    xi and of zeta, and the guarantee it was released under."""

    numerator: _array("m")
    count: float
    numerator_variance: Variance
    count_variance: Variance
    map_fingerprint: Fingerprint
    epsilon: Epsilon
    delta: Delta
    mechanism: Mechanism


@kind("sketch_publication")
class SketchPublication:
    """The curator's publication to the consumer: every accepted release (row i is ``owners[i]``'s)
    and their merge (numerators and counts added; ``merged_*`` must equal those sums)."""

    owners: Annotated[tuple[PartyName, ...], Length(min=1)]
    numerators: _array("k", "m")
    counts: _array("k")
    numerator_variances: _array("k")
    count_variances: _array("k")
    epsilons: tuple[Epsilon, ...]
    deltas: tuple[Delta, ...]
    mechanisms: tuple[Mechanism, ...]
    map_fingerprint: Fingerprint
    merged_numerator: _array("m")
    merged_count: float


MESSAGES = (SketchRequest, SketchReleaseBody, SketchPublication)
"""Every kind of the protocol, in the order of the flow."""

SketchMessage = SketchRequest | SketchReleaseBody | SketchPublication
"""A body of the protocol: told apart on the wire by the envelope's ``kind``."""
