"""Pure core of the `summarize` protocol (docs/design.md §3): h1 features, the derived bid, greedy rules,
baselines and scores. numpy arrays in and out, no I/O.
"""

import importlib


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
"""Each public name and the module it comes from: imported on first use (PEP 562), so that loading
the protocol's registration (and with it this package) does not import every core and its
libraries into every process that reads a scenario."""

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


def __getattr__(name: str):
    """The public name ``name``, imported from its module on first use."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    imported = importlib.import_module(module, __name__)
    for other, home in _EXPORTS.items():  # every name of that module (and one that has the module's own name)
        if home == module:
            globals()[other] = getattr(imported, other)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
