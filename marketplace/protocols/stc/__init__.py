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

Not here: the paper's DP-GAN baseline. (The function :func:`private_kmeans` has its module's name:
``from marketplace.protocols.stc.private_kmeans import private_kmeans`` names the function whatever
was imported before; on this package, the name is the function until the module is imported.)
"""

from marketplace.lazy_exports import lazy_exports

_EXPORTS = {
    'private_kmeans': '.private_kmeans',
    'DEFAULT_C': '.coreset',
    'Coreset': '.coreset',
    'kdtree_coreset': '.coreset',
    'DEFAULT_GAMMA': '.release',
    'NNA_L2_SENSITIVITY': '.release',
    'NasRelease': '.release',
    'NnaRelease': '.release',
    'nas_release': '.release',
    'nna_partition': '.release',
    'nna_release': '.release',
    'nna_threshold': '.release',
    't_nearest_means': '.release',
    'PrivateKmeansRelease': '.private_kmeans',
    'RADIUS': '.scaling',
    'PublicScaling': '.scaling',
    'public_scaling': '.scaling',
    'StcSolution': '.solver',
    'cluster_t': '.solver',
    'nearest_distances': '.solver',
    'nonprivate_stc': '.solver',
    'selection_cost': '.solver',
    'solve_stc': '.solver',
    'stc_cost': '.solver',
    'SYNTHETIC_NAMES': '.synthetic',
    'SyntheticSet': '.synthetic',
    'synthetic_dataset': '.synthetic',
}
"""Each public name and the module it comes from, imported on first use (:mod:`marketplace.lazy_exports`)."""

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

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
