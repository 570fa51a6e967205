"""Type stub of :mod:`marketplace.protocols.pfds`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from ._checks import (
    NEIGHBOURS as NEIGHBOURS,
    MalformedPlain as MalformedPlain,
)
from .baselines import (
    LOSSES as LOSSES,
    LinearModel as LinearModel,
    average_regressors as average_regressors,
    erm_classifier as erm_classifier,
    erm_regressor as erm_regressor,
    functional_mechanism as functional_mechanism,
    functional_mechanism_sensitivity as functional_mechanism_sensitivity,
    objective_perturbation as objective_perturbation,
    vote_classifiers as vote_classifiers,
)
from .budget import (
    PfdsBudget as PfdsBudget,
    Spend as Spend,
    ledger_steps as ledger_steps,
    split_budget as split_budget,
    total_epsilon as total_epsilon,
)
from .label import (
    LabelledData as LabelledData,
    bucket_of as bucket_of,
    draw_in_bucket as draw_in_bucket,
    label_synthetic as label_synthetic,
    majority_vote as majority_vote,
    vote_codes as vote_codes,
)
from .schema import (
    CategoricalAttribute as CategoricalAttribute,
    ClassLabels as ClassLabels,
    NumericAttribute as NumericAttribute,
    PublicSchema as PublicSchema,
    RegressionLabels as RegressionLabels,
)
from .sharer import (
    partition_agents as partition_agents,
    share_data as share_data,
    share_predictor as share_predictor,
)
from .synth import (
    ConsistentCounts as ConsistentCounts,
    NoisyCounts as NoisyCounts,
    SyntheticData as SyntheticData,
    consistent_counts as consistent_counts,
    exact_node_counts as exact_node_counts,
    noisy_node_counts as noisy_node_counts,
    opt_private_gen as opt_private_gen,
    synthesize as synthesize,
)
from .tree import PrivateTree as PrivateTree
from .grow import (
    grow_tree as grow_tree,
    max_operator_utilities as max_operator_utilities,
    select_split as select_split,
)
