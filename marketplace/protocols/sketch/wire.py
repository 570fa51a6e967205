"""A sketch release and its wire form (``sketch_release``), both ways: the owner sends
:func:`release_body`, the curator reads it back with :func:`release_of`."""

from __future__ import annotations

import numpy as np

from marketplace.protocols.sketch.messages import Mechanism, SketchReleaseBody
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
        mechanism=wire_mechanism(release.mechanism),
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


def wire_mechanism(mechanism: str) -> Mechanism:
    """A single release's mechanism as the wire names it; a merge's ("gaussian+laplace") has no wire form."""
    match mechanism:
        case "laplace" | "gaussian" | "none":
            return mechanism
    raise ValueError(f"a release under {mechanism!r} has no wire form: one owner's release has one mechanism")
