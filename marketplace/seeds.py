"""One seed drives a run: every party and purpose gets its own stream derived from it.

``derive(seed, "h1")`` always gives the same ``SeedSequence`` for the same seed and purpose, in any
process, so parties agree on public randomness (the RFF map) without talking, and adding a new
purpose never shifts the streams of the others.
"""

from __future__ import annotations

import hashlib

import numpy as np


def purpose_key(purpose: str) -> int:
    """A stable 32-bit number for a purpose name (Python's hash() is salted per process)."""
    return int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:4], "little")


def derive(seed: int, purpose: str) -> np.random.SeedSequence:
    """The seed sequence for ``purpose`` within the run seeded by ``seed``."""
    return np.random.SeedSequence(entropy=seed, spawn_key=(purpose_key(purpose),))


def rng(seed: int, purpose: str) -> np.random.Generator:
    return np.random.default_rng(derive(seed, purpose))


def derive_int(seed: int, purpose: str) -> int:
    """A derived 31-bit integer seed, for libraries that take an int (scikit-learn)."""
    return int(derive(seed, purpose).generate_state(1)[0] & 0x7FFFFFFF)
