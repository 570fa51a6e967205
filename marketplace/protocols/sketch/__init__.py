"""Pure core of the `sketch` protocol (docs/design.md §5, M²M): numpy arrays in and out, no I/O.

* :mod:`.domain`: the public box of the records and the M²M prior on it.
* :mod:`.feature_maps`: RFF, RACE and HIST feature maps with their L1/L2 sensitivities.
* :mod:`.release`: an owner's DP sketch (noisy sum and count), merging, save/load (.npz).
* :mod:`.m2m`: the consumer's estimates from a sketch (moments, CDF, covariance, counts, any f).
* :mod:`.logistic`: logistic regression on signed weights (implicit M²M).
* :mod:`.ranking`: MMD^2 between a target and each owner's sketch, ranking, Spearman agreement.
"""

import importlib


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
"""Each public name and the module it comes from: imported on first use (PEP 562), so that loading
the protocol's registration (and with it this package) does not import every core and its
libraries into every process that reads a scenario."""

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


def __getattr__(name: str):
    """The public name ``name``, imported from its module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    imported = importlib.import_module(module, __name__)
    for other, home in _EXPORTS.items():  # every name of that module (and one that has the module's own name)
        if home == module:
            globals()[other] = getattr(imported, other)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
