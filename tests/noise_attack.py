"""The noise-recovery attack, as a party of a run would try it: recompute an owner's sketch noise
from what the party holds (the run seed, and at most its own noise key) and subtract it from the
owner's release. Against noise drawn from the seed alone it recovers the owner's exact count and
feature sums; against an owner's own secret key it recovers nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from marketplace import plugins
from marketplace.parties import make_world, party_ids
from marketplace.privacy import noise
from marketplace.protocols.sketch.exchange import public_map, unit_records
from marketplace.protocols.sketch.release import SketchRelease, private_sketch
from marketplace.scenario import Scenario


def recompute_noise(scenario: Scenario, owner: str, origin: noise.NoiseOrigin | None) -> SketchRelease:
    """The owner's noise as whoever holds ``origin`` (None: the seed alone) would draw it: the
    release of an empty dataset with the same stream, so its sums and count are the noise itself."""
    s = scenario.config.sketch
    fmap = public_map(scenario.config)
    rng = np.random.default_rng(noise.derive(scenario.config.seed, f"sketch.noise.{owner}", origin))
    dim = len(s.lower) + (1 if s.include_label else 0)
    return private_sketch(
        np.zeros((0, dim)),
        fmap,
        epsilon=s.epsilon,
        rng=rng,
        mechanism=s.mechanism,
        delta=s.delta if s.mechanism == "gaussian" else None,
        numerator_share=s.numerator_share,
        precision=s.precision,
    )


def attack(run_dir: Path, scenario: Scenario, owner: str, origin: noise.NoiseOrigin | None = None) -> dict[str, float]:
    """Strip the recomputed noise from ``owner``'s release in ``run_dir``; return how far the result
    is from the owner's true count and sums (0 and ~1e-12: the attack succeeded)."""
    released = SketchRelease.load(run_dir / "sketches" / f"{owner}.npz")
    guess = recompute_noise(scenario, owner, origin)
    world = make_world(scenario.config, plugins.exchange(scenario.config.protocol))
    rows = unit_records(scenario.config, world.owners[party_ids(scenario.config).index(owner) - 1])
    true_sums = public_map(scenario.config).sum_features(rows, precision="float64")
    count = released.count - guess.count
    sums = np.asarray(released.numerator) - np.asarray(guess.numerator)
    return {
        "true_count": float(len(rows)),
        "released_count": float(released.count),
        "recovered_count": float(count),
        "count_error": abs(float(count) - len(rows)),
        "sums_error": float(np.max(np.abs(sums - true_sums)) / max(1.0, float(np.max(np.abs(true_sums))))),
    }
