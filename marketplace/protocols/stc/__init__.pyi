"""Type stub of :mod:`marketplace.protocols.stc`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .coreset import (
    DEFAULT_C as DEFAULT_C,
)
from .coreset import (
    Coreset as Coreset,
)
from .coreset import (
    kdtree_coreset as kdtree_coreset,
)
from .private_kmeans import (
    PrivateKmeansRelease as PrivateKmeansRelease,
)
from .private_kmeans import (
    private_kmeans as private_kmeans,
)
from .release import (
    DEFAULT_GAMMA as DEFAULT_GAMMA,
)
from .release import (
    NNA_L2_SENSITIVITY as NNA_L2_SENSITIVITY,
)
from .release import (
    NasRelease as NasRelease,
)
from .release import (
    NnaRelease as NnaRelease,
)
from .release import (
    nas_release as nas_release,
)
from .release import (
    nna_partition as nna_partition,
)
from .release import (
    nna_release as nna_release,
)
from .release import (
    nna_threshold as nna_threshold,
)
from .release import (
    t_nearest_means as t_nearest_means,
)
from .scaling import (
    RADIUS as RADIUS,
)
from .scaling import (
    PublicScaling as PublicScaling,
)
from .scaling import (
    public_scaling as public_scaling,
)
from .solver import (
    StcSolution as StcSolution,
)
from .solver import (
    cluster_t as cluster_t,
)
from .solver import (
    nearest_distances as nearest_distances,
)
from .solver import (
    nonprivate_stc as nonprivate_stc,
)
from .solver import (
    selection_cost as selection_cost,
)
from .solver import (
    solve_stc as solve_stc,
)
from .solver import (
    stc_cost as stc_cost,
)
from .synthetic import (
    SYNTHETIC_NAMES as SYNTHETIC_NAMES,
)
from .synthetic import (
    SyntheticSet as SyntheticSet,
)
from .synthetic import (
    synthetic_dataset as synthetic_dataset,
)
