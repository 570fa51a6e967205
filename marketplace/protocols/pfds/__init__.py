"""Pure core of the `pfds` protocol (docs/design.md §4; Fioretto & Van Hentenryck, AAMAS 2019).

Private federated data sharing: every sharer grows a differentially private decision tree and shares
it (:mod:`.tree`), builds a consistent synthetic version of its rows from the tree (:mod:`.synth`),
labels the records by the majority vote of all shared trees (:mod:`.label`) and shares them. The
public attribute domains live in :mod:`.schema`, the budget split and spend records in
:mod:`.budget`, the DP-Pred baselines in :mod:`.baselines`, the two phases of a sharer and the
split of rows among agents in :mod:`.sharer`. numpy arrays in and out, no I/O.
"""

from ._checks import NEIGHBOURS, MalformedPlain
from .baselines import (
    LOSSES,
    LinearModel,
    average_regressors,
    erm_classifier,
    erm_regressor,
    functional_mechanism,
    functional_mechanism_sensitivity,
    objective_perturbation,
    vote_classifiers,
)
from .budget import PfdsBudget, Spend, ledger_steps, split_budget, total_epsilon
from .label import LabelledData, bucket_of, draw_in_bucket, label_synthetic, majority_vote, vote_codes
from .schema import CategoricalAttribute, ClassLabels, NumericAttribute, PublicSchema, RegressionLabels
from .sharer import partition_agents, share_data, share_predictor
from .synth import (
    ConsistentCounts,
    NoisyCounts,
    SyntheticData,
    consistent_counts,
    exact_node_counts,
    noisy_node_counts,
    opt_private_gen,
    synthesize,
)
from .tree import PrivateTree, grow_tree, max_operator_utilities, select_split

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
