"""Type stub of :mod:`marketplace.protocols.summarize`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .bid import (
    best_offer as best_offer,
    bid_direction as bid_direction,
    bid_value as bid_value,
    rff_mmd2_gain as rff_mmd2_gain,
    rff_objective as rff_objective,
    rff_objective_gain as rff_objective_gain,
)
from .auction import (
    Pool as Pool,
    PoolEntry as PoolEntry,
    PrivAuction as PrivAuction,
    request_probabilities as request_probabilities,
    verify as verify,
)
from .features import (
    RandomFourierFeatures as RandomFourierFeatures,
)
from .h2 import (
    MwemState as MwemState,
    coordinate_sums as coordinate_sums,
    grid_size as grid_size,
    grid_values as grid_values,
    h2_release as h2_release,
    mwem as mwem,
    quantize as quantize,
)
from .greedy import (
    exact_kernel_greedy as exact_kernel_greedy,
    protocol_greedy as protocol_greedy,
    rff_greedy_bruteforce as rff_greedy_bruteforce,
    uniform_selection as uniform_selection,
)
from .kernel import (
    mean_kernel as mean_kernel,
    mmd2 as mmd2,
    rbf_kernel as rbf_kernel,
)
from .metrics import (
    svm_accuracy as svm_accuracy,
)
