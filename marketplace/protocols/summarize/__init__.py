"""Pure core of the `summarize` protocol (docs/design.md §3): h1 features, the derived bid, greedy rules,
baselines and scores. numpy arrays in and out, no I/O.
"""

from .bid import best_offer, bid_direction, bid_value, rff_mmd2_gain, rff_objective, rff_objective_gain
from .auction import Pool, PoolEntry, PrivAuction, request_probabilities, verify
from .features import RandomFourierFeatures
from .h2 import MwemState, coordinate_sums, grid_size, grid_values, h2_release, mwem, quantize
from .greedy import exact_kernel_greedy, protocol_greedy, rff_greedy_bruteforce, uniform_selection
from .kernel import mean_kernel, mmd2, rbf_kernel
from .metrics import svm_accuracy

__all__ = [
    "MwemState",
    "Pool",
    "PoolEntry",
    "PrivAuction",
    "RandomFourierFeatures",
    "coordinate_sums",
    "grid_size",
    "grid_values",
    "h2_release",
    "mwem",
    "quantize",
    "request_probabilities",
    "verify",
    "best_offer",
    "bid_direction",
    "bid_value",
    "exact_kernel_greedy",
    "mean_kernel",
    "mmd2",
    "protocol_greedy",
    "rbf_kernel",
    "rff_greedy_bruteforce",
    "rff_mmd2_gain",
    "rff_objective",
    "rff_objective_gain",
    "svm_accuracy",
    "uniform_selection",
]
