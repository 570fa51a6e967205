"""Type stub of :mod:`marketplace.protocols.pfds`: the names it exports, each from its module.

Written once: the package reads this file to import each name on first use (``lazy_loader.attach_stub``),
and type checkers read it as the package's interface.
"""

from ._checks import (
    NEIGHBOURS as NEIGHBOURS,
)
from ._checks import (
    MalformedPlain as MalformedPlain,
)
from .baselines import (
    LOSSES as LOSSES,
)
from .baselines import (
    LinearModel as LinearModel,
)
from .baselines import (
    average_regressors as average_regressors,
)
from .baselines import (
    erm_classifier as erm_classifier,
)
from .baselines import (
    erm_regressor as erm_regressor,
)
from .baselines import (
    functional_mechanism as functional_mechanism,
)
from .baselines import (
    functional_mechanism_sensitivity as functional_mechanism_sensitivity,
)
from .baselines import (
    objective_perturbation as objective_perturbation,
)
from .baselines import (
    vote_classifiers as vote_classifiers,
)
from .budget import (
    PfdsBudget as PfdsBudget,
)
from .budget import (
    Spend as Spend,
)
from .budget import (
    ledger_steps as ledger_steps,
)
from .budget import (
    release_name as release_name,
)
from .budget import (
    split_budget as split_budget,
)
from .budget import (
    total_epsilon as total_epsilon,
)
from .grow import (
    grow_tree as grow_tree,
)
from .grow import (
    max_operator_utilities as max_operator_utilities,
)
from .grow import (
    select_split as select_split,
)
from .label import (
    LabelledData as LabelledData,
)
from .label import (
    bucket_of as bucket_of,
)
from .label import (
    draw_in_bucket as draw_in_bucket,
)
from .label import (
    label_synthetic as label_synthetic,
)
from .label import (
    majority_vote as majority_vote,
)
from .label import (
    vote_codes as vote_codes,
)
from .schema import (
    CategoricalAttribute as CategoricalAttribute,
)
from .schema import (
    ClassLabels as ClassLabels,
)
from .schema import (
    NumericAttribute as NumericAttribute,
)
from .schema import (
    PublicSchema as PublicSchema,
)
from .schema import (
    RegressionLabels as RegressionLabels,
)
from .sharer import (
    partition_agents as partition_agents,
)
from .sharer import (
    share_data as share_data,
)
from .sharer import (
    share_predictor as share_predictor,
)
from .synth import (
    ConsistentCounts as ConsistentCounts,
)
from .synth import (
    NoisyCounts as NoisyCounts,
)
from .synth import (
    SyntheticData as SyntheticData,
)
from .synth import (
    consistent_counts as consistent_counts,
)
from .synth import (
    exact_node_counts as exact_node_counts,
)
from .synth import (
    noisy_node_counts as noisy_node_counts,
)
from .synth import (
    opt_private_gen as opt_private_gen,
)
from .synth import (
    synthesize as synthesize,
)
from .tree import PrivateTree as PrivateTree
