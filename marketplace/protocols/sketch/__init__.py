"""Pure core of the `sketch` protocol (docs/design.md §5, M²M): numpy arrays in and out, no I/O.

* :mod:`.domain`: the public box of the records and the M²M prior on it.
* :mod:`.feature_maps`: RFF, RACE and HIST feature maps with their L1/L2 sensitivities.
* :mod:`.release`: an owner's DP sketch (noisy sum and count), merging, save/load (.npz).
* :mod:`.m2m`: the consumer's estimates from a sketch (moments, CDF, covariance, counts, any f).
* :mod:`.logistic`: logistic regression on signed weights (implicit M²M).
* :mod:`.ranking`: MMD^2 between a target and each owner's sketch, ranking, Spearman agreement.
"""

from marketplace.lazy_exports import lazy_exports

_EXPORTS = {
    'Box': '.domain',
    'Prior': '.domain',
    'RACE': '.feature_maps',
    'RFF': '.feature_maps',
    'FeatureMap': '.feature_maps',
    'Histogram': '.feature_maps',
    'LogisticModel': '.logistic',
    'weighted_logistic_regression': '.logistic',
    'REGULARIZATION_RULES': '.m2m',
    'M2MDesign': '.m2m',
    'M2MFit': '.m2m',
    'fit_m2m': '.m2m',
    'OwnerRanking': '.ranking',
    'mean_embedding': '.ranking',
    'rank_owners': '.ranking',
    'sketch_mmd2': '.ranking',
    'spearman_agreement': '.ranking',
    'DEFAULT_NUMERATOR_SHARE': '.release',
    'SketchFileError': '.release',
    'SketchRelease': '.release',
    'exact_sketch': '.release',
    'merge_sketches': '.release',
    'private_sketch': '.release',
}
"""Each public name and the module it comes from, imported on first use (:mod:`marketplace.lazy_exports`)."""

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

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
