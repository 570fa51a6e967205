"""The `stc` protocol, private source-target clustering (docs/design.md §6).

The runtime side: :mod:`.plugin` (its registration), :mod:`.config` (the scenario section),
:mod:`.messages` (the wire kinds), :mod:`.curator`, :mod:`.owner` and :mod:`.consumer` (the roles),
:mod:`.exchange` (roles from a scenario; the report), :mod:`.display` (its terminal tables),
:mod:`.sweeps` (its sweep columns, table and plot) and :mod:`.source` (the ``stc_synthetic`` data source). They are
imported on demand, not by this package.

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

import lazy_loader

__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
"""Each name of ``__init__.pyi`` is imported from its module on first use, so reading a scenario does not
import the protocol's cores (and scikit-learn and SciPy with them)."""
