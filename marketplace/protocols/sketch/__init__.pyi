"""Type stub of :mod:`marketplace.protocols.sketch`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .domain import (
    Box as Box,
    Prior as Prior,
)
from .feature_maps import (
    RACE as RACE,
    RFF as RFF,
    FeatureMap as FeatureMap,
    Histogram as Histogram,
)
from .logistic import (
    LogisticModel as LogisticModel,
    weighted_logistic_regression as weighted_logistic_regression,
)
from .m2m import (
    REGULARIZATION_RULES as REGULARIZATION_RULES,
    M2MDesign as M2MDesign,
    M2MFit as M2MFit,
    fit_m2m as fit_m2m,
)
from .ranking import (
    OwnerRanking as OwnerRanking,
    mean_embedding as mean_embedding,
    rank_owners as rank_owners,
    sketch_mmd2 as sketch_mmd2,
    spearman_agreement as spearman_agreement,
)
from .release import (
    DEFAULT_NUMERATOR_SHARE as DEFAULT_NUMERATOR_SHARE,
    SketchFileError as SketchFileError,
    SketchRelease as SketchRelease,
    exact_sketch as exact_sketch,
    merge_sketches as merge_sketches,
    private_sketch as private_sketch,
)
