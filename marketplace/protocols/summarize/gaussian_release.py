"""A second private release of a mean h1 embedding: the Gaussian mechanism, accounted in zCDP.

h2 (MWEM, :mod:`.h2`) is the paper's release. This is the plain alternative we measure beside it,
at the same privacy guarantee: add N(0, sigma^2 I) to the sum of the rows' embeddings,
divide by the (public) row count, then clean the result up by post-processing only:

1. **positive-part James–Stein shrinkage towards 0** with the known sigma: when the noise swamps
   the mean (the summary's tiny per-round budget), the release falls back to 0 instead of a random
   vector, which is what MWEM's near-uniform state gives too;
2. **projection onto the box** |g_i| <= sqrt(2/d), which holds for every true mean of h1 rows, so
   it can only bring the release closer to the truth.

Sensitivity. Under replace-one neighbours the sum changes by h1(x') - h1(x); every h1 row has
||h1(x)||_2^2 = (2/d) sum cos^2(.) <= 2, so the L2 sensitivity of the sum is 2 sqrt(2)
(:data:`SUM_L2_SENSITIVITY`). The cost is rho = 8 / (2 sigma^2)-zCDP per release.

>>> from marketplace.privacy.rng import make_rng
>>> phi = np.full((500, 8), 0.25)   # 8 features: bound sqrt(2/8) = 0.5
>>> g = gaussian_mean_release(phi, rho=1e6, rng=make_rng(seed=0, secure=False))
>>> bool(np.abs(g - 0.25).max() < 1e-3)
True
"""

from __future__ import annotations

import math

import numpy as np

from marketplace.privacy.accountant import PrivacyLedger
from marketplace.privacy.mechanisms import GaussianZCDP

__all__ = ["SUM_L2_SENSITIVITY", "gaussian_mean_release", "james_stein"]

SUM_L2_SENSITIVITY = 2.0 * math.sqrt(2.0)
"""How far the sum of h1 rows moves in L2 when one row is replaced."""


def james_stein(noisy: np.ndarray, sigma: float) -> np.ndarray:
    """Positive-part James–Stein shrinkage of ``noisy`` (d,) towards 0 for N(0, sigma^2 I) noise:
    (1 - (d - 2) sigma^2 / ||noisy||^2)_+ * noisy. For d <= 2 it returns ``noisy`` unchanged."""
    d = noisy.shape[0]
    norm2 = float(noisy @ noisy)
    if d <= 2 or norm2 == 0.0:
        return noisy
    return max(0.0, 1.0 - (d - 2) * sigma * sigma / norm2) * noisy


def gaussian_mean_release(
    phi: np.ndarray,
    *,
    rho: float,
    rng: np.random.Generator | None,
    secure: bool = False,
    ledger: PrivacyLedger | None = None,
    mechanism: str = "gaussian mean embedding",
) -> np.ndarray:
    """A rho-zCDP release of the mean of the h1 rows ``phi`` (n, d), shrunk and projected as the
    module explains. Records ``rho`` on ``ledger`` (if given) before drawing any noise."""
    values = np.asarray(phi, dtype=np.float64)
    if values.ndim != 2 or values.shape[0] < 1 or values.shape[1] < 1:
        raise ValueError(
            f"The 'phi' parameter of gaussian_mean_release must be a non-empty (n, d) array. Got shape {values.shape} "
            f"instead."
        )
    if not np.isfinite(values).all():
        raise ValueError("The 'phi' parameter of gaussian_mean_release must be finite. Got a non-finite value instead.")
    n, d = values.shape
    bound = math.sqrt(2.0 / d)
    if np.abs(values).max() > bound * (1 + 1e-9):
        raise ValueError(
            f"The 'phi' parameter of gaussian_mean_release must lie in [-sqrt(2/d), sqrt(2/d)] = "
            f"[-{bound:.6g}, {bound:.6g}] (h1 rows). Got {np.abs(values).max()!r} instead."
        )
    mech = GaussianZCDP(rho=rho, sensitivity=SUM_L2_SENSITIVITY, rng=rng, secure=secure)
    if ledger is not None:  # the continuous Gaussian is accounted exactly; secure mode's discrete one in zCDP
        (ledger.spend_zcdp if secure else ledger.spend_gaussian)(rho, mechanism=mechanism)
    noisy_mean = np.asarray(mech.randomise(values.sum(axis=0)), dtype=np.float64) / n
    shrunk = james_stein(noisy_mean, mech.sigma / n)
    return np.clip(shrunk, -bound, bound)
