"""Type stub of :mod:`marketplace.protocols.stc`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .private_kmeans import (
    private_kmeans as private_kmeans,
    PrivateKmeansRelease as PrivateKmeansRelease,
)
from .coreset import (
    DEFAULT_C as DEFAULT_C,
    Coreset as Coreset,
    kdtree_coreset as kdtree_coreset,
)
from .release import (
    DEFAULT_GAMMA as DEFAULT_GAMMA,
    NNA_L2_SENSITIVITY as NNA_L2_SENSITIVITY,
    NasRelease as NasRelease,
    NnaRelease as NnaRelease,
    nas_release as nas_release,
    nna_partition as nna_partition,
    nna_release as nna_release,
    nna_threshold as nna_threshold,
    t_nearest_means as t_nearest_means,
)
from .scaling import (
    RADIUS as RADIUS,
    PublicScaling as PublicScaling,
    public_scaling as public_scaling,
)
from .solver import (
    StcSolution as StcSolution,
    cluster_t as cluster_t,
    nearest_distances as nearest_distances,
    nonprivate_stc as nonprivate_stc,
    selection_cost as selection_cost,
    solve_stc as solve_stc,
    stc_cost as stc_cost,
)
from .synthetic import (
    SYNTHETIC_NAMES as SYNTHETIC_NAMES,
    SyntheticSet as SyntheticSet,
    synthetic_dataset as synthetic_dataset,
)
