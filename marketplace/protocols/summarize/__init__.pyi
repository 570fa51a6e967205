"""Type stub of :mod:`marketplace.protocols.summarize`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from .auction import (
    Pool as Pool,
)
from .auction import (
    PoolEntry as PoolEntry,
)
from .auction import (
    PrivAuction as PrivAuction,
)
from .auction import (
    request_probabilities as request_probabilities,
)
from .auction import (
    verify as verify,
)
from .bid import (
    best_offer as best_offer,
)
from .bid import (
    bid_direction as bid_direction,
)
from .bid import (
    bid_value as bid_value,
)
from .bid import (
    rff_mmd2_gain as rff_mmd2_gain,
)
from .bid import (
    rff_objective as rff_objective,
)
from .bid import (
    rff_objective_gain as rff_objective_gain,
)
from .bid import (
    stacked_best_rows as stacked_best_rows,
)
from .features import (
    RandomFourierFeatures as RandomFourierFeatures,
)
from .greedy import (
    exact_kernel_greedy as exact_kernel_greedy,
)
from .greedy import (
    protocol_greedy as protocol_greedy,
)
from .greedy import (
    rff_greedy_bruteforce as rff_greedy_bruteforce,
)
from .greedy import (
    uniform_selection as uniform_selection,
)
from .h2 import (
    MwemState as MwemState,
)
from .h2 import (
    coordinate_sums as coordinate_sums,
)
from .h2 import (
    grid_size as grid_size,
)
from .h2 import (
    grid_values as grid_values,
)
from .h2 import (
    h2_release as h2_release,
)
from .h2 import (
    mwem as mwem,
)
from .h2 import (
    quantize as quantize,
)
from .kernel import (
    mean_kernel as mean_kernel,
)
from .kernel import (
    mmd2 as mmd2,
)
from .kernel import (
    rbf_kernel as rbf_kernel,
)
from .metrics import (
    svm_accuracy as svm_accuracy,
)
