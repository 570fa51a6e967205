"""The `stc` protocol, private source-target clustering (docs/design.md §6).

The runtime side: :mod:`.plugin` (its registration), :mod:`.config` (the scenario section),
:mod:`.messages` (the wire kinds), :mod:`.curator`, :mod:`.owner` and :mod:`.consumer` (the roles),
:mod:`.exchange` (roles from a scenario; the report, tables and sweep columns) and :mod:`.source`
(the ``stc_synthetic`` data source). They are imported on demand, not by this package.

The pure core, re-exported here (numpy arrays in and out, no I/O), in the order a run uses it:

* :mod:`.scaling` – the public map into the ball of radius 1/2 that the privacy proofs need;
* :mod:`.coreset` – an optional kd-tree coreset of the public target set (cells of diameter <= C);
* :mod:`.release` – the source owner's private releases S': NAS and NNA (Laplace for pure DP,
  Gaussian for zCDP), each a frozen record of what it cost;
* :mod:`.solver` – the consumer's choice of k target points given S' (k-medoids with free
  centres: greedy start + FasterPAM-style swaps), the Cost objective, and the baselines' cores
  (ClusterT, non-private STC);
* :mod:`.private_kmeans` – the paper's PrivateKmeans baseline: DP Lloyd's algorithm on S (Su et
  al. 2016, as diffprivlib's KMeans, which does not import with scikit-learn 1.9), calibrated like NNA;
* :mod:`.synthetic` – the paper's three 2-D synthetic source/target sets.

Not here: the paper's DP-GAN baseline. (The function :func:`private_kmeans` shadows its module's
name on this package; ``importlib.import_module("marketplace.protocols.stc.private_kmeans")``
gives the module.)
"""

from .coreset import DEFAULT_C, Coreset, kdtree_coreset
from .release import (
    DEFAULT_GAMMA,
    NNA_L2_SENSITIVITY,
    NasRelease,
    NnaRelease,
    nas_release,
    nna_partition,
    nna_release,
    nna_threshold,
    t_nearest_means,
)
from .private_kmeans import PrivateKmeansRelease, private_kmeans
from .scaling import RADIUS, PublicScaling, public_scaling
from .solver import StcSolution, cluster_t, nearest_distances, nonprivate_stc, selection_cost, solve_stc, stc_cost
from .synthetic import SYNTHETIC_NAMES, SyntheticSet, synthetic_dataset

__all__ = [
    "DEFAULT_C",
    "DEFAULT_GAMMA",
    "NNA_L2_SENSITIVITY",
    "RADIUS",
    "SYNTHETIC_NAMES",
    "Coreset",
    "NasRelease",
    "NnaRelease",
    "PrivateKmeansRelease",
    "PublicScaling",
    "StcSolution",
    "SyntheticSet",
    "cluster_t",
    "kdtree_coreset",
    "nas_release",
    "nearest_distances",
    "nna_partition",
    "nna_release",
    "nna_threshold",
    "nonprivate_stc",
    "private_kmeans",
    "public_scaling",
    "selection_cost",
    "solve_stc",
    "stc_cost",
    "synthetic_dataset",
    "t_nearest_means",
]
