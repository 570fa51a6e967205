"""Pure core of the `summarize` protocol (docs/design.md §3): h1 features, the derived bid, greedy rules,
baselines and scores. numpy arrays in and out, no I/O.
"""

from marketplace.lazy_exports import lazy_exports

_EXPORTS = {
    'best_offer': '.bid',
    'bid_direction': '.bid',
    'bid_value': '.bid',
    'rff_mmd2_gain': '.bid',
    'rff_objective': '.bid',
    'rff_objective_gain': '.bid',
    'Pool': '.auction',
    'PoolEntry': '.auction',
    'PrivAuction': '.auction',
    'request_probabilities': '.auction',
    'verify': '.auction',
    'RandomFourierFeatures': '.features',
    'MwemState': '.h2',
    'coordinate_sums': '.h2',
    'grid_size': '.h2',
    'grid_values': '.h2',
    'h2_release': '.h2',
    'mwem': '.h2',
    'quantize': '.h2',
    'exact_kernel_greedy': '.greedy',
    'protocol_greedy': '.greedy',
    'rff_greedy_bruteforce': '.greedy',
    'uniform_selection': '.greedy',
    'mean_kernel': '.kernel',
    'mmd2': '.kernel',
    'rbf_kernel': '.kernel',
    'svm_accuracy': '.metrics',
}
"""Each public name and the module it comes from, imported on first use (:mod:`marketplace.lazy_exports`)."""

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

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
