"""Pure core of the `pfds` protocol (docs/design.md §4; Fioretto & Van Hentenryck, AAMAS 2019).

Private federated data sharing: every sharer grows a differentially private decision tree and shares
it (:mod:`.tree`), builds a consistent synthetic version of its rows from the tree (:mod:`.synth`),
labels the records by the majority vote of all shared trees (:mod:`.label`) and shares them. The
public attribute domains live in :mod:`.schema`, the budget split and spend records in
:mod:`.budget`, the DP-Pred baselines in :mod:`.baselines`, the two phases of a sharer and the
split of rows among agents in :mod:`.sharer`. numpy arrays in and out, no I/O.
"""

import importlib


_EXPORTS = {
    'NEIGHBOURS': '._checks',
    'MalformedPlain': '._checks',
    'LOSSES': '.baselines',
    'LinearModel': '.baselines',
    'average_regressors': '.baselines',
    'erm_classifier': '.baselines',
    'erm_regressor': '.baselines',
    'functional_mechanism': '.baselines',
    'functional_mechanism_sensitivity': '.baselines',
    'objective_perturbation': '.baselines',
    'vote_classifiers': '.baselines',
    'PfdsBudget': '.budget',
    'Spend': '.budget',
    'ledger_steps': '.budget',
    'split_budget': '.budget',
    'total_epsilon': '.budget',
    'LabelledData': '.label',
    'bucket_of': '.label',
    'draw_in_bucket': '.label',
    'label_synthetic': '.label',
    'majority_vote': '.label',
    'vote_codes': '.label',
    'CategoricalAttribute': '.schema',
    'ClassLabels': '.schema',
    'NumericAttribute': '.schema',
    'PublicSchema': '.schema',
    'RegressionLabels': '.schema',
    'partition_agents': '.sharer',
    'share_data': '.sharer',
    'share_predictor': '.sharer',
    'ConsistentCounts': '.synth',
    'NoisyCounts': '.synth',
    'SyntheticData': '.synth',
    'consistent_counts': '.synth',
    'exact_node_counts': '.synth',
    'noisy_node_counts': '.synth',
    'opt_private_gen': '.synth',
    'synthesize': '.synth',
    'PrivateTree': '.tree',
    'grow_tree': '.tree',
    'max_operator_utilities': '.tree',
    'select_split': '.tree',
}
"""Each public name and the module it comes from: imported on first use (PEP 562), so that loading
the protocol's registration (and with it this package) does not import every core and its
libraries into every process that reads a scenario."""

__all__ = [
    "NEIGHBOURS",
    "MalformedPlain",
    "LOSSES",
    "LinearModel",
    "average_regressors",
    "erm_classifier",
    "erm_regressor",
    "functional_mechanism",
    "functional_mechanism_sensitivity",
    "objective_perturbation",
    "vote_classifiers",
    "PfdsBudget",
    "Spend",
    "ledger_steps",
    "split_budget",
    "total_epsilon",
    "LabelledData",
    "bucket_of",
    "draw_in_bucket",
    "label_synthetic",
    "majority_vote",
    "vote_codes",
    "CategoricalAttribute",
    "ClassLabels",
    "NumericAttribute",
    "PublicSchema",
    "RegressionLabels",
    "partition_agents",
    "share_data",
    "share_predictor",
    "ConsistentCounts",
    "NoisyCounts",
    "SyntheticData",
    "consistent_counts",
    "exact_node_counts",
    "noisy_node_counts",
    "opt_private_gen",
    "synthesize",
    "PrivateTree",
    "grow_tree",
    "max_operator_utilities",
    "select_split",
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
