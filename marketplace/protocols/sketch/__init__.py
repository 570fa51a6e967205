"""Pure core of the `sketch` protocol (docs/design.md §5, M²M): numpy arrays in and out, no I/O.

* :mod:`.domain`: the public box of the records and the M²M prior on it.
* :mod:`.feature_maps`: RFF, RACE and HIST feature maps with their L1/L2 sensitivities.
* :mod:`.release`: an owner's DP sketch (noisy sum and count), merging, save/load (.npz).
* :mod:`.m2m`: the consumer's estimates from a sketch (moments, CDF, covariance, counts, any f).
* :mod:`.logistic`: logistic regression on signed weights (implicit M²M).
* :mod:`.ranking`: MMD^2 between a target and each owner's sketch, ranking, Spearman agreement.
"""

from .domain import Box, Prior
from .feature_maps import RACE, RFF, FeatureMap, Histogram
from .logistic import LogisticModel, weighted_logistic_regression
from .m2m import REGULARIZATION_RULES, M2MDesign, M2MFit, fit_m2m
from .ranking import OwnerRanking, mean_embedding, rank_owners, sketch_mmd2, spearman_agreement
from .release import DEFAULT_NUMERATOR_SHARE, SketchFileError, SketchRelease, exact_sketch, merge_sketches, private_sketch

__all__ = [
    "Box",
    "DEFAULT_NUMERATOR_SHARE",
    "FeatureMap",
    "Histogram",
    "LogisticModel",
    "M2MDesign",
    "M2MFit",
    "OwnerRanking",
    "Prior",
    "RACE",
    "REGULARIZATION_RULES",
    "RFF",
    "SketchFileError",
    "SketchRelease",
    "exact_sketch",
    "fit_m2m",
    "mean_embedding",
    "merge_sketches",
    "private_sketch",
    "rank_owners",
    "sketch_mmd2",
    "spearman_agreement",
    "weighted_logistic_regression",
]
