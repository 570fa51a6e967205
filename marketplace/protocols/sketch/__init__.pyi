"""Type stub of :mod:`marketplace.protocols.sketch`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .domain import (
    Box as Box,
)
from .domain import (
    Prior as Prior,
)
from .feature_maps import (
    RACE as RACE,
)
from .feature_maps import (
    RFF as RFF,
)
from .feature_maps import (
    FeatureMap as FeatureMap,
)
from .feature_maps import (
    Histogram as Histogram,
)
from .logistic import (
    LogisticModel as LogisticModel,
)
from .logistic import (
    weighted_logistic_regression as weighted_logistic_regression,
)
from .m2m import (
    REGULARIZATION_RULES as REGULARIZATION_RULES,
)
from .m2m import (
    M2MDesign as M2MDesign,
)
from .m2m import (
    M2MFit as M2MFit,
)
from .m2m import (
    fit_m2m as fit_m2m,
)
from .ranking import (
    OwnerRanking as OwnerRanking,
)
from .ranking import (
    mean_embedding as mean_embedding,
)
from .ranking import (
    rank_owners as rank_owners,
)
from .ranking import (
    sketch_mmd2 as sketch_mmd2,
)
from .ranking import (
    spearman_agreement as spearman_agreement,
)
from .release import (
    DEFAULT_NUMERATOR_SHARE as DEFAULT_NUMERATOR_SHARE,
)
from .release import (
    SketchFileError as SketchFileError,
)
from .release import (
    SketchRelease as SketchRelease,
)
from .release import (
    exact_sketch as exact_sketch,
)
from .release import (
    merge_sketches as merge_sketches,
)
from .release import (
    private_sketch as private_sketch,
)
