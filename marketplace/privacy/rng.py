"""Where randomness comes from: the run seed in simulation, the operating system in ``secure`` mode.

The policy, in two rules:

* **Simulation** (``secure=False``): everything is reproducible from the run seed. ``make_rng``
  needs a seed (an int or a ``numpy.random.SeedSequence``, usually ``marketplace.seeds.derive(seed,
  purpose)``), and the mechanisms draw their noise from the generator they are given, with numpy's
  floating-point samplers. Those samplers are fine for measuring utility but are *not* safe to
  release: a floating-point Laplace sample leaks its input through its low-order bits (Mironov 2012).
* **Secure** (``secure=True``): noise never comes from a seeded PRNG. A mechanism built with
  ``secure=True`` ignores the generator for its noise and calls OpenDP's exact samplers (discrete
  Laplace / Gaussian on a power-of-two grid, exact Gumbel / exponential selection), which draw from
  the library's cryptographically secure, OS-seeded generator. ``make_rng(secure=True)`` ignores any
  seed and returns a :class:`SecureGenerator` seeded with 128 bits from :mod:`secrets`, for the
  randomness that is not privacy noise (shuffles, tie-breaks); two calls never agree.

A :class:`SecureGenerator` handed to a mechanism with ``secure=False`` is refused, so a deployment
cannot fall back to floating-point noise by forgetting the flag.

>>> a = make_rng(seed=7, secure=False).random(3)
>>> b = make_rng(seed=7, secure=False).random(3)
>>> bool((a == b).all())
True
>>> c = make_rng(seed=7, secure=True).random(3)
>>> d = make_rng(seed=7, secure=True).random(3)
>>> bool((c == d).all())
False
"""

from __future__ import annotations

import numbers
import secrets

import numpy as np

__all__ = ["SecureGenerator", "make_rng", "is_secure"]

ENTROPY_BITS = 128


class SecureGenerator(np.random.Generator):
    """A numpy Generator seeded from OS entropy; it marks a run as ``secure``.

    It is an ordinary PCG64DXSM stream, so it is meant for randomness that is not privacy noise.
    Mechanisms in secure mode take their noise from OpenDP, never from this object.
    """

    secure = True

    def __init__(self) -> None:
        seed = np.random.SeedSequence(secrets.randbits(ENTROPY_BITS))
        super().__init__(np.random.PCG64DXSM(seed))

    # A copy must not repeat the stream: unpickling draws fresh entropy. numpy's stub types
    # Generator.__reduce__ as its own (constructor, (bit_generator,), None) shape; the pickle
    # protocol lets a subclass reduce to any callable and arguments, as this one does.
    def __reduce__(self) -> tuple[type[SecureGenerator], tuple[()]]:  # type: ignore[override]
        return (SecureGenerator, ())


def make_rng(*, seed: int | np.random.SeedSequence | None, secure: bool) -> np.random.Generator:
    """The generator for one party and purpose, under the policy in the module docstring.

    ``secure=False`` needs ``seed`` (reproducible simulation); ``secure=True`` ignores it.
    """
    if not isinstance(secure, bool):
        raise TypeError(f"The 'secure' parameter of make_rng must be a bool. Got {secure!r} instead.")
    if secure:
        return SecureGenerator()
    if seed is None:
        raise ValueError(
            "The 'seed' parameter of make_rng must be an int or a numpy.random.SeedSequence in "
            "simulation (secure=False), so that the run is reproducible. Got None instead; pass the "
            "run seed, or secure=True for OS entropy."
        )
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            "The 'seed' parameter of make_rng must be an int or a numpy.random.SeedSequence. "
            f"Got {type(seed).__name__} instead."
        )
    if seed < 0:
        raise ValueError(f"The 'seed' parameter of make_rng must be a non-negative int. Got {seed} instead.")
    return np.random.default_rng(int(seed))


def is_secure(rng: object) -> bool:
    """True for a generator made by ``make_rng(secure=True)``."""
    return isinstance(rng, SecureGenerator)
