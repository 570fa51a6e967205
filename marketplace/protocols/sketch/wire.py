"""A sketch release and its wire form (``sketch_release``), both ways: the owner sends
:func:`release_body`, the curator reads it back with :func:`release_of`."""

from __future__ import annotations

import numpy as np

from marketplace.protocols.sketch.messages import SketchReleaseBody
from marketplace.protocols.sketch.release import SketchRelease


def release_body(release: SketchRelease) -> SketchReleaseBody:
    """The wire form of a release."""
    return SketchReleaseBody(
        numerator=np.asarray(release.numerator, dtype=np.float64),
        count=float(release.count),
        numerator_variance=release.numerator_variance,
        count_variance=release.count_variance,
        map_fingerprint=release.map_fingerprint,
        epsilon=release.epsilon if release.is_private else None,
        delta=release.delta,
        mechanism=release.mechanism,
    )


def release_of(body: SketchReleaseBody) -> SketchRelease:
    """A release from its wire form (raises ValueError if it is not a valid release)."""
    return SketchRelease(
        numerator=body.numerator,
        count=body.count,
        numerator_variance=body.numerator_variance,
        count_variance=body.count_variance,
        map_fingerprint=body.map_fingerprint,
        epsilon=float("inf") if body.epsilon is None else body.epsilon,
        delta=body.delta,
        mechanism=body.mechanism,
    )
