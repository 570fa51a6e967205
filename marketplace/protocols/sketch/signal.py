"""Whether a released sketch still carries its data, or its noise swamps it (a *collapse*).

At a small eps the Laplace or Gaussian noise on a sketch can be larger than what it adds up: the
noisy count goes near or below zero (M²M then floors the size at 1), the numerator is mostly noise,
and every estimate drifts to what the prior alone gives (the centre of the box). Such a release can
still score well by chance on one error metric (a mean at the centre of a symmetric mixture), so a
report must say that the release collapsed instead of offering its figures as usable.

Two signal-to-noise ratios of the merged release, from what it publishes alone (its count, its
numerator and their noise variances), so computing them is post-processing and costs no privacy:

* ``count_snr`` = count / sd(count noise);
* ``numerator_snr`` = sqrt(max(0, ||numerator||^2 - m var)) / sqrt(m var): the numerator's energy
  above what its noise alone would give, against that noise (about 0 when the numerator is noise).

A release is flagged as collapsed when ``count_snr`` < :data:`COUNT_SNR_FLOOR` or ``numerator_snr`` <
:data:`NUMERATOR_SNR_FLOOR`. An exact sketch (no noise) never collapses. On the quickstart (4 owners,
11,400 rows, m = 200), seeds 1 to 10, measured with
``marketplace run scenarios/sketch-quickstart.yaml --driver inprocess --set sketch.epsilon=EPS
--set seed=N`` (the processes driver gives the same figures), the lowest and highest of the ten
(the median in brackets), and the report's ``metrics.errors.cdf_mae``:

=====  ======================  ======================  ===========================  =========
eps    count_snr               numerator_snr           CDF error                    collapsed
=====  ======================  ======================  ===========================  =========
1      77.5 to 83.0 (80.3)     16.4 to 18.1 (17.3)     0.032 to 0.051 (0.044)       0 of 10
0.05   0.98 to 6.37 (3.69)     0.75 to 0.98 (0.85)     0.063 to 0.33 (0.11)         10 of 10
0.005  -2.64 to 2.75 (0.06)    0 to 0.36 (0)           0.18 to 0.51 (0.30)          10 of 10
=====  ======================  ======================  ===========================  =========

At eps = 0.05 the count's noise (Laplace, sd 2,800 against a count of 11,400) makes one seed's
``count_snr`` a poor guide: the quickstart's own seed 7 gives the lowest of the ten (0.99, with the
highest CDF error, 0.33), seeds 1 to 3 give 4.1 to 5.1. Every one of those releases collapses by its
``numerator_snr``, below 1 in all ten.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from marketplace.protocols.sketch.release import SketchRelease

COUNT_SNR_FLOOR = 3.0
"""Below this, the noisy count is within three noise standard deviations of zero."""
NUMERATOR_SNR_FLOOR = 1.0
"""Below this, the numerator's signal is smaller than its noise."""


def release_signal(release: SketchRelease) -> dict[str, Any]:
    """The signal-to-noise ratios of ``release`` and whether it collapsed (module docstring); ``why``
    names the ratio that fell below its floor (None when it did not collapse)."""
    numerator = np.asarray(release.numerator, dtype=float)
    m = numerator.size
    count_sd = math.sqrt(release.count_variance)
    noise_energy = m * release.numerator_variance
    count_snr = release.count / count_sd if count_sd > 0 else math.inf
    numerator_snr = (
        math.sqrt(max(0.0, float(numerator @ numerator) - noise_energy) / noise_energy)
        if noise_energy > 0
        else math.inf
    )
    why = []
    if count_snr < COUNT_SNR_FLOOR:
        why.append(
            f"the noisy count ({release.count:.4g}) is less than {COUNT_SNR_FLOOR:g} noise standard deviations "
            f"({count_sd:.4g} each) above zero"
        )
    if numerator_snr < NUMERATOR_SNR_FLOOR:
        why.append(f"the numerator's signal is below its noise (signal-to-noise {numerator_snr:.3g})")
    return {
        "count_snr": _finite(count_snr),
        "numerator_snr": _finite(numerator_snr),
        "collapsed": bool(why),
        "why": "; ".join(why) or None,
    }


def _finite(value: float) -> float | None:
    """JSON holds no infinity: None stands for an exact (noise-free) release's ratio."""
    return float(value) if math.isfinite(value) else None
