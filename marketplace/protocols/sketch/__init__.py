"""Pure core of the `sketch` protocol (docs/design.md §5, M²M): numpy arrays in and out, no I/O.

* :mod:`.domain`: the public box of the records and the M²M prior on it.
* :mod:`.feature_maps`: RFF, RACE and HIST feature maps with their L1/L2 sensitivities.
* :mod:`.release`: an owner's DP sketch (noisy sum and count), merging, save/load (.npz).
* :mod:`.m2m`: the consumer's estimates from a sketch (moments, CDF, covariance, counts, any f).
* :mod:`.design_cache`: M²M designs kept on disk between processes (public: built from public settings).
* :mod:`.isotonic`: bounded isotonic regression (the projections' CDFs and moments) without scikit-learn.
* :mod:`.logistic`: logistic regression on signed weights (implicit M²M).
* :mod:`.ranking`: MMD^2 between a target and each owner's sketch, ranking, Spearman agreement.
"""

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
"""Each name of ``__init__.pyi`` is imported from its module on first use, so reading a scenario does not
import the protocol's cores (and scikit-learn and SciPy with them)."""
